"""Deprecated alias of ``tinit.tools.hf_families``, kept for one release: import ``tinit.tools.hf_families`` instead.

The alias is the module itself (``sys.modules`` maps both names to it), so every name, and a
monkeypatch through the old path, reaches the same objects.
"""

import sys
import warnings

import tinit.tools.hf_families as _new

warnings.warn(
    "tinit.hf_families moved to tinit.tools.hf_families; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)

sys.modules[__name__] = _new
