"""Whether the installed torch can load this build's native extension, checked before ``tinit._C`` loads.

An extension built on torch's stable ABI (``_C.abi3.so``: one wheel per platform for every supported
torch) loads on any torch from ``TORCH_FLOOR`` on; setup.py's ``TORCH_TARGET_VERSION`` is the same
release. An extension built against torch's full C++ API loads only with the torch release it was
compiled against, which a wheel records (``tinit._build.TORCH``); a source build was compiled here,
against the torch installed here, and is not checked.

``tinit.ops`` calls ``require_supported_torch`` before it loads ``tinit._C``: the ImportError it
raises becomes the reason the native backends are unavailable (``tinit info``, the dispatcher's
errors), and the pure-torch backend still fills, with its warning.
"""

from __future__ import annotations

import importlib.util
import re

__all__ = ["TORCH_FLOOR", "extension_file", "require_supported_torch", "torch_problem"]

# The oldest torch the stable-ABI build supports, "major.minor".
TORCH_FLOOR = "2.11"


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string ("2.13.0+cpu", "2.10.0a0+git1234" -> (2, 10))."""
    found = re.match(r"\s*(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"not a torch version: {version!r}")
    return int(found.group(1)), int(found.group(2))


def torch_problem(torch_version: str, extension: str | None, built_with: str | None) -> str | None:
    """Why the installed torch cannot load the extension, naming both versions; None when it can.

    Args:
        torch_version: the installed ``torch.__version__``.
        extension: the extension's file name (``_C.abi3.so``, ``_C.cpython-311-x86_64-linux-gnu.so``),
            None when there is none.
        built_with: the torch a wheel's extension was compiled against (``tinit._build.TORCH``), None
            for a source build.
    """
    if extension is None:
        return None
    have = _release(torch_version)
    if ".abi3." in extension:
        if have < _release(TORCH_FLOOR):
            return (
                f"tinit's native extension needs torch >= {TORCH_FLOOR} (the oldest torch its stable-ABI "
                f"build supports), but torch {torch_version} is installed: upgrade torch"
            )
        return None
    if built_with is not None and _release(built_with) != have:
        major, minor = _release(built_with)
        return (
            f"tinit's native extension was compiled against torch {built_with} and loads only with torch "
            f"{major}.{minor}, but torch {torch_version} is installed: install torch {major}.{minor}, or a tinit "
            "wheel built for this torch"
        )
    return None


def extension_file() -> str | None:
    """The file of ``tinit._C`` (found, not loaded), None when there is none."""
    spec = importlib.util.find_spec("tinit._C")
    return None if spec is None else spec.origin


def require_supported_torch() -> None:
    """Raise ImportError, naming both versions, when the installed torch cannot load ``tinit._C``."""
    import torch

    from tinit import _build

    problem = torch_problem(torch.__version__, extension_file(), _build.TORCH)
    if problem is not None:
        raise ImportError(problem)
