"""tinit: one-pass truncated-normal initialisation for large transformers.

Public API:
    trunc_normal_     drop-in for torch.nn.init.trunc_normal_ (the function tinit.nn.init.trunc_normal_)
    trunc_normal_at_  the same from an explicit (seed, stream, offset)
    write_spec_       a tinit.schemes.InitSpec from an explicit (seed, stream, offset)
    write_grouped_    many tensors' specs in a few native calls (FillItem: one tensor of it)
    nn                tinit.nn.init: a full replacement for torch.nn.init on tinit's stream
    fill_             one parameter by a named scheme (tinit.schemes.SCHEMES)
    init_model_       every parameter of a model (roles from names, ties once, meta models, DTensor/FSDP2
                      shards, one grouped native call)
    stream_for        a parameter's stream id from its fully qualified name
    materialise_      to_empty plus restored weight ties and recomputed buffers (tinit.buffers)
    patch_torch_init  route torch.nn.init's (and timm's) random initialisers to tinit while active
    mup_param_groups  optimiser param groups with muP's per-parameter learning rates
    report            step-zero variance and gradients against depth, per scheme (tinit report)
    STREAM_VERSION    the version of the values a seed gives (docs/stream.md)
    InternalOverlapError  raised for a tensor whose elements share memory (a ValueError and a RuntimeError)
    InferenceTensorError  raised for an inference tensor outside torch.inference_mode (the same)
"""

from tinit import nn
from tinit._fill import FillItem, fill_, trunc_normal_at_, write_grouped_, write_spec_
from tinit._model_init import init_model_, materialise_, stream_for
from tinit._mup_groups import mup_param_groups
from tinit._patch import patch_torch_init
from tinit.nn.init import trunc_normal_
from tinit.params import STREAM_VERSION, InferenceTensorError, InternalOverlapError

__all__ = [
    "STREAM_VERSION",
    "FillItem",
    "InferenceTensorError",
    "InternalOverlapError",
    "fill_",
    "init_model_",
    "materialise_",
    "mup_param_groups",
    "nn",
    "patch_torch_init",
    "report",
    "stream_for",
    "trunc_normal_",
    "trunc_normal_at_",
    "write_grouped_",
    "write_spec_",
]
__version__ = "0.3.0"


def __getattr__(name: str):
    """``tinit.report``, imported on first use: ``import tinit`` loads no tool (``tinit.tools``).

    Args:
        name: the attribute looked up on the package and not found in it.

    Returns:
        ``tinit.tools.report.report`` for ``"report"`` (bound on the package from then on).

    Raises:
        AttributeError: any other name.
    """
    if name == "report":
        from tinit.tools.report import report

        globals()["report"] = report
        return report
    raise AttributeError(f"module 'tinit' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The package's names, ``report`` included before its first use."""
    return sorted({*globals(), "report"})
