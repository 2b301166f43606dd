"""Thin wrappers over ``torch.ops.tinit.*`` and their fake (meta) kernels.

Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".

The native extension ``tinit._C`` registers the ops (``STABLE_TORCH_LIBRARY(tinit, m)``, on
torch's stable ABI); this module loads it if it was built and registers, for each op, the fake
kernel that lets it run under FakeTensorMode, meta tensors and ``torch.compile``, and for each op
that writes its first argument the ADInplaceOrView kernel that bumps its version counter (the
stable ABI registers no such kernel).
"""

from __future__ import annotations

import functools
import importlib.util

import torch

__all__ = [
    "cpu_isa",
    "cpu_isas",
    "native_available",
    "philox_words",
    "trunc_normal_compute_only",
]

from tinit import _build
from tinit._torch_floor import require_supported_torch

_LOAD_ERROR: str | None = None
# What to do about _LOAD_ERROR: rebuild a checkout; pick another wheel; upgrade torch.
if _build.VARIANT == "source":
    BUILD_HINT = "build it with `pip install --no-build-isolation -e .` from the tinit checkout"
else:
    BUILD_HINT = f"this is tinit's prebuilt {_build.VARIANT} wheel: docs/install.md says which wheel fits this machine"
try:
    require_supported_torch()  # a torch this build cannot load is refused here, naming both versions
except ImportError as exc:
    _LOAD_ERROR = f"the native extension tinit._C does not load ({exc})"
    BUILD_HINT = "upgrade torch (no build of this tinit loads into an older one)"
else:
    try:
        from tinit import _C  # noqa: F401  (loading it registers torch.ops.tinit)
    except ImportError as exc:
        # No _C file is an install without it (the import then reads as a circular import:
        # "cannot import name '_C' from partially initialized module 'tinit'"); a file that does
        # not load is a broken build (a missing library).
        if importlib.util.find_spec("tinit._C") is None:
            _LOAD_ERROR = "tinit was installed without its native extension (TINIT_NO_EXTENSION=1, or its build failed)"
        else:
            _LOAD_ERROR = f"the native extension tinit._C does not load ({exc})"


def native_available() -> bool:
    """True when the C++ extension is built and its ops are registered."""
    return _LOAD_ERROR is None


def native_load_error() -> str | None:
    """Why the C++ extension could not be loaded, or None when it is loaded."""
    return _LOAD_ERROR


def cpu_isa() -> str | None:
    """The CPU engine of the native kernels in this process (``torch.ops.tinit.cpu_isa``):
    "scalar", "avx2" or "avx512", chosen once, by ``TINIT_CPU_ISA`` or the best this CPU runs.

    Returns:
        None when the extension is missing.

    Raises:
        RuntimeError: ``TINIT_CPU_ISA`` names an engine this CPU lacks or none, or the
            load-time self-test failed (the message says which).
    """
    return torch.ops.tinit.cpu_isa() if native_available() else None


def cpu_isas() -> list[str]:
    """The CPU engines this CPU runs, scalar first (``torch.ops.tinit.cpu_isas``); [] without
    the extension."""
    return list(torch.ops.tinit.cpu_isas()) if native_available() else []


def native_has_cuda() -> bool:
    """True when the loaded C++ extension was built with its CUDA kernels.

    Asks torch's dispatcher whether ``tinit::trunc_normal_`` has a CUDA kernel,
    which the CUDA binding registers for the CUDA dispatch key; needs no GPU.

    Returns:
        False when the extension is missing or was built CPU-only.
    """
    return has_kernel("trunc_normal_", "CUDA")


