"""Backend choice by declared capability.

Each backend declares the devices and dtypes it can fill and whether it is
installed, and says why not when it cannot fill a tensor. ``select`` tries
them in the order of ``AUTO_ORDER`` for the tensor's device (fastest measured
first) for ``backend="auto"`` (or ``$TINIT_BACKEND``), and raises with every
backend's reason when none fits. All backends compute the same stream
(the native ``tinit::philox4x32_10``); see docs/stream.md.

Backends:
    cuda    the native extension's CUDA kernels (csrc/cuda/), CUDA tensors
    triton  the Triton kernel (tinit.triton_kernels.trunc_normal), CUDA
            tensors, or CPU tensors under TRITON_INTERPRET=1; no float64.
            Shards split along an inner dim and grouped fills take one launch
            (per dtype) of tinit.triton_kernels.trunc_normal_grouped
    cpu     the native extension's CPU kernels (csrc/cpu/), CPU tensors
    torch   the pure-torch reference (tinit.reference), any device; fp64 math
            in steps of 2**18 CPU elements (temporaries of a step's size);
            about 2x torch.nn.init.trunc_normal_'s speed on the CPU, a few
            percent of the native kernels'
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from tinit import ops, reference
from tinit.params import SUPPORTED_DTYPES

__all__ = ["AUTO_ORDER", "BACKENDS", "Backend", "select"]

_CUDA_BUILD_HINT = (
    "rebuild it with its CUDA kernels: install the CUDA toolkit (nvcc; the build needs no CUDA torch), then "
    "`TINIT_FORCE_CUDA=1 pip install --no-build-isolation --no-deps -e .` from the tinit checkout"
)
_TRITON_MODULE = "tinit.triton_kernels.trunc_normal"
_TRITON_GROUPED_MODULE = "tinit.triton_kernels.trunc_normal_grouped"
# On a GPU a tensor above this many elements keeps a launch of its own: the
# single-tensor kernels keep more blocks resident (CUDA: fewer registers than
# the table walk) and store vectors (Triton: a pointer read from the table has
# no known alignment), and one launch more costs microseconds next to such a
# fill. On the CPU the grouped op runs the same loop, so every tensor joins the
# table. Not yet measured on a GPU (bench/bench_gpu_grouped.py compares the two).
_GPU_TABLE_MAX_NUMEL = 1 << 20


def _no_reason(tensor: torch.Tensor) -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    """A way to run the fill.

    Attributes:
        name: the name ``select`` and ``$TINIT_BACKEND`` take.
        fill: ``fill(tensor, seed, stream, offset, constants)`` writes a
            contiguous tensor in place (constants: ``tinit.params.transform_constants``).
        devices: device types it runs on (``torch.device.type``); empty means any.
        dtypes: tensor dtypes it fills.
        install_reason: returns None when the backend is installed and usable
            on this machine, else why not (independent of any tensor).
        tensor_reason: returns None when it can fill this tensor, else why
            not, for conditions beyond device type and dtype (e.g. Triton on
            CPU needs the interpreter). It may read the tensor's device and
            dtype only (``select`` remembers its choice per device and dtype).
        summary: one line for ``python -m tinit.tools.info``.
        fill_runs: ``fill_runs(tensor, seed, stream, runs, constants)`` writes
            a contiguous tensor laid out as ``runs`` (a
            ``tinit.sharding.StreamRuns``: a shard split along an inner dim)
            in one call; None when the backend has no such kernel, and
            ``fill_shard`` fills run by run.
        fill_grouped: ``fill_grouped(tensors, seed, streams, offsets, packed)``
            writes many contiguous tensors of this backend's dtypes on one
            device (tensor t from stream streams[t] at offsets[t] with the
            constants packed[t]) as ``fill`` would one by one, in a few
            launches; None when the backend has no such kernel.
        fill_grouped_runs: ``fill_grouped_runs(tensors, seed, streams, runs,
            packed)`` is ``fill_grouped`` with each tensor laid out as its
            ``runs`` (``tinit.sharding.StreamRuns``), so shards split along an
            inner dim join the table; None when the backend has no such
            kernel, and ``tinit._plan.Plan`` gives them ``fill_shard`` calls.
        table_max_numel: the largest numel ``fill_grouped`` takes (0 without
            it): ``tinit._plan.Plan`` gives a larger tensor a ``fill`` call of
            its own. The CPU takes every tensor (its grouped op runs the
            single-tensor loop); the GPU backends 2**20 elements.
    """

    name: str
    fill: Callable[[torch.Tensor, int, int, int, tuple], None]
    devices: tuple[str, ...]
    dtypes: tuple[torch.dtype, ...]
    install_reason: Callable[[], str | None]
    tensor_reason: Callable[[torch.Tensor], str | None] = field(default=_no_reason)
    summary: str = ""
    fill_runs: Callable | None = None
    fill_grouped: Callable | None = None
    fill_grouped_runs: Callable | None = None
    table_max_numel: int = 0

    def fill_shard(self, tensor: torch.Tensor, seed: int, stream: int, runs, constants: tuple) -> None:
        """Write contiguous ``tensor`` from the stream indices ``runs`` gives it (``tinit.sharding.StreamRuns``).

        One ``fill`` call when the tensor is one stream range, else
        ``fill_runs``, else one ``fill`` per run (correct on every backend,
        one launch per run).
        """
        if runs.contiguous:
            self.fill(tensor, seed, stream, runs.base, constants)
        elif self.fill_runs is not None:
            self.fill_runs(tensor, seed, stream, runs, constants)
        else:
            flat = tensor.view(-1)
            for row in range(runs.rows):
                self.fill(flat[row * runs.run : (row + 1) * runs.run], seed, stream, runs.row_start(row), constants)

    def why_not(self, tensor: torch.Tensor) -> str | None:
        """Why this backend cannot fill ``tensor``, or None when it can.

        Args:
            tensor: the (contiguous) tensor to fill.

        Returns:
            None, or a reason naming what is missing (build, device or dtype).
        """
        reason = self.install_reason()
        if reason is not None:
            return reason
        if self.devices and tensor.device.type not in self.devices:
            return f"runs on {' or '.join(d.upper() for d in self.devices)} tensors, got device {tensor.device}"
        if tensor.dtype not in self.dtypes:
            names = ", ".join(str(d).removeprefix("torch.") for d in self.dtypes)
            return f"fills {names}; got {tensor.dtype}"
        return self.tensor_reason(tensor)


def _native_reason() -> str | None:
    if not ops.native_available():
        return f"{ops.native_load_error()}; {ops.BUILD_HINT}"
    return None


def _cuda_install_reason() -> str | None:
    reason = _native_reason()
    if reason is not None:
        return reason
    if not ops.native_has_cuda():
        torch_build = (
            f"torch {torch.__version__} is a CPU-only build"
            if torch.version.cuda is None
            else f"torch {torch.__version__} has CUDA {torch.version.cuda}"
        )
        return f"the native extension was built without its CUDA kernels ({torch_build}); {_CUDA_BUILD_HINT}"
    return None


@functools.cache
def _triton_module():
    """(module, None) when the Triton kernel and triton import, else (None, reason)."""
    try:
        module = importlib.import_module(_TRITON_MODULE)
    except Exception as exc:  # noqa: BLE001  a broken kernel module must not break the other backends
        return None, f"{_TRITON_MODULE} does not import ({type(exc).__name__}: {exc})"
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        return None, f"triton is not installed ({exc}); `pip install triton` (CUDA builds of torch bring it)"
    return module, None


def _triton_install_reason() -> str | None:
    return _triton_module()[1]


def _triton_tensor_reason(tensor: torch.Tensor) -> str | None:
    module = _triton_module()[0]
    if tensor.device.type == "cpu" and not module.interpreted():
        return (
            "runs on CPU tensors only in the Triton interpreter (TRITON_INTERPRET=1, "
            f"set before {_TRITON_MODULE} is imported)"
        )
    return module.why_not(tensor)


def _triton_fill(tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: tuple) -> None:
    module, reason = _triton_module()
    if module is None:
        raise RuntimeError(f"tinit backend 'triton' is unavailable: {reason}")
    module.trunc_normal_triton_(tensor, seed, stream, offset, constants)


def _triton_grouped_module():
    """The grouped Triton kernel's module, in the mode (compiled or interpreted) of the single-tensor one.

    Raises:
        RuntimeError: it or triton does not import.
    """
    module, reason = _triton_module()
    if module is not None:
        try:
            # Both modules are created once per process, in the TRITON_INTERPRET mode in effect at
            # their first import; the grouped kernel refuses to mix modes (it inlines the helpers).
            return importlib.import_module(_TRITON_GROUPED_MODULE)
        except Exception as exc:  # noqa: BLE001  reported as the backend's reason
            reason = f"{_TRITON_GROUPED_MODULE} does not import ({type(exc).__name__}: {exc})"
    raise RuntimeError(f"tinit backend 'triton' cannot fill shards or groups: {reason}")


def _triton_fill_runs(tensor: torch.Tensor, seed: int, stream: int, runs, constants: tuple) -> None:
    """Every row run of an inner-dim shard in one launch (the grouped kernel, one entry per row)."""
    _triton_grouped_module().trunc_normal_runs_(tensor, seed, stream, runs, constants)


def _triton_fill_grouped(
    tensors: list[torch.Tensor], seed: int, streams: list[int], offsets: list[int], packed: list[tuple]
) -> None:
    """Many tensors on one device in one launch per dtype (``trunc_normal_grouped.trunc_normal_grouped_``)."""
    _triton_grouped_module().trunc_normal_grouped_(tensors, seed, streams, offsets, packed)


def _native_fill_grouped(
    tensors: list[torch.Tensor], seed: int, streams: list[int], offsets: list[int], packed: list[tuple]
) -> None:
    """``tinit::trunc_normal_grouped_`` (CPU: one parallel loop; CUDA: one launch per dtype)."""
    ops.trunc_normal_grouped_native(tensors, seed, streams, offsets, packed)


def _native_fill_grouped_runs(
    tensors: list[torch.Tensor], seed: int, streams: list[int], runs: list, packed: list[tuple]
) -> None:
    """``tinit::trunc_normal_grouped_runs_`` (CPU: one parallel loop over every tensor's rows)."""
    ops.trunc_normal_grouped_runs_native(tensors, seed, streams, runs, packed)


BACKENDS: dict[str, Backend] = {
    "cuda": Backend(
        "cuda",
        ops.trunc_normal_native,
        ("cuda",),
        SUPPORTED_DTYPES,
        _cuda_install_reason,
        summary="native CUDA kernels (csrc/cuda/)",
        fill_runs=ops.trunc_normal_runs_native,
        fill_grouped=_native_fill_grouped,
        table_max_numel=_GPU_TABLE_MAX_NUMEL,
    ),
    "triton": Backend(
        "triton",
        _triton_fill,
        ("cuda", "cpu"),
        tuple(d for d in SUPPORTED_DTYPES if d != torch.float64),
        _triton_install_reason,
        _triton_tensor_reason,
        summary=f"Triton kernel ({_TRITON_MODULE}); CPU only when interpreted",
        fill_runs=_triton_fill_runs,
        fill_grouped=_triton_fill_grouped,
        table_max_numel=_GPU_TABLE_MAX_NUMEL,
    ),
    "cpu": Backend(
        "cpu",
        ops.trunc_normal_native,
        ("cpu",),
        SUPPORTED_DTYPES,
        _native_reason,
        summary="native CPU kernels (csrc/cpu/), SIMD Philox, OpenMP",
        fill_runs=ops.trunc_normal_runs_native,
        fill_grouped=_native_fill_grouped,
        fill_grouped_runs=_native_fill_grouped_runs,
        table_max_numel=2**63,
    ),
    "torch": Backend(
        "torch",
        reference.trunc_normal_,
        (),
        SUPPORTED_DTYPES,
        lambda: None,
        summary="pure-torch reference, fp64 math in steps of 2**18 CPU elements",
        fill_runs=reference.trunc_normal_runs_,
    ),
}
# Fastest measured first, per device type; the reference backend is the
# fallback of last resort. Triton runs on CPU tensors only when asked for by
# name (under TRITON_INTERPRET=1 it is a test tool, not a fast path).
AUTO_ORDER: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda", "triton", "torch"),
    "cpu": ("cpu", "torch"),
}
_DEFAULT_ORDER = ("torch",)

