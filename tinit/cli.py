"""Deprecated alias of ``tinit.tools.cli``, kept for one release: import ``tinit.tools.cli`` instead.

The alias is the module itself (``sys.modules`` maps both names to it), so every name, and a
monkeypatch through the old path, reaches the same objects.
"""

import sys
import warnings

import tinit.tools.cli as _new

warnings.warn(
    "tinit.cli moved to tinit.tools.cli; the old path goes in the next release", DeprecationWarning, stacklevel=2
)

sys.modules[__name__] = _new
