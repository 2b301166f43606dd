"""Deprecated: the report's stack moved to ``tinit.tools.toy_models``; this alias goes in the next release.

The old names re-export the same objects (``Block`` is ``tinit.tools.toy_models.StackBlock``, ...).
"""

import warnings

from tinit.tools.toy_models import NORMS, Stack, StackConfig, deepnorm_alpha
from tinit.tools.toy_models import StackAttention as Attention
from tinit.tools.toy_models import StackBlock as Block
from tinit.tools.toy_models import StackMLP as MLP

__all__ = ["MLP", "NORMS", "Attention", "Block", "Stack", "StackConfig", "deepnorm_alpha"]

warnings.warn(
    "tinit.report_models moved to tinit.tools.toy_models (Attention, MLP, Block are now StackAttention, "
    "StackMLP, StackBlock); the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
