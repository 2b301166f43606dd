"""Host-side helpers shared by the Triton fills: the triton import, launch settings, argument checks,
64-bit integers as int32 bit patterns, and tables uploaded to the device without a host sync.

Private to ``tinit.triton_kernels``; the public names are re-exported by ``trunc_normal`` and
``trunc_normal_grouped``. Importing this module never requires triton.
"""

from __future__ import annotations

import contextlib
import operator

import numpy as np
import torch
from torch.torch_version import TorchVersion

from tinit import params
from tinit._ndtri_table import COEFFICIENTS as _NDTRI_COEFFICIENTS, ROW as _NDTRI_ROW

try:
    import triton
    import triton.language as tl

    IMPORT_ERROR: str | None = None
except ImportError as exc:  # the modules stay importable; calls raise ImportError
    triton = None
    tl = None
    IMPORT_ERROR = f"triton failed to import ({exc})"
if triton is not None and not hasattr(torch.library, "triton_op"):
    triton = None
    IMPORT_ERROR = f"torch {torch.__version__} has no torch.library.triton_op (torch >= 2.6 has)"

INSTALL_HINT = "install triton (`pip install triton`, or tinit[triton]) to use the triton backend"
# tinit's dtypes but fp64, whose transform (the C++ double path) is not ported to Triton.
SUPPORTED_DTYPES = tuple(d for d in params.SUPPORTED_DTYPES if d != torch.float64)
# Counter blocks (four elements each) per program and warps per program. The
# interpreter's cost is per program, so it takes larger programs. The one-tensor
# fill's programs are straight-line code: 512 blocks (16 values a thread) spread
# their set-up (round keys, the store's checks) over twice the values of 256. The
# grouped fill loops over sub-blocks of at most GROUPED_BLOCK, its set-up outside
# the loop.
DEFAULT_BLOCK = 512
GROUPED_BLOCK = 256
INTERPRETER_BLOCK = 2048
NUM_WARPS = 4
# Compile options of the fills: no contraction of a*b + c into an fma beyond the
# explicit tl.fma calls (the C++ builds use -ffp-contract=off).
LAUNCH_OPTIONS = {"num_warps": NUM_WARPS, "enable_fp_fusion": False}
_NDTRI_TABLES: dict[torch.device, torch.Tensor] = {}
# A CUDA table's upload until a fill saw it complete: it ran on the stream current at the first
# fill, and a fill on another stream waits for it (a GPU-side wait, no host sync).
_NDTRI_UPLOADS: dict[torch.device, torch.cuda.Event] = {}


def triton_available() -> bool:
    """Whether the Triton backend can run at all.

    Returns:
        True when triton imports and torch has ``torch.library.triton_op``.
    """
    return IMPORT_ERROR is None


def require_triton() -> None:
    """Raise ImportError (with the install hint) unless ``triton_available()``."""
    if not triton_available():
        raise ImportError(f"tinit's triton backend cannot run: {IMPORT_ERROR}; {INSTALL_HINT}")


def is_interpreted(kernel) -> bool:
    """Whether ``kernel`` (a @triton.jit function) runs in the Triton interpreter: TRITON_INTERPRET=1
    was set when it was created. False without triton."""
    if not triton_available():
        return False
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(kernel, InterpretedFunction)


def check_int(name: str, value, low: int, high: int) -> int:
    """``value`` as a Python int (numpy and 0-d integer tensors too) in [low, high).

    Raises:
        TypeError: a bool or a value without ``__index__``.
        ValueError: outside [low, high).
    """
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if not low <= value < high:
        raise ValueError(f"{name} must be in [{low}, {high}), got {value}")
    return value


def check_block(block: int) -> None:
    """ValueError unless ``block`` (counter blocks per program) is a power of two."""
    if not (isinstance(block, int) and block > 0 and block & (block - 1) == 0):
        raise ValueError(f"block must be a power of two, got {block!r}")


def dtype_refusal(dtype: torch.dtype) -> str:
    """Why a tensor of ``dtype`` (outside SUPPORTED_DTYPES) is refused, in the words of every check."""
    names = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES[:-1])
    return f"fills {names} and {str(SUPPORTED_DTYPES[-1]).removeprefix('torch.')} tensors, got {dtype}"


