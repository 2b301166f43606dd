"""Grouped Triton fill: many tensors, or the row runs of one shard, in one launch per dtype.

Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".

A model's thousands of small tensors, and an inner-dim shard's rows (each a
contiguous range of the stream, ``tinit.sharding.StreamRuns``), would each cost
one launch of ``_trunc_normal_kernel``. Here one launch per dtype fills them
all from a metadata table, as NVIDIA apex's multi-tensor apply does. Every
element gets exactly the value ``trunc_normal_triton_`` gives it alone (same
counter blocks, element indexing and transform: the helpers of ``philox``
and ``transform`` that ``_trunc_normal_kernel`` inlines too): values depend
only on (seed, stream, stream index) and the constants, never on program ids,
BLOCK or how the tensors were batched.

Table (one int64 device tensor per launch, read by the kernel through its
int32 view: little-endian halves, lo first, as every CUDA GPU and the x86
interpreter store them; uploaded by ``_host.upload``, a pinned host buffer
and a non-blocking copy on the current stream, so a fill never blocks the
host and can be captured in a CUDA graph). O(entries + distinct constants)
words, never O(elements):

    [0, E)                     first[e]: the grid index of entry e's first program
                               (prefix counts of programs per entry; increasing)
    entry_base + 5 e + [0,5)   entry e: output address (tensor.data_ptr()), numel,
                               stream, offset (stream index of element 0), constants row
    const_base + 12 c + [0,12) constants row c (_CONST_WORDS = PARAM_COUNT / 2 int64 words) as
                               PARAM_COUNT int32 (ROW_FIELDS): the fp32
                               bit patterns of the TruncNormalParams fields
                               FLOAT_FIELDS (a_cdf, ..., l5), then mode, flip, split
                               (read back as a transform.KernelParams)

Program p finds its entry by a binary search of ``first`` (LOG fixed steps,
LOG = ceil(log2 E) rounded up to a multiple of 4 so that few variants
compile), casts the address to a pointer of the launch's dtype and fills, in
a loop, the sub-blocks REPS (p - first[e]) + [0, REPS) of BLOCK counter blocks
of that entry (fewer in its last program), so the search and the constants
are loaded once per REPS sub-blocks. The transform mode is a per-entry
run-time value; a program holds one entry, so its branch is uniform.

The fills are registered as the ops ``torch.ops.tinit.trunc_normal_grouped_triton_``
and ``torch.ops.tinit.trunc_normal_runs_triton_`` (``torch.library.custom_op``
with a fake kernel: opaque to torch.compile/export, whose fake tensors have no
addresses to put in a table), with the schemas of the CPU ops
``tinit::trunc_normal_grouped_`` and ``tinit::trunc_normal_runs_``.
Importing this module never requires triton; calling it without triton
raises ImportError.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from tinit.ops import as_int64
from tinit.params import PARAM_COUNT

from . import philox
from ._host import (
    GROUPED_BLOCK,
    INTERPRETER_BLOCK,
    LAUNCH_OPTIONS,
    check_block,
    check_int,
    check_stream_range,
    check_tensor,
    is_interpreted,
    ndtri_table_on,
    on_device,
    require_triton,
    schema_int,
    tl,
    triton,
    triton_available,
    upload,
)
from .philox import counter_blocks, split_u64
from .transform import FLOAT_FIELDS, kernel_constants

__all__ = [
    "trunc_normal_grouped_",
    "trunc_normal_runs_",
]

GROUPED_OP_NAME = "tinit::trunc_normal_grouped_triton_"
RUNS_OP_NAME = "tinit::trunc_normal_runs_triton_"
# The DTYPE constexpr of _grouped_kernel.
_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
_ENTRY_WORDS = 5  # int64 words per entry
# A constants row: these int32 words, by the field names of transform.KernelParams
# (the float fields as fp32 bit patterns) and mode.
ROW_FIELDS = (*FLOAT_FIELDS, "mode", "flip", "split")
_CONST_WORDS = len(ROW_FIELDS) // 2  # int64 words per constants row
# Smallest program: a shard's rows may be a few elements long, and one
# program per row of 4 * BLOCK elements would mostly compute values it masks.
_MIN_BLOCK = 16
# Sub-blocks of BLOCK counter blocks per program (a loop in the kernel): the
# entry search and the constants row are loaded once per REPS sub-blocks. The
# set-up is 220-360 instructions a program thread (1 to 4096 entries, sm_90);
# at BLOCK 256 and 4 warps, 32 sub-blocks are 256 elements a thread, so it adds
# at most 1.4 an element (8 added 5.6); a program is then 32768 elements, still
# thousands of programs for the 2^28 elements of a large model's call.
_REPS = 32
_MAX_GRID = 2**31 - 1  # CUDA grid x-dimension limit


def interpreted() -> bool:
    """Whether this module's kernel runs in the Triton interpreter.

    Decided when the module is imported: ``TRITON_INTERPRET=1`` must be set
    before then (the helpers it inlines, of ``philox`` and ``transform``, are
    created in the same mode when they are imported with it).

    Returns:
        True for an interpreted kernel, False for a compiled one or without triton.
    """
    return is_interpreted(_grouped_kernel) if triton_available() else False


if triton is not None:
    from .philox import join_u64, stream_words_at
    from .transform import (
        MODE_TAIL,
        MODE_TWO_SIDED,
        MODE_TWO_SIDED_PRECISE,
        MODE_UNIFORM,
        KernelParams,
        store_block,
        trunc_normal_value,
        vector_base,
    )

    # Kernels may read module globals only as constexprs.
    _ENTRY = tl.constexpr(_ENTRY_WORDS)
    _CONST = tl.constexpr(_CONST_WORDS)
    _FP32 = tl.constexpr(_DTYPE_CODES[torch.float32])
    _BF16 = tl.constexpr(_DTYPE_CODES[torch.bfloat16])
    # Positions in a constants row (ROW_FIELDS) of its int32 words; the floats
    # are its first len(FLOAT_FIELDS) words, in FLOAT_FIELDS order.
    _ROW_MODE = tl.constexpr(ROW_FIELDS.index("mode"))
    _ROW_FLIP = tl.constexpr(ROW_FIELDS.index("flip"))
    _ROW_SPLIT = tl.constexpr(ROW_FIELDS.index("split"))

    @triton.jit
    def _word(table_ptr, index):
        """The uint64 at int64 position ``index`` of the table (two int32 halves, lo first)."""
        # Not philox.join_u64(load lo, load hi): it widens hi before lo, an order that changes the
        # fp16 kernel's SASS (ptxas schedules the search loop differently).
        lo = tl.load(table_ptr + 2 * index).to(tl.uint32, bitcast=True).to(tl.uint64)
        hi = tl.load(table_ptr + 2 * index + 1).to(tl.uint32, bitcast=True).to(tl.uint64)
        return (hi << 32) | lo

    @triton.jit
    def _f32_at(table_ptr, index):
        """The fp32 whose bit pattern is the int32 at position ``index``."""
        return tl.load(table_ptr + index).to(tl.float32, bitcast=True)

    @triton.jit
    def _row_params(table_ptr, c):
        """(mode, the ``KernelParams``) of the constants row at int32 position ``c`` (ROW_FIELDS)."""
        # The row's floats in FLOAT_FIELDS order (the record's), then its ints.
        a_cdf = _f32_at(table_ptr, c)
        b_sf = _f32_at(table_ptr, c + 1)
        a_half = _f32_at(table_ptr, c + 2)
        b_half = _f32_at(table_ptr, c + 3)
        step = _f32_at(table_ptr, c + 4)
        mean = _f32_at(table_ptr, c + 5)
        sd_hi = _f32_at(table_ptr, c + 6)
        sd_lo = _f32_at(table_ptr, c + 7)
        scale = _f32_at(table_ptr, c + 8)
        lo = _f32_at(table_ptr, c + 9)
        hi = _f32_at(table_ptr, c + 10)
        edge = _f32_at(table_ptr, c + 11)
        width = _f32_at(table_ptr, c + 12)
        slope = _f32_at(table_ptr, c + 13)
        b0 = _f32_at(table_ptr, c + 14)
        ratio = _f32_at(table_ptr, c + 15)
        l1 = _f32_at(table_ptr, c + 16)
        l2 = _f32_at(table_ptr, c + 17)
        l3 = _f32_at(table_ptr, c + 18)
        l4 = _f32_at(table_ptr, c + 19)
        l5 = _f32_at(table_ptr, c + 20)
        mode = tl.load(table_ptr + c + _ROW_MODE)
        flip = tl.load(table_ptr + c + _ROW_FLIP)
        split = tl.load(table_ptr + c + _ROW_SPLIT)
        P = KernelParams(
            flip,
            split,
            a_cdf,
            b_sf,
            a_half,
            b_half,
            step,
            mean,
            sd_hi,
            sd_lo,
            scale,
            lo,
            hi,
            edge,
            width,
            slope,
            b0,
            ratio,
            l1,
            l2,
            l3,
            l4,
            l5,
        )
        return mode, P

    @triton.jit
    def _fill_subs(
        words_args,
        ndtri_ptr,
        out_ptr,
        vec_ptr,
        aligned,
        numel,
        program,
        subs,
        P,
        MODE: tl.constexpr,
        REPS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """Sub-blocks REPS program + [0, subs) of one entry: words, the MODE transform, the store.

        words_args: (seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi). P: the
        entry's ``KernelParams``.
        """
        seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi = words_args
        for r in range(subs):
            sub = program * REPS + r
            r0, r1, r2, r3, start = stream_words_at(
                seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, sub, BLOCK
            )
            x0 = trunc_normal_value(r0, ndtri_ptr, P, MODE)
            x1 = trunc_normal_value(r1, ndtri_ptr, P, MODE)
            x2 = trunc_normal_value(r2, ndtri_ptr, P, MODE)
            x3 = trunc_normal_value(r3, ndtri_ptr, P, MODE)
            store_block(out_ptr, vec_ptr, sub * (4 * BLOCK), aligned, start, numel, x0, x1, x2, x3, BLOCK)

    @triton.jit(do_not_specialize=["n_entries", "entry_base", "const_base", "seed_lo", "seed_hi"])
    def _grouped_kernel(
        table_ptr,
        ndtri_ptr,
        n_entries,
        entry_base,
        const_base,
        seed_lo,
        seed_hi,
        DTYPE: tl.constexpr,
        LOG: tl.constexpr,
        REPS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """Fill program p - first[e] of entry e, the entry whose programs hold grid index p.

        Args (device): table_ptr: int32 view of the table (module docstring).
        ndtri_ptr: fp32 ndtri_table rows. n_entries: E >= 1. entry_base, const_base: int64 positions of the
        entries and constants rows. seed: uint64 as two int32 bit patterns.
        DTYPE: _DTYPE_CODES of every entry's dtype. LOG: search steps,
        2**LOG >= E. BLOCK: counter blocks per program (4 BLOCK elements).
        """
        pid = tl.program_id(0).to(tl.int64)
        # Last entry whose first program is <= pid (first[0] = 0 <= pid).
        e = tl.full([], 0, tl.int64)
        first = tl.full([], 0, tl.int64)
        for k in tl.static_range(LOG):
            cand = e + (1 << (LOG - 1 - k))
            cand_first = _word(table_ptr, tl.minimum(cand, n_entries - 1)).to(tl.int64)
            take = (cand < n_entries) & (cand_first <= pid)
            e = tl.where(take, cand, e)
            first = tl.where(take, cand_first, first)
        row = entry_base + _ENTRY * e
        addr = _word(table_ptr, row).to(tl.int64)
        numel = _word(table_ptr, row + 1).to(tl.int64)
        stream_lo = tl.load(table_ptr + 2 * (row + 2))
        stream_hi = tl.load(table_ptr + 2 * (row + 2) + 1)
        offset_lo = tl.load(table_ptr + 2 * (row + 3))
        offset_hi = tl.load(table_ptr + 2 * (row + 3) + 1)
        mode, P = _row_params(table_ptr, 2 * (const_base + _CONST * _word(table_ptr, row + 4).to(tl.int64)))

        if DTYPE == _FP32:
            elem: tl.constexpr = tl.float32
        elif DTYPE == _BF16:
            elem: tl.constexpr = tl.bfloat16
        else:
            elem: tl.constexpr = tl.float16
        out_ptr = addr.to(tl.pointer_type(elem))
        # The vector path of store_block: a counter block's four elements one aligned vector.
        vec_ptr, aligned = vector_base(out_ptr, offset_lo)
        # Program p - first of the entry holds its sub-blocks REPS (p - first) + [0, REPS) of
        # BLOCK counter blocks, the last program fewer: the search and the constants above are
        # paid once per REPS sub-blocks.
        program = pid - first
        off = join_u64(offset_lo, offset_hi).to(tl.int64)
        units = ((off & 3) + numel + 3) >> 2
        subs = tl.minimum((units + BLOCK - 1) // BLOCK - program * REPS, REPS).to(tl.int32)
        words_args = (seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi)
        # Every mode is compiled; the branch taken is uniform over the program.
        if mode == MODE_TAIL:
            _fill_subs(
                words_args, ndtri_ptr, out_ptr, vec_ptr, aligned, numel, program, subs, P, MODE_TAIL, REPS, BLOCK
            )
        elif mode == MODE_TWO_SIDED_PRECISE:
            _fill_subs(
                words_args,
                ndtri_ptr,
                out_ptr,
                vec_ptr,
                aligned,
                numel,
                program,
                subs,
                P,
                MODE_TWO_SIDED_PRECISE,
                REPS,
                BLOCK,
            )
        elif mode == MODE_UNIFORM:
            _fill_subs(
                words_args, ndtri_ptr, out_ptr, vec_ptr, aligned, numel, program, subs, P, MODE_UNIFORM, REPS, BLOCK
            )
        else:
            _fill_subs(
                words_args, ndtri_ptr, out_ptr, vec_ptr, aligned, numel, program, subs, P, MODE_TWO_SIDED, REPS, BLOCK
            )


# ------------------------------------------------------------------ host side


def _require_consistent() -> None:
    """The kernel and the helpers it inlines must come from the same mode (compiled or interpreted)."""
    require_triton()
    # philox reloaded in the other mode since this module was imported.
    if type(_grouped_kernel) is not type(philox.stream_words_at):
        raise RuntimeError(
            "tinit.triton_kernels.trunc_normal_grouped was imported in a different TRITON_INTERPRET mode "
            "than tinit.triton_kernels.philox now has: reload it (importlib.reload) after that module"
        )


def _check_device(device: torch.device, what: str) -> None:
    if device.type == "cpu" and not interpreted():
        raise ValueError(
            f"{what}: CPU tensors run only in the Triton interpreter "
            "(TRITON_INTERPRET=1, set before tinit.triton_kernels is imported)"
        )
    # The interpreter runs on the host and would write through the table's
    # device addresses (it copies only tensors passed as kernel arguments).
    if device.type == "cuda" and interpreted():
        raise ValueError(
            f"{what}: the Triton interpreter cannot fill CUDA tensors through a table of addresses; "
            "unset TRITON_INTERPRET"
        )
    if device.type not in ("cpu", "cuda", "meta"):
        raise ValueError(f"{what}: tensors must be on a CUDA device (or the CPU when interpreted), got {device}")


def _const_row(constants: Sequence[float]) -> np.ndarray:
    """Constants row (int32[2 _CONST_WORDS], ROW_FIELDS) of one packed tuple; ValueError when malformed."""
    args = kernel_constants(tuple(constants))
    floats = np.array([args[name] for name in FLOAT_FIELDS], dtype=np.float32).view(np.int32)
    ints = np.array(
        [args["MODE"] if name == "mode" else args[name] for name in ROW_FIELDS[len(FLOAT_FIELDS) :]], dtype=np.int32
    )
    return np.concatenate([floats, ints])


def _auto_block(max_blocks: int) -> int:
    """Counter blocks per program: enough for the largest entry, within [_MIN_BLOCK, default]."""
    cap = INTERPRETER_BLOCK if interpreted() else GROUPED_BLOCK
    return min(cap, max(_MIN_BLOCK, 1 << max(0, max_blocks - 1).bit_length()))


def _search_steps(n_entries: int) -> int:
    """LOG with 2**LOG >= n_entries, rounded up to a multiple of 4 (fewer compiled variants)."""
    bits = max(1, (n_entries - 1).bit_length())
    return -(-bits // 4) * 4


def _plan(
    addresses: np.ndarray,
    numels: np.ndarray,
    streams: np.ndarray,
    offsets: np.ndarray,
    const_index: np.ndarray,
    const_rows: np.ndarray,
    block: int | None,
) -> tuple[np.ndarray, int, int, int]:
    """The table of one launch (module docstring) from int64 arrays of length E >= 1.

    streams and offsets hold int64 bits of the uint64 values; const_rows is
    int32[C, PARAM_COUNT] (24 words, ROW_FIELDS). Returns (table int64, E, programs, BLOCK).

    Raises:
        ValueError: more programs than a grid holds.
    """
    n_entries = len(addresses)
    nblk = counter_blocks(numels, offsets)
    if block is None:
        block = _auto_block(int(nblk.max()))
    programs = -(-nblk // (block * _REPS))
    first = np.zeros(n_entries, dtype=np.int64)
    np.cumsum(programs[:-1], out=first[1:])
    n_programs = int(first[-1] + programs[-1])
    if n_programs > _MAX_GRID:
        raise ValueError(f"{n_programs} programs exceed the grid limit {_MAX_GRID}; fill fewer elements per call")
    entries = np.stack([addresses, numels, streams, offsets, const_index], axis=1)
    table = np.concatenate([first, entries.reshape(-1), np.ascontiguousarray(const_rows).view(np.int64).reshape(-1)])
    return table, n_entries, n_programs, block


def _launch(plan: tuple[np.ndarray, int, int, int], dtype: torch.dtype, device: torch.device, seed: int) -> None:
    """One launch of ``_grouped_kernel`` over a ``_plan`` (every entry of dtype ``dtype`` on ``device``)."""
    table, n_entries, n_programs, block = plan
    ndtri = ndtri_table_on(device)  # first: inside a capture it refuses before anything is captured
    table_dev = upload(table, device, GROUPED_OP_NAME)
    seed_args = split_u64("seed", seed)
    args = (
        table_dev.view(torch.int32),
        ndtri,
        n_entries,
        n_entries,
        n_entries * (1 + _ENTRY_WORDS),
        seed_args["seed_lo"],
        seed_args["seed_hi"],
    )
    meta = {
        "DTYPE": _DTYPE_CODES[dtype],
        "LOG": _search_steps(n_entries),
        "REPS": _REPS,
        "BLOCK": block,
        **LAUNCH_OPTIONS,
    }
    with on_device(device):
        _grouped_kernel[(n_programs,)](*args, **meta)


def _fill_grouped(
    tensors: Sequence[torch.Tensor],
    seed: int,
    streams: Sequence[int],
    offsets: Sequence[int],
    transform: Sequence[float],
    block: int | None,
) -> None:
    """Check everything, then launch once per dtype. seed and streams are int64 bits of the uint64 values."""
    _require_consistent()
    op = GROUPED_OP_NAME
    n = len(tensors)
    if len(streams) != n or len(offsets) != n:
        raise ValueError(
            f"{op}: expected one stream and one offset per tensor, got {n} tensors, "
            f"{len(streams)} streams, {len(offsets)} offsets"
        )
    if len(transform) != n * PARAM_COUNT:
        raise ValueError(
            f"{op}: expected {PARAM_COUNT} transform constants per tensor ({n * PARAM_COUNT}), got {len(transform)}"
        )
    seed = check_int("seed", seed, -(2**63), 2**63)
    streams = [check_int(f"streams[{t}]", stream, -(2**63), 2**63) for t, stream in enumerate(streams)]
    rows: dict[tuple, int] = {}
    const_rows: list[np.ndarray] = []
    by_dtype: dict[torch.dtype, list[tuple[int, int]]] = {}  # dtype -> (tensor index, constants row)
    device = None
    for t, tensor in enumerate(tensors):
        what = f"{op}: tensor {t}"
        check_tensor(tensor, what)
        if device is None:
            device = tensor.device
            _check_device(device, op)
        elif tensor.device != device:
            raise ValueError(f"{what} is on {tensor.device}, tensor 0 on {device}: one device per call")
        offset = check_int(f"offsets[{t}]", offsets[t], 0, 2**63)
        check_stream_range(offset, tensor.numel(), what)
        key = tuple(transform[t * PARAM_COUNT : (t + 1) * PARAM_COUNT])
        row = rows.get(key)
        if row is None:
            const_rows.append(_const_row(key))
            row = rows[key] = len(const_rows) - 1
        if tensor.numel():
            by_dtype.setdefault(tensor.dtype, []).append((t, row))
    if device is None or device.type == "meta":
        return
    constants = np.stack(const_rows)
    plans = {}
    for dtype, group in by_dtype.items():
        index = [t for t, _ in group]
        plans[dtype] = _plan(
            np.array([tensors[t].data_ptr() for t in index], dtype=np.int64),
            np.array([tensors[t].numel() for t in index], dtype=np.int64),
            np.array([streams[t] for t in index], dtype=np.int64),
            np.array([offsets[t] for t in index], dtype=np.int64),
            np.array([row for _, row in group], dtype=np.int64),
            constants,
            block,
        )
    for dtype, plan in plans.items():  # planned first: nothing is written when a plan fails
        _launch(plan, dtype, device, seed)


def _fill_runs(
    tensor: torch.Tensor,
    seed: int,
    stream: int,
    offset: int,
    run: int,
    outer_sizes: Sequence[int],
    outer_starts: Sequence[int],
    transform: Sequence[float],
    block: int | None,
) -> None:
    """Check everything, then fill every row of ``run`` elements in one launch (seed, stream: int64 bits)."""
    _require_consistent()
    op = RUNS_OP_NAME
    check_tensor(tensor, op)
    _check_device(tensor.device, op)
    seed = check_int("seed", seed, -(2**63), 2**63)
    stream = check_int("stream", stream, -(2**63), 2**63)
    offset = check_int("offset", offset, 0, 2**63)
    run = check_int("run", run, 0, 2**63)
    sizes = [check_int("outer_sizes[k]", size, 0, 2**63) for size in outer_sizes]
    if len(outer_starts) != sum(sizes):
        raise ValueError(f"{op}: outer_starts has {len(outer_starts)} values, outer_sizes {sizes} need {sum(sizes)}")
    starts = [check_int("outer_starts[k]", start, 0, 2**63) for start in outer_starts]
    rows = int(np.prod(sizes, dtype=object)) if sizes else 1
    if tensor.numel() != rows * run:
        raise ValueError(f"{op}: tensor has {tensor.numel()} elements, runs describe {rows} x {run}")
    last, first = offset, 0
    for size in sizes:
        if size:
            last += max(starts[first : first + size])
        first += size
    if rows and last + run > 2**63:
        raise ValueError(f"{op}: stream indices past 2**63 (last row starts at {last}, run {run})")
    constants = _const_row(transform)[None, :]
    if tensor.numel() == 0 or tensor.device.type == "meta":
        return
    row_start = np.full(1, offset, dtype=np.int64)
    first = 0
    for size in sizes:
        row_start = (row_start[:, None] + np.array(starts[first : first + size], dtype=np.int64)[None, :]).reshape(-1)
        first += size
    addresses = tensor.data_ptr() + np.arange(rows, dtype=np.int64) * (run * tensor.element_size())
    plan = _plan(
        addresses,
        np.full(rows, run, dtype=np.int64),
        np.full(rows, stream, dtype=np.int64),
        row_start,
        np.zeros(rows, dtype=np.int64),
        constants,
        block,
    )
    _launch(plan, tensor.dtype, tensor.device, seed)


if triton is not None:

    @torch.library.custom_op(GROUPED_OP_NAME, mutates_args={"tensors"})
    def _grouped_op(
        tensors: list[torch.Tensor], seed: int, streams: list[int], offsets: list[int], transform: list[float]
    ) -> None:
        """Registered body of ``torch.ops.tinit.trunc_normal_grouped_triton_``.

        Its schema is that of the CPU op ``tinit::trunc_normal_grouped_``.
        """
        _fill_grouped(tensors, seed, streams, offsets, transform, None)

    @_grouped_op.register_fake
    def _grouped_fake(tensors, seed, streams, offsets, transform) -> None:
        return None  # mutation only: no output to describe

    @torch.library.custom_op(RUNS_OP_NAME, mutates_args={"tensor"})
    def _runs_op(
        tensor: torch.Tensor,
        seed: int,
        stream: int,
        offset: int,
        run: int,
        outer_sizes: list[int],
        outer_starts: list[int],
        transform: list[float],
    ) -> None:
        """Registered body of ``torch.ops.tinit.trunc_normal_runs_triton_``.

        Its schema is that of the CPU op ``tinit::trunc_normal_runs_``.
        """
        _fill_runs(tensor, seed, stream, offset, run, outer_sizes, outer_starts, transform, None)

    @_runs_op.register_fake
    def _runs_fake(tensor, seed, stream, offset, run, outer_sizes, outer_starts, transform) -> None:
        return None


def trunc_normal_grouped_(
    tensors: list[torch.Tensor],
    seed: int,
    streams: list[int],
    offsets: list[int],
    packed: list[tuple],
    *,
    block: int | None = None,
) -> None:
    """Fill many contiguous tensors in place, one launch per dtype, as ``trunc_normal_triton_`` fills each.

    Tensor t takes stream indices offsets[t] + [0, numel) of (seed,
    streams[t]) and the transform of packed[t]: the values of
    ``trunc_normal_triton_(tensors[t], seed, streams[t], offsets[t], packed[t])``
    and of the CPU op ``tinit::trunc_normal_grouped_``, bit for bit, however
    the list is batched. Bounds are absolute (tensor units).

    Args:
        tensors: contiguous fp32, bf16 or fp16 tensors (dtypes may be mixed),
            all on one GPU (or the CPU under ``TRITON_INTERPRET=1``), written
            in place; 0-element tensors are skipped, meta tensors are a no-op.
            Overlapping tensors are written in no defined order.
        seed: unsigned 64-bit Philox key, 0 <= seed < 2**64, shared by all.
        streams: one unsigned 64-bit stream id per tensor.
        offsets: stream index of each tensor's element 0; offset + numel <= 2**63.
        packed: one ``TruncNormalParams`` (PARAM_COUNT constants) per tensor,
            ``tinit.params.transform_constants(mean, std, a, b, tensor.dtype)``.
        block: counter blocks per program (a power of two; 4 block
            elements); None picks one from the largest tensor and goes
            through the registered op. The values do not depend on it.

    Returns:
        None.

    Raises:
        ImportError: triton is not installed (or torch lacks triton_op).
        TypeError: a non-tensor, a dtype this backend does not fill (fp64), or a non-int id.
        ValueError: list lengths differ, a non-contiguous tensor, tensors on
            different devices, a CPU tensor outside the interpreter, a seed,
            stream or offset out of range, or malformed constants. Every
            check runs before anything is written.
    """
    require_triton()
    # Only what the op's schema cannot carry is handled here: a list of tensors on one device (else
    # the dispatcher might pick the fake kernel for all), uint64 ids as int64 bits, offsets that fit
    # its ints, one constants tuple per tensor flattened; the op's body checks the rest, once.
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list of tensors, got {type(tensors).__name__}")
    if len(packed) != len(tensors):
        raise ValueError(f"expected one constants tuple per tensor, got {len(packed)} for {len(tensors)} tensors")
    for t, tensor in enumerate(tensors):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor {t}: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.device != tensors[0].device:
            raise ValueError(f"tensor {t} is on {tensor.device}, tensor 0 on {tensors[0].device}: one device per call")
    seed64 = as_int64(check_int("seed", seed, 0, 2**64))
    streams64 = [as_int64(check_int(f"streams[{t}]", s, 0, 2**64)) for t, s in enumerate(streams)]
    offsets = [schema_int(f"offsets[{t}]", offset) for t, offset in enumerate(offsets)]
    transform = []
    for t, constants in enumerate(packed):
        if len(constants) != PARAM_COUNT:
            raise ValueError(f"packed[{t}]: expected {PARAM_COUNT} transform constants, got {len(constants)}")
        transform.extend(float(c) for c in constants)
    if block is not None:
        check_block(block)
        _fill_grouped(list(tensors), seed64, streams64, offsets, transform, block)
    elif tensors:
        torch.ops.tinit.trunc_normal_grouped_triton_(list(tensors), seed64, streams64, offsets, transform)


def trunc_normal_runs_(
    tensor: torch.Tensor, seed: int, stream: int, runs, packed: tuple, *, block: int | None = None
) -> None:
    """Fill contiguous ``tensor`` laid out as ``runs`` in one launch (one table entry per row).

    Local element j (row-major) takes stream index ``runs.base + (start of
    row j // runs.run) + j % runs.run`` (``tinit.sharding.StreamRuns``), the
    value the CPU op ``tinit::trunc_normal_runs_`` gives it, bit for bit.

    Args:
        tensor: contiguous fp32, bf16 or fp16 tensor of ``runs.rows * runs.run``
            elements on a GPU (or the CPU under ``TRITON_INTERPRET=1``), written in place.
        seed: unsigned 64-bit Philox key.
        stream: unsigned 64-bit stream id.
        runs: a ``tinit.sharding.StreamRuns`` (e.g. ``ShardLayout.runs(offset)``).
        packed: the ``TruncNormalParams`` of ``tinit.params.transform_constants``.
        block: counter blocks per program (a power of two); None picks one
            from the run length and goes through the registered op.

    Returns:
        None.

    Raises:
        ImportError: triton is not installed (or torch lacks triton_op).
        TypeError: a dtype this backend does not fill (fp64), or non-int ids.
        ValueError: a non-contiguous tensor, a size that does not match
            ``runs``, a CPU tensor outside the interpreter, stream indices
            outside [0, 2**63], or malformed constants; all checked before
            anything is written.
    """
    require_triton()
    # Only what the op's schema cannot carry is handled here (uint64 ids as int64 bits, the runs as
    # ints); the op's body checks the rest, once, on either path.
    seed64 = as_int64(check_int("seed", seed, 0, 2**64))
    stream64 = as_int64(check_int("stream", stream, 0, 2**64))
    args = (
        tensor,
        seed64,
        stream64,
        schema_int("runs.base", runs.base),
        schema_int("runs.run", runs.run),
        [schema_int("runs.outer_sizes[k]", size) for size in runs.outer_sizes],
        [schema_int("runs.outer_starts[k]", start) for start in runs.outer_starts],
        [float(c) for c in packed],
    )
    if block is not None:
        check_block(block)
        _fill_runs(*args, block)
    else:
        torch.ops.tinit.trunc_normal_runs_triton_(*args)