_warned_fallback = False
# select's choices: (device, dtype, name asked for) -> (chosen, every Backend it consulted).
# A choice holds while BACKENDS still maps each consulted name to the same record.
_chosen: dict[tuple, tuple[Backend, tuple[Backend, ...]]] = {}


def auto_order(device: torch.device | str) -> tuple[str, ...]:
    """The backends ``backend="auto"`` tries for tensors on ``device``, in order."""
    return AUTO_ORDER.get(torch.device(device).type, _DEFAULT_ORDER)


def _reasons_text(tensor: torch.Tensor, skip: str | None = None) -> str:
    parts = []
    for name, backend in BACKENDS.items():
        if name == skip:
            continue
        reason = backend.why_not(tensor)
        parts.append(f"{name}: {'can fill it' if reason is None else reason}")
    return "; ".join(parts)


def select(tensor: torch.Tensor, backend: str = "auto") -> Backend:
    """The backend that fills ``tensor``.

    A choice is remembered per (device, dtype, name asked for) while
    ``BACKENDS`` holds the same records (installation is decided once per
    process), so a repeated call costs a dictionary lookup; the fallback to
    the reference backend is not remembered (it warns once).

    Args:
        tensor: the tensor to be filled (its device and dtype decide).
        backend: "auto", or a name in BACKENDS. ``$TINIT_BACKEND`` replaces
            "auto" (an explicit name given here wins over it).

    Returns:
        The chosen Backend: the named one, or for "auto" the first of
        ``auto_order(tensor.device)`` that can fill ``tensor``.

    Raises:
        ValueError: unknown backend name (argument or ``$TINIT_BACKEND``).
        RuntimeError: the named backend cannot fill this tensor, or no
            backend can; the message gives every backend's reason.
    """
    if backend == "auto":
        backend = os.environ.get("TINIT_BACKEND", "auto") or "auto"
        if backend != "auto" and backend not in BACKENDS:
            raise ValueError(
                f"unknown tinit backend {backend!r} in $TINIT_BACKEND; choose from {sorted(BACKENDS)} or 'auto'"
            )
    key = (tensor.device, tensor.dtype, backend)
    found = _chosen.get(key)
    if found is not None:
        for consulted in found[1]:
            if BACKENDS.get(consulted.name) is not consulted:
                break
        else:
            return found[0]
    chosen, consulted = _choose(tensor, backend)
    if consulted:
        _chosen[key] = chosen, consulted
    return chosen


