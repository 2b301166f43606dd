"""Deprecated alias of ``tinit.tools.cli_models``, kept for one release: import ``tinit.tools.cli_models`` instead.

The alias is the module itself (``sys.modules`` maps both names to it), so every name, and a
monkeypatch through the old path, reaches the same objects.
"""

import sys
import warnings

import tinit.tools.cli_models as _new

warnings.warn(
    "tinit.cli_models moved to tinit.tools.cli_models; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)

sys.modules[__name__] = _new
