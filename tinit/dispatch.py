"""Backend choice by declared capability.

Each backend says which tensors it can fill and, if not, why. ``select``
tries them in order for ``backend="auto"`` (or ``$TINIT_BACKEND``) and raises
with every backend's reason when none fits. All backends compute the same
stream (csrc/include/tinit/philox.h); see README "The stream".
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from tinit import ops, reference


@dataclass(frozen=True)
class Backend:
    """A way to run the fill: ``fill(tensor, seed, stream, offset, constants)``
    writes a contiguous tensor in place; ``why_not(tensor)`` returns None when
    the backend can fill ``tensor`` and a reason otherwise."""

    name: str
    fill: Callable[[torch.Tensor, int, int, int, tuple], None]
    why_not: Callable[[torch.Tensor], str | None]


def _cpu_why_not(tensor: torch.Tensor) -> str | None:
    if not ops.native_available():
        return f"native extension not built ({ops.native_load_error()}); {ops.BUILD_HINT}"
    if tensor.device.type != "cpu":
        return f"runs on CPU tensors, got device {tensor.device}"
    return None


def _torch_why_not(tensor: torch.Tensor) -> str | None:
    return None


BACKENDS: dict[str, Backend] = {
    "cpu": Backend("cpu", ops.trunc_normal_native, _cpu_why_not),
    "torch": Backend("torch", reference.trunc_normal_, _torch_why_not),
}
# Fastest first; the reference backend is the fallback of last resort.
AUTO_ORDER = ("cpu", "torch")

_warned_fallback = False


def select(tensor: torch.Tensor, backend: str = "auto") -> Backend:
    """The backend that fills ``tensor``.

    Args:
        tensor: the (contiguous, non-meta) tensor to be filled.
        backend: "auto", or a name in BACKENDS. ``$TINIT_BACKEND`` overrides "auto".

    Returns:
        The chosen Backend.

    Raises:
        ValueError: unknown backend name.
        RuntimeError: the named backend cannot fill this tensor (its reason is
            given), or no backend can (every reason is listed).
    """
    if backend == "auto":
        backend = os.environ.get("TINIT_BACKEND", "auto") or "auto"
    if backend != "auto":
        if backend not in BACKENDS:
            raise ValueError(f"unknown tinit backend {backend!r}; choose from {sorted(BACKENDS)} or 'auto'")
        reason = BACKENDS[backend].why_not(tensor)
        if reason is not None:
            raise RuntimeError(f"tinit backend {backend!r} cannot fill this tensor: {reason}")
        return BACKENDS[backend]
    reasons = {}
    for name in AUTO_ORDER:
        reason = BACKENDS[name].why_not(tensor)
        if reason is None:
            if name == "torch" and tensor.device.type == "cpu":
                _warn_fallback(reasons)
            return BACKENDS[name]
        reasons[name] = reason
    raise RuntimeError("no tinit backend can fill this tensor: " + "; ".join(f"{k}: {v}" for k, v in reasons.items()))


def _warn_fallback(reasons: dict[str, str]) -> None:
    global _warned_fallback
    if not _warned_fallback:
        _warned_fallback = True
        warnings.warn(
            "tinit is using its slow pure-torch reference backend ("
            + "; ".join(f"{k}: {v}" for k, v in reasons.items())
            + ")",
            RuntimeWarning,
            stacklevel=4,
        )