def _choose(tensor: torch.Tensor, backend: str) -> tuple[Backend, tuple[Backend, ...]]:
    """``select``'s choice: (the backend, every record it consulted, or () when it is not to be
    remembered); raises as ``select``."""
    what = f"a {str(tensor.dtype).removeprefix('torch.')} tensor on {tensor.device}"
    if backend != "auto":
        if backend not in BACKENDS:
            raise ValueError(f"unknown tinit backend {backend!r}; choose from {sorted(BACKENDS)} or 'auto'")
        reason = BACKENDS[backend].why_not(tensor)
        if reason is not None:
            raise RuntimeError(
                f"tinit backend {backend!r} cannot fill {what}: {reason}. "
                f"Other backends: {_reasons_text(tensor, skip=backend)}"
            )
        return BACKENDS[backend], (BACKENDS[backend],)
    reasons = {}
    consulted = []
    for name in auto_order(tensor.device):
        consulted.append(BACKENDS[name])
        reason = consulted[-1].why_not(tensor)
        if reason is None:
            if name == "torch" and reasons:
                _warn_fallback(reasons)
                return consulted[-1], ()  # chosen afresh each time
            return consulted[-1], tuple(consulted)
        reasons[name] = reason
    raise RuntimeError(f"no tinit backend can fill {what}: {_reasons_text(tensor)}")


def _warn_fallback(reasons: dict[str, str]) -> None:
    global _warned_fallback
    if not _warned_fallback:
        _warned_fallback = True
        warnings.warn(
            "tinit is using its slow pure-torch reference backend ("
            + "; ".join(f"{k}: {v}" for k, v in reasons.items())
            + ")",
            RuntimeWarning,
            stacklevel=_stacklevel_outside_tinit(),
        )


def _stacklevel_outside_tinit() -> int:
    """``warnings.warn``'s stacklevel of the first frame outside the tinit package (the user's
    call), from the frame that calls ``warnings.warn``: a fixed number would point into tinit for
    every entry point but one."""
    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(2), 2  # the caller of _warn_fallback
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame, level = frame.f_back, level + 1
    return level
