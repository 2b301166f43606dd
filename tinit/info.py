"""Deprecated alias of ``tinit.tools.info``, kept for one release: import ``tinit.tools.info`` and run
``python -m tinit.tools.info`` instead.

The alias is the module itself (``sys.modules`` maps both names to it), so every name, and a
monkeypatch through the old path, reaches the same objects; ``python -m tinit.info`` prints the same
report.
"""

import sys
import warnings

import tinit.tools.info as _new

warnings.warn(
    "tinit.info moved to tinit.tools.info (python -m tinit.tools.info); the old path goes in the next release",
    DeprecationWarning,
    # Run as a script the warning is this file's own (shown by default); imported, it is the importer's.
    stacklevel=1 if __name__ == "__main__" else 2,
)

if __name__ == "__main__":
    _new.main()
else:
    sys.modules[__name__] = _new