def check_tensor(tensor, what: str) -> None:
    """TypeError for a non-tensor or a dtype outside SUPPORTED_DTYPES, ValueError for a non-contiguous tensor."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{what}: {dtype_refusal(tensor.dtype)}")
    if not tensor.is_contiguous():
        raise ValueError(f"{what}: expected a contiguous tensor")


def schema_int(name: str, value) -> int:
    """``value`` as the int64 an op's ``int`` argument carries; the op checks its own range.

    Raises:
        TypeError: not an int.
        ValueError: outside [-2**63, 2**63).
    """
    return check_int(name, value, -(2**63), 2**63)


def check_stream_range(offset: int, numel: int, what: str) -> None:
    """ValueError when stream indices offset + [0, numel) pass 2**63 (the int64 stream index)."""
    if offset + numel > 2**63:
        raise ValueError(f"{what}: stream indices past 2**63 (offset {offset}, numel {numel})")


def i32_bits(word: int) -> int:
    """A uint32 as the int32 with the same bits (so triton types it i32)."""
    return word - 2**32 if word >= 2**31 else word


def f32(value: float) -> float:
    """``static_cast<float>(value)`` (round to nearest even), as a Python float."""
    return float(np.float32(value))


# Since torch 2.11 the caching host allocator routes a pinned allocation made during a CUDA-graph
# capture to the graph's private pool (CUDAGraph::capture_begin calls
# HostAllocator::begin_allocate_to_pool) and never recycles such a block once a copy recorded an
# event on it (CachingHostAllocatorImpl::free: "allocated_during_capture"), so a captured copy
# reads at replay what the capture wrote. torch 2.10's allocator has neither: the block goes back
# to the free list, and a later call may overwrite what the graph reads.
_CAPTURE_SAFE_TORCH = TorchVersion(torch.__version__) >= (2, 11)


def capturing(device: torch.device) -> bool:
    """Whether the current stream of ``device`` (a CUDA device) is capturing a CUDA graph."""
    if device.type != "cuda":
        return False
    with torch.cuda.device(device):
        return torch.cuda.is_current_stream_capturing()


def check_capture(device: torch.device, what: str) -> None:
    """RuntimeError when ``device``'s stream is capturing and torch's host allocator may recycle a
    pinned table the graph reads at replay (torch < 2.11, ``_CAPTURE_SAFE_TORCH``)."""
    if not _CAPTURE_SAFE_TORCH and capturing(device):
        raise RuntimeError(
            f"{what}: cannot be captured in a CUDA graph with torch {torch.__version__}: its caching host "
            "allocator may recycle the pinned table the graph copies at replay (torch >= 2.11 keeps it); "
            "fill outside the capture, or upgrade torch"
        )


def upload(table: np.ndarray, device: torch.device, what: str) -> torch.Tensor:
    """``table`` (a numpy array) on ``device``, without blocking the host.

    On CUDA it is written into a pinned host tensor of the caching host allocator
    (``torch.empty_like(..., pin_memory=True)``) and copied with ``non_blocking=True`` on the current
    stream. copy_kernel_cuda then records an event on the pinned block
    (``HostAllocator::record_event``, by the host tensor's storage context), and
    ``CachingHostAllocatorImpl::free`` does not hand the block out again before that event has
    completed: dropping the host tensor here is safe. Under a CUDA-graph capture the block is taken
    from the graph's private pool and never reused (``_CAPTURE_SAFE_TORCH``; refused by
    ``check_capture`` on an older torch); the device tensor comes from the graph's pool of the
    device caching allocator, whose addresses stay valid as long as the graph.

    Raises:
        RuntimeError: capturing on a torch whose host allocator may recycle the table.
    """
    source = torch.from_numpy(np.ascontiguousarray(table))
    if device.type != "cuda":
        return source.to(device)
    check_capture(device, what)
    host = torch.empty_like(source, pin_memory=True)
    host.copy_(source)
    return host.to(device, non_blocking=True)


def ndtri_rows() -> np.ndarray:
    """ndtri_table's fp32 coefficient rows (SEGMENTS x ROW, flat) in the order the kernels read them:
    last row first, so that row 255 - seg, ``tinit::ndtri_segment``'s seg, is at 8 (bits >> 22)
    (``transform.ndtri_row``: an offset without a subtraction). Each row's values are unchanged."""
    rows = np.asarray(_NDTRI_COEFFICIENTS, dtype=np.float32).reshape(-1, _NDTRI_ROW)
    return np.ascontiguousarray(rows[::-1]).reshape(-1)


def ndtri_table_on(device: torch.device) -> torch.Tensor:
    """The fp32 coefficient rows of ``ndtri_rows`` on ``device``, made once.

    Raises:
        RuntimeError: first asked for inside a CUDA-graph capture: the cached table must hold its
            values outside the graph too, so it is made by an eager fill on that device first.
    """
    table = _NDTRI_TABLES.get(device)
    if table is None:
        if capturing(device):
            raise RuntimeError(
                f"tinit's triton backend has not uploaded its ndtri table to {device} yet, and cannot "
                "inside a CUDA-graph capture: run one triton fill on this device (any size) before capturing"
            )
        table = upload(ndtri_rows(), device, "the triton backend's ndtri table")
        if device.type == "cuda":
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(device))
            _NDTRI_UPLOADS[device] = event
        _NDTRI_TABLES[device] = table
        return table
    event = _NDTRI_UPLOADS.get(device)
    # Inside a capture nothing waits (an event query or a wait on an event recorded outside it is not
    # capturable): the capture came after a first, eager fill, and torch.cuda.graph synchronises the
    # device before it captures.
    if event is not None and not capturing(device):
        if event.query():
            del _NDTRI_UPLOADS[device]
        else:
            torch.cuda.current_stream(device).wait_event(event)
    return table


def ndtri_table_made_on(device: torch.device) -> torch.Tensor:
    """A new copy of ``ndtri_rows`` on ``device``, for a traced fill: made in the trace (fake
    tensors; no data moves)."""
    return torch.tensor(ndtri_rows().tolist(), dtype=torch.float32, device=device)


def on_device(device: torch.device):
    """Context in which Triton launches on ``device``: it launches on the current CUDA device, so a
    cuda:1 tensor filled from a cuda:0 thread needs cuda:1 made current."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