if native_available():

    @torch.library.register_fake("tinit::trunc_normal_")
    def _trunc_normal_fake(self, seed, stream, offset, transform):
        return None

    @torch.library.register_fake("tinit::philox_")
    def _philox_fake(self, seed, stream, offset):
        return None

    @torch.library.register_fake("tinit::trunc_normal_runs_")
    def _trunc_normal_runs_fake(self, seed, stream, offset, run, outer_sizes, outer_starts, transform):
        return None

    @torch.library.register_fake("tinit::philox_runs_")
    def _philox_runs_fake(self, seed, stream, offset, run, outer_sizes, outer_starts):
        return None

    @torch.library.register_fake("tinit::trunc_normal_grouped_")
    def _trunc_normal_grouped_fake(tensors, seed, streams, offsets, transform):
        return None

    @torch.library.register_fake("tinit::trunc_normal_grouped_runs_")
    def _trunc_normal_grouped_runs_fake(
        tensors, seed, streams, offsets, runs, outer_dims, outer_sizes, outer_starts, transform
    ):
        return None

    # The benchmarks' op, in its own library (``STABLE_TORCH_LIBRARY(tinit_bench, m)``), outside the public schema.
    @torch.library.register_fake("tinit_bench::trunc_normal_compute_only_")
    def _trunc_normal_compute_only_fake(self, seed, stream, offset, transform):
        return None


# The ops that write their first argument (``Tensor(a!) self`` or ``Tensor(a!)[] tensors``), by library.
WRITING_OPS = {
    "tinit": (
        "trunc_normal_",
        "philox_",
        "trunc_normal_runs_",
        "philox_runs_",
        "trunc_normal_grouped_",
        "trunc_normal_grouped_runs_",
    ),
    "tinit_bench": ("trunc_normal_compute_only_",),
}


def _version_bump_kernel(op):
    """The ADInplaceOrView kernel of ``op``: the write below it, then its first argument's version
    counter moves, as after every ATen in-place op, so that autograd refuses a backward through
    values that were overwritten (instead of silently computing wrong gradients). Every caller
    of ``torch.ops.tinit.*`` goes through it (inference_mode skips it, as it skips ATen's)."""
    below = torch._C._after_ADInplaceOrView_keyset
    bump = torch.autograd.graph.increment_version

    def kernel(keyset, written, *args):
        op.redispatch(keyset & below, written, *args)
        bump(written)  # a tensor, or the list of the grouped ops

    return kernel


def _register_version_bumps() -> list[torch.library.Library]:
    libraries = []
    for namespace, names in WRITING_OPS.items():
        library = torch.library.Library(namespace, "IMPL")
        for name in names:
            op = getattr(getattr(torch.ops, namespace), name).default
            library.impl(name, _version_bump_kernel(op), "ADInplaceOrView", with_keyset=True)
        libraries.append(library)
    return libraries


# Kept alive: a torch.library.Library takes its kernels back when it is collected.
_VERSION_BUMPS = _register_version_bumps() if native_available() else []


_U64, _I63 = 2**64, 2**63


def as_int64(value: int) -> int:
    """A uint64 (0 <= value < 2**64) as the int64 with the same bits.

    Raises:
        ValueError: ``value`` outside [0, 2**64).
    """
    if not 0 <= value < _U64:
        raise ValueError(f"expected an unsigned 64-bit integer, got {value}")
    return value - _U64 if value >= _I63 else value


def trunc_normal_native(
    tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: tuple[float, ...]
) -> None:
    """Fill contiguous ``tensor`` in place through ``torch.ops.tinit.trunc_normal_``.

    Args:
        tensor: contiguous tensor of a supported dtype on the CPU or a CUDA device.
        seed, stream: uint64 Philox key and stream id, in [0, 2**64) (checked by the caller).
        offset: stream index of element 0, >= 0.
        constants: its ``tinit.params.TruncNormalParams``.
    """
    # as_int64 inline: this is the call every single-tensor CPU/CUDA fill ends in
    torch.ops.tinit.trunc_normal_(
        tensor, seed - _U64 if seed >= _I63 else seed, stream - _U64 if stream >= _I63 else stream, offset, constants
    )


def trunc_normal_runs_native(tensor: torch.Tensor, seed: int, stream: int, runs, constants: tuple[float, ...]) -> None:
    """Fill contiguous ``tensor`` laid out as ``runs`` (a ``tinit.sharding.StreamRuns``)
    through ``torch.ops.tinit.trunc_normal_runs_`` (CPU: one parallel loop; CUDA: one launch)."""
    torch.ops.tinit.trunc_normal_runs_(
        tensor,
        as_int64(seed),
        as_int64(stream),
        runs.base,
        runs.run,
        list(runs.outer_sizes),
        list(runs.outer_starts),
        list(constants),
    )


