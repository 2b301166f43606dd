"""How this copy of tinit was built: a checkout's own values below, a wheel's written by its build.

scripts/build_wheels.sh rewrites this file in the copy of the checkout it builds a wheel from (the
checkout keeps these values), so an installed wheel says which variant it is (``tinit info``
prints it) and which torch its extension was compiled against.
"""

from __future__ import annotations

# "source" (a checkout, an editable or ``pip install .`` build), or a wheel's variant: "cpu", "cu12", "cu13".
VARIANT = "source"
# The CUDA release the wheel's kernels were compiled with ("13.0"); None for "cpu" and "source".
CUDA: str | None = None
# The torch the wheel's extension was compiled against (``torch.__version__`` at build time); None for "source".
TORCH: str | None = None
