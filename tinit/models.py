"""Deprecated: the toy GPT moved to ``tinit.tools.toy_models``; this alias goes in the next release.

The old names re-export the same classes (``Attention`` is ``tinit.tools.toy_models.GPTAttention``, ...).
"""

import warnings

from tinit.tools.toy_models import GPT, GPTConfig
from tinit.tools.toy_models import GPTMLP as MLP
from tinit.tools.toy_models import GPTAttention as Attention
from tinit.tools.toy_models import GPTBlock as Block
from tinit.tools.toy_models import GPTTransformer as Transformer

__all__ = ["GPT", "MLP", "Attention", "Block", "GPTConfig", "Transformer"]

warnings.warn(
    "tinit.models moved to tinit.tools.toy_models (Attention, MLP, Block, Transformer are now GPTAttention, "
    "GPTMLP, GPTBlock, GPTTransformer); the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