@functools.cache
def has_kernel(op: str, dispatch_key: str) -> bool:
    """True when the loaded extension registers ``tinit::<op>`` for ``dispatch_key`` ("CPU", "CUDA")."""
    if not native_available():
        return False
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(f"tinit::{op}", dispatch_key))
    except (AttributeError, RuntimeError):
        return False


def trunc_normal_grouped_native(
    tensors: list[torch.Tensor], seed: int, streams: list[int], offsets: list[int], constants: list[tuple[float, ...]]
) -> None:
    """Fill many contiguous tensors on one device in one call (``torch.ops.tinit.trunc_normal_grouped_``).

    Tensor t gets exactly what ``trunc_normal_native(tensors[t], seed,
    streams[t], offsets[t], constants[t])`` writes. On the CPU the elements of
    all tensors share the threads; on CUDA a table in device memory drives
    one launch per dtype. Dtypes may differ between tensors.
    """
    flat = [value for packed in constants for value in packed]
    torch.ops.tinit.trunc_normal_grouped_(tensors, as_int64(seed), [as_int64(s) for s in streams], list(offsets), flat)


def trunc_normal_grouped_runs_native(
    tensors: list[torch.Tensor], seed: int, streams: list[int], runs: list, constants: list[tuple[float, ...]]
) -> None:
    """Fill many contiguous CPU tensors, each laid out as its ``runs`` (a ``tinit.sharding.StreamRuns``), in one
    call (``torch.ops.tinit.trunc_normal_grouped_runs_``).

    Tensor t gets exactly what ``trunc_normal_runs_native(tensors[t], seed,
    streams[t], runs[t], constants[t])`` writes (``trunc_normal_native`` at
    ``runs[t].base`` when it is one range), so shards split along an inner
    dim share a model's one call and its threads instead of one call each.
    """
    flat = [value for packed in constants for value in packed]
    sizes, starts = [], []
    for r in runs:
        sizes.extend(r.outer_sizes)
        starts.extend(r.outer_starts)
    torch.ops.tinit.trunc_normal_grouped_runs_(
        tensors,
        as_int64(seed),
        [as_int64(s) for s in streams],
        [r.base for r in runs],
        [r.run for r in runs],
        [len(r.outer_sizes) for r in runs],
        sizes,
        starts,
        flat,
    )


def trunc_normal_compute_only(
    tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: tuple[float, ...]
) -> None:
    """Run the CUDA fill's arithmetic without its stores (benchmarks only: ``torch.ops.tinit_bench``).

    Args:
        tensor: contiguous CUDA tensor (float32, float64, bfloat16 or float16);
            its contents are unspecified afterwards.
        seed, stream, offset, constants: as for ``trunc_normal_native``.

    Raises:
        RuntimeError: the extension was built without CUDA, or ``tensor`` is
            not a contiguous CUDA tensor.
    """
    torch.ops.tinit_bench.trunc_normal_compute_only_(tensor, as_int64(seed), as_int64(stream), offset, list(constants))


def philox_words(
    numel: int, seed: int, stream: int, offset: int = 0, device: torch.device | str = "cpu", runs=None
) -> torch.Tensor:
    """The uint32 stream words for indices [offset, offset + numel) as int64 in [0, 2**32).

    Args:
        numel: number of words.
        seed, stream: unsigned 64-bit Philox key and stream id.
        offset: index of the first word (>= 0).
        device: where the native op runs.
        runs: a ``tinit.sharding.StreamRuns`` covering ``numel`` elements (CPU
            only): the words of a shard's stream indices instead of
            [offset, offset + numel); ``offset`` is then ignored.

    Returns:
        int64 tensor of shape (numel,).

    Raises:
        RuntimeError: the native extension is not built.
    """
    if not native_available():
        raise RuntimeError(f"tinit native extension not available ({_LOAD_ERROR}); {BUILD_HINT}")
    out = torch.empty(numel, dtype=torch.int32, device=device)
    if runs is None:
        torch.ops.tinit.philox_(out, as_int64(seed), as_int64(stream), offset)
    else:
        torch.ops.tinit.philox_runs_(
            out, as_int64(seed), as_int64(stream), runs.base, runs.run, list(runs.outer_sizes), list(runs.outer_starts)
        )
    return out.to(torch.int64) & 0xFFFFFFFF
