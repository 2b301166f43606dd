"""tinit: one-pass truncated-normal initialisation for large transformers.

Public API:
    trunc_normal_     drop-in for torch.nn.init.trunc_normal_
    trunc_normal_at_  the same from an explicit (seed, stream, offset)
    fill_             one parameter by a named scheme (gpt2, normal, ...)
    init_model_       every parameter of a model
"""

from tinit.fill import fill_, trunc_normal_, trunc_normal_at_
from tinit.model_init import init_model_

__all__ = ["fill_", "init_model_", "trunc_normal_", "trunc_normal_at_"]
__version__ = "0.1.0"
