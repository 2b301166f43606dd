"""Triton backend of tinit: the Philox4x32-10 stream and the truncated-normal transform.

The kernel computes exactly what the CPU op computes: the stream of
``csrc/include/tinit/philox.h`` (key = seed, counter = (block, stream), four
words per Philox call) and the float path of the transform of
``csrc/include/tinit/transform.h`` (stream version 2), written op for op in
the same order from IEEE basic operations: ``tl.fma`` for every ``fma_rn``,
``tl.div_rn``/``tl.sqrt_rn`` for fp32 division and square root (whose plain
forms are approximate on NVIDIA), bit casts for ``float_as_bits``, and the
same compares and selects. No libdevice call and no fp64 operation is used.
``ndtri_table``'s coefficient rows (``tinit._ndtri_table.COEFFICIENTS``, the
values of ``csrc/include/tinit/ndtri_table.h``) are an fp32 tensor, made once
per device, that the kernel gathers rows from.
Launches pass ``enable_fp_fusion=False`` so that no multiply-add is contracted
beyond the explicit ones, as the C++ build does with ``-ffp-contract=off``.
On a GPU the values are therefore bit-identical to the CPU kernel's for fp32,
bf16 and fp16 tensors (all computed in fp32, rounded once on store); under
``TRITON_INTERPRET=1`` they are too (the interpreter's ``tl.fma`` is a true
fused multiply-add). fp64 tensors are not supported by this backend (the C++
``double`` path uses libm ``log``, which has no bit-exact Triton counterpart).

The fill is registered as the op ``torch.ops.tinit.trunc_normal_triton_``
(``torch.library.triton_op`` + ``wrap_triton``), so it can be traced by
``make_fx``/``torch.export`` and checked with ``torch.library.opcheck``.
Importing this module never requires triton; calling it without triton
raises ImportError.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from tinit._ndtri_table import COEFFICIENTS as _NDTRI_COEFFICIENTS
from tinit._ndtri_table import ROW as _ROW
from tinit.ops import as_int64
from tinit.params import PARAM_COUNT, Mode, TruncNormalParams, valid_params

try:
    import triton
    import triton.language as tl

    _IMPORT_ERROR: str | None = None
except ImportError as exc:  # the module stays importable; calls raise ImportError
    triton = None
    tl = None
    _IMPORT_ERROR = f"triton failed to import ({exc})"
if triton is not None and not hasattr(torch.library, "triton_op"):
    triton = None
    _IMPORT_ERROR = f"torch {torch.__version__} has no torch.library.triton_op (torch >= 2.6 has)"

OP_NAME = "tinit::trunc_normal_triton_"
SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_MODES = tuple(int(mode) for mode in Mode)
# The fp32 fields of TruncNormalParams<float> the kernels take, by name and in
# the record's order (mode is the MODE constexpr; sign only gives flip; split
# is a uint32).
FLOAT_FIELDS = tuple(name for name in TruncNormalParams._fields if name not in ("mode", "sign", "split"))
# Counter blocks (four elements each) per program and warps per program. The
# interpreter's cost is per program, so it takes larger programs.
DEFAULT_BLOCK = 256
# The words kernel has no transform to keep in registers: larger programs
# spread its set-up over more words.
WORDS_BLOCK = 1024
_INTERPRETER_BLOCK = 2048
_NUM_WARPS = 4
# Compile options of the fill: no contraction of a*b + c into an fma beyond the
# explicit tl.fma calls (the C++ builds use -ffp-contract=off).
LAUNCH_OPTIONS = {"num_warps": _NUM_WARPS, "enable_fp_fusion": False}
_INSTALL_HINT = "install triton (`pip install triton`, or tinit[triton]) to use the triton backend"
_NDTRI_TABLES: dict[torch.device, torch.Tensor] = {}


def triton_available() -> bool:
    """Whether this backend can run at all.

    Returns:
        True when triton imports and torch has ``torch.library.triton_op``.
    """
    return _IMPORT_ERROR is None


def interpreted() -> bool:
    """Whether the kernels of this module run in the Triton interpreter.

    That is decided when the module is imported (or reloaded):
    ``TRITON_INTERPRET=1`` must be set before then.

    Returns:
        True for interpreted kernels, False for compiled ones or without triton.
    """
    if not triton_available():
        return False
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(_trunc_normal_kernel, InterpretedFunction)


def why_not(tensor: torch.Tensor) -> str | None:
    """None when this backend can fill ``tensor``, otherwise the reason.

    Args:
        tensor: the tensor to be filled.

    Returns:
        None, or a one-line reason (triton missing, dtype, device).
    """
    if not triton_available():
        return f"{_IMPORT_ERROR}; {_INSTALL_HINT}"
    if tensor.dtype not in SUPPORTED_DTYPES:
        return (
            f"fills float32, bfloat16 and float16 tensors, got {tensor.dtype} "
            "(the fp64 transform uses libm log, which Triton cannot reproduce bit for bit)"
        )
    if tensor.device.type == "cpu" and not interpreted():
        return "runs on GPU tensors (CPU tensors only under TRITON_INTERPRET=1, set before import)"
    return None


def _require_triton() -> None:
    if not triton_available():
        raise ImportError(f"tinit's triton backend cannot run: {_IMPORT_ERROR}; {_INSTALL_HINT}")


def _check_target(tensor: torch.Tensor, offset: int, what: str) -> None:
    if not tensor.is_contiguous():
        raise ValueError(f"{what}: expected a contiguous tensor (tinit.ops copies views)")
    if offset < 0:
        raise ValueError(f"{what}: offset must be >= 0, got {offset}")
    if offset + tensor.numel() > 2**63:
        raise ValueError(f"{what}: stream indices past 2**63 (offset {offset}, numel {tensor.numel()})")


def _f32(value: float) -> float:
    """``static_cast<float>(value)`` (round to nearest even), as a Python float."""
    return float(np.float32(value))


def _i32_bits(word: int) -> int:
    """A uint32 as the int32 with the same bits (so triton types it i32)."""
    return word - 2**32 if word >= 2**31 else word


def _kernel_constants(constants) -> dict:
    """The kernel arguments of ``TruncNormalParams<float>::from_packed`` (transform.h), by field name.

    Returns:
        {"flip", "split": int32 bits, each name of FLOAT_FIELDS: its fp32
        value as a Python float, "MODE": the mode as an int}.

    Raises:
        ValueError: not PARAM_COUNT constants, an unknown mode, a split
            that is not a uint32, or two-sided constants outside the range
            of ``valid_params`` (transform.h), which keeps the table reads
            in bounds.
    """
    if len(constants) != PARAM_COUNT:
        raise ValueError(
            f"expected {PARAM_COUNT} transform constants (tinit.params.TruncNormalParams), got {len(constants)}"
        )
    p = TruncNormalParams(*constants)
    if p.mode not in _MODES:  # valid_mode (transform.h); NaN and inf too
        raise ValueError(f"unknown transform mode {p.mode!r}; expected one of {_MODES} (tinit.params.Mode)")
    mode = int(p.mode)
    if not (0 <= p.split < 2**32 and p.split == int(p.split)):
        raise ValueError(f"split word {p.split!r} is not a uint32")
    split = int(p.split)
    if not valid_params(p):
        raise ValueError(
            "two-sided constants outside their range (tinit.params.transform_constants): "
            f"a_cdf={p.a_cdf!r}, b_sf={p.b_sf!r}, step={p.step!r}"
        )
    return {
        "flip": -1 if p.sign < 0 else 0,  # ~0u when mirrored, as int32 bits
        "split": _i32_bits(split),
        **{name: _f32(getattr(p, name)) for name in FLOAT_FIELDS},
        "MODE": mode,
    }


def _ndtri_table_on(device: torch.device) -> torch.Tensor:
    """The fp32 coefficient rows of ndtri_table (SEGMENTS x ROW, row-major) on ``device``, made once."""
    table = _NDTRI_TABLES.get(device)
    if table is None:
        table = torch.tensor(_NDTRI_COEFFICIENTS, dtype=torch.float32, device=device)
        _NDTRI_TABLES[device] = table
    return table


def _split_u64(name: str, value: int) -> dict:
    """A uint64 (or int64 bits of one) as two int32 bit patterns ``{name}_lo``, ``{name}_hi``.

    Passing 64-bit scalars as int32 halves keeps every launch's argument types
    fixed (triton types a Python int by its magnitude) and avoids the
    interpreter's uint32 storage of ints in [2**31, 2**32) typed as i64.
    """
    value &= 2**64 - 1
    return {f"{name}_lo": _i32_bits(value & 0xFFFFFFFF), f"{name}_hi": _i32_bits(value >> 32)}


def _stream_args(seed: int, stream: int, offset: int) -> dict:
    return {**_split_u64("seed", seed), **_split_u64("stream", stream), **_split_u64("offset", offset)}


def _grid(numel: int, offset: int, block: int) -> tuple[int]:
    """Programs covering the counter blocks of indices [offset, offset + numel)."""
    nblk = ((offset & 3) + numel + 3) >> 2
    return (triton.cdiv(nblk, block),)


if triton is not None:
    # Kernels may read module globals only as constexprs: the modes of
    # tinit.params.Mode (TransformMode), named here once for both kernels, and
    # ndtri_table's shape.
    MODE_UNIFORM = tl.constexpr(int(Mode.UNIFORM))
    MODE_TWO_SIDED = tl.constexpr(int(Mode.TWO_SIDED))
    MODE_TWO_SIDED_PRECISE = tl.constexpr(int(Mode.TWO_SIDED_PRECISE))
    MODE_TAIL = tl.constexpr(int(Mode.TAIL))
    _NDTRI_ROW = tl.constexpr(_ROW)

    # ---------------------------------------------------------------- stream

    @triton.jit
    def _philox4x32_10(c0, c1, c2, c3, k0, k1):
        """philox4x32_10 (philox.h): ten rounds on uint32 counter words under key (k0, k1).

        The same operations as triton's ``tl.philox`` (whose key/counter
        convention is Random123's, like philox.h); written out so the kernels
        use no @triton.jit function of triton.language and can be re-created
        in the interpreter after triton was imported without it.
        """
        for _ in tl.static_range(10):
            # 32x32 -> 64-bit products (one IMAD.WIDE.U32 each): both halves at once.
            p0 = c0.to(tl.uint64) * 0xD2511F53
            p2 = c2.to(tl.uint64) * 0xCD9E8D57
            c0 = (p2 >> 32).to(tl.uint32) ^ c1 ^ k0
            c2 = (p0 >> 32).to(tl.uint32) ^ c3 ^ k1
            c1 = p2.to(tl.uint32)
            c3 = p0.to(tl.uint32)
            k0 = tl.add(k0, 0x9E3779B9, sanitize_overflow=False)
            k1 = tl.add(k1, 0xBB67AE85, sanitize_overflow=False)
        return c0, c1, c2, c3

    @triton.jit
    def _u32(bits):
        """An int32 bit pattern as uint32."""
        return bits.to(tl.uint32, bitcast=True)

    @triton.jit
    def _join_u64(lo, hi):
        """The uint64 whose halves are the int32 bit patterns lo and hi."""
        return (_u32(hi).to(tl.uint64) << 32) | _u32(lo).to(tl.uint64)

    @triton.jit
    def _stream_words(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, BLOCK: tl.constexpr):
        """``_stream_words_at`` for program ``tl.program_id(0)``."""
        return _stream_words_at(
            seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, tl.program_id(0).to(tl.int64), BLOCK
        )

    @triton.jit
    def _stream_words_at(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, program, BLOCK: tl.constexpr):
        """The words of the BLOCK counter blocks of program ``program`` of a fill, and their tensor positions.

        64-bit scalars arrive as two int32 bit patterns (see ``_split_u64``).
        Program p (an int64 scalar; the grouped kernel numbers the programs of
        each of its tensors from 0) covers counter blocks first + p*BLOCK +
        [0, BLOCK), first = offset // 4; word k of block b is stream index
        4b + k, which is tensor element 4b + k - offset (philox.h). Returns
        (words uint32[BLOCK, 4], local int32[BLOCK, 4], start int64): words[b, k]
        is word k of the program's block b and tensor element start + local[b, k],
        local[b, k] = 4b + k. Kept two-dimensional, the four words of a block
        stay in one thread from the Philox call to the vector store.
        """
        off = _join_u64(offset_lo, offset_hi).to(tl.int64)  # < 2**63
        blk0 = (off >> 2) + program * BLOCK
        blk = blk0 + tl.arange(0, BLOCK).to(tl.int64)
        zero = tl.full([BLOCK], 0, tl.uint32)
        c0 = blk.to(tl.uint32)
        c1 = (blk >> 32).to(tl.uint32)
        c2 = zero + _u32(stream_lo)
        c3 = zero + _u32(stream_hi)
        k0 = zero + _u32(seed_lo)
        k1 = zero + _u32(seed_hi)
        r0, r1, r2, r3 = _philox4x32_10(c0, c1, c2, c3, k0, k1)
        # [BLOCK, 2, 2] with [b, i, j] = word 2i + j of block b, read row-major
        # as [BLOCK, 4]: [b, k] holds word k of block b.
        words = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [BLOCK, 4])
        local = tl.arange(0, BLOCK)[:, None] * 4 + tl.arange(0, 4)[None, :]
        start = program * (4 * BLOCK) - (off & 3)
        return words, local, start

    @triton.jit
    def _in_tensor(local, start, numel, span):
        """Whether tensor element start + local lies in [0, numel), compared in int32: local in
        [0, span), span the program's elements (4 BLOCK)."""
        first = tl.maximum(-start, 0).to(tl.int32)  # 0, or offset % 4 for program 0
        end = tl.minimum(numel.to(tl.int64) - start, span).to(tl.int32)
        return (local >= first) & (local < end)

    # ------------------------------------------------------------- transform
    # transform.h, op for op (float path): every fma_rn is a tl.fma, division
    # and square root are tl.div_rn / tl.sqrt_rn, float_as_bits a bit cast.

    @triton.jit
    def _uniform_open(w):
        """uniform_open<float>: fma(float(w), 2^-32, 2^-33).

        In (0, 1] in fp32: float(w) keeps 24 bits, so words >= 2^32 - 128 give 1.0.
        """
        return tl.fma(w.to(tl.float32), 2.3283064365386962890625e-10, 1.16415321826934814453125e-10)

    @triton.jit
    def _log_pos(x):
        """log_pos(float): Cephes logf on [sqrt(1/2), sqrt(2)), fp32, x normal and > 0."""
        bits = x.to(tl.int32, bitcast=True)  # x > 0: the sign bit is clear
        m0 = ((bits & 0x007FFFFF) | 0x3F000000).to(tl.float32, bitcast=True)  # [0.5, 1)
        low = m0 < 0.70710678118654752
        e = ((bits >> 23) - tl.where(low, 127, 126)).to(tl.float32)
        m = tl.where(low, (m0 + m0) - 1.0, m0 - 1.0)
        z = m * m
        y = tl.fma(7.0376836292e-2, m, -1.1514610310e-1)
        y = tl.fma(y, m, 1.1676998740e-1)
        y = tl.fma(y, m, -1.2420140846e-1)
        y = tl.fma(y, m, 1.4249322787e-1)
        y = tl.fma(y, m, -1.6668057665e-1)
        y = tl.fma(y, m, 2.0000714765e-1)
        y = tl.fma(y, m, -2.4999993993e-1)
        y = tl.fma(y, m, 3.3333331174e-1)
        y = y * m * z
        y = tl.fma(e, -2.12194440e-4, y)
        y = tl.fma(-0.5, z, y)
        r = m + y
        return tl.fma(e, 0.693359375, r)

    @triton.jit
    def _clamp_to(x, lo, hi):
        """clamp_to, its device form fminf(fmaxf(x, lo), hi) (x is never NaN nor -0: the compare form's bits)."""
        return tl.minimum(tl.maximum(x, lo), hi)

    @triton.jit
    def _ndtri_row(table_ptr, s):
        """The 8 coefficients c0..c6, c0_lo of s's row (ndtri_segment), gathered from the fp32 table."""
        # ndtri_segment: 255 - (bits >> 22), in [0, 255] for s in [0, 1.75] (_kernel_constants checks).
        # Eight scalar gathers: one [.., 8] load of the row compiles to 128-bit loads, but its
        # split into columns costs layout conversions through shared memory (twice the code).
        seg = (255 - (s.to(tl.uint32, bitcast=True) >> 22)).to(tl.int32)
        row_ptr = table_ptr + seg * _NDTRI_ROW
        c0 = tl.load(row_ptr)
        c1 = tl.load(row_ptr + 1)
        c2 = tl.load(row_ptr + 2)
        c3 = tl.load(row_ptr + 3)
        c4 = tl.load(row_ptr + 4)
        c5 = tl.load(row_ptr + 5)
        c6 = tl.load(row_ptr + 6)
        c7 = tl.load(row_ptr + 7)
        return c0, c1, c2, c3, c4, c5, c6, c7

    @triton.jit
    def _ndtri_variable(s, q, central):
        """ndtri_variable: q^2 on row 0, else r in [-1/4, 1/4) from the mantissa bits of s."""
        bits = s.to(tl.int32, bitcast=True)
        r = ((bits & 0x003FFFFF) | 0x3F800000).to(tl.float32, bitcast=True) - 1.25
        return tl.where(central, q * q, r)

    @triton.jit
    def _ndtri_acc(c1, c2, c3, c4, c5, c6, t):
        """horner(t, c1, ..., c6): the row polynomial but its last step."""
        acc = tl.fma(c6, t, c5)
        acc = tl.fma(acc, t, c4)
        acc = tl.fma(acc, t, c3)
        acc = tl.fma(acc, t, c2)
        return tl.fma(acc, t, c1)

    @triton.jit
    def _ndtri_table(table_ptr, s, q):
        """ndtri_table: Phi^-1(s) <= 0 for s in [2^-125, 1/2], q = s - 1/2 (one polynomial per row)."""
        central = s >= 0.25
        c0, c1, c2, c3, c4, c5, c6, _ = _ndtri_row(table_ptr, s)  # c0_lo unused (its load is dead code)
        t = _ndtri_variable(s, q, central)
        p = tl.fma(_ndtri_acc(c1, c2, c3, c4, c5, c6, t), t, c0)
        return tl.where(central, q * p, p)

    @triton.jit
    def _ndtri_table_pair(table_ptr, s, q):
        """ndtri_table_pair: the same z as (z_hi, z_lo), with ndtri_poly's p_lo."""
        central = s >= 0.25
        c0, c1, c2, c3, c4, c5, c6, c7 = _ndtri_row(table_ptr, s)
        t = _ndtri_variable(s, q, central)
        acc = _ndtri_acc(c1, c2, c3, c4, c5, c6, t)
        p_hi = tl.fma(acc, t, c0)
        p_lo = tl.fma(acc, t, c0 - p_hi) + c7
        m = tl.where(central, q, 1.0)
        z_hi = m * p_hi
        z_lo = tl.fma(m, p_hi, -z_hi) + m * p_lo
        return z_hi, z_lo

    @triton.jit
    def _two_sided_s(w, split, a_cdf, b_sf, a_half, b_half, step):
        """two_sided_s: (s, q, lower) of word w (already flipped), s = s0 + step w' in one rounding."""
        lower = w <= _u32(split)
        fw = tl.where(lower, w, ~w).to(tl.float32)
        q = tl.fma(fw, step, tl.where(lower, a_half, b_half))
        s = tl.fma(fw, step, tl.where(lower, a_cdf, b_sf))
        return s, q, lower

    @triton.jit
    def _rescale(x, scale):
        """rescale: x scale + 0 (an underflowed -0 becomes +0)."""
        return x * scale + 0.0

    @triton.jit
    def _uniform_value(w, lo, hi, edge, width, slope, scale):
        """uniform_value: (edge + width (u + slope u (u - 1))) scale, clamped."""
        u = _uniform_open(w)
        g = tl.fma(slope * u, u - 1.0, u)
        return _clamp_to(_rescale(tl.fma(width, g, edge), scale), lo, hi)

    @triton.jit
    def _two_sided_value(w, table_ptr, split, a_cdf, b_sf, a_half, b_half, step, mean, sd_hi, sd_lo, lo, hi):
        """two_sided_value (float): mean + (sd_hi + sd_lo) z, clamped."""
        s, q, lower = _two_sided_s(w, split, a_cdf, b_sf, a_half, b_half, step)
        zl = _ndtri_table(table_ptr, s, q)
        z = tl.where(lower, zl, -zl)
        return _clamp_to(tl.fma(sd_hi, z, tl.fma(sd_lo, z, mean)), lo, hi)

    @triton.jit
    def _two_sided_precise_value(
        w, table_ptr, split, a_cdf, b_sf, a_half, b_half, step, mean, sd_hi, sd_lo, scale, lo, hi
    ):
        """two_sided_precise_value: (fma(sd_hi, z_hi, mean) + (sd_hi z_lo + sd_lo z_hi)) scale, clamped."""
        s, q, lower = _two_sided_s(w, split, a_cdf, b_sf, a_half, b_half, step)
        zl_hi, zl_lo = _ndtri_table_pair(table_ptr, s, q)
        z_hi = tl.where(lower, zl_hi, -zl_hi)
        z_lo = tl.where(lower, zl_lo, -zl_lo)
        main = tl.fma(sd_hi, z_hi, mean)
        small = tl.fma(sd_hi, z_lo, sd_lo * z_hi)
        return _clamp_to(_rescale(main + small, scale), lo, hi)

    @triton.jit
    def _tail_value(w, sd_hi, sd_lo, scale, lo, hi, edge, b0, ratio, l1, l2, l3, l4, l5):
        """tail_value<float>: the excursion e from the nearer bound (quadratic root, 2 Newton steps)."""
        u = _uniform_open(w)  # large words: u near 1, e near 0
        uc = _uniform_open(~w)
        big_l = -_log_pos(tl.fma(ratio, uc, u))
        e = tl.div_rn(big_l + big_l, b0 + tl.sqrt_rn(tl.fma(b0, b0, big_l + big_l)))
        dl2, dl3, dl4, dl5 = 2.0 * l2, 3.0 * l3, 4.0 * l4, 5.0 * l5
        for _ in tl.static_range(2):
            # tail_correction: l(e) and its slope l'(e) from the host's polynomial
            dl = tl.fma(tl.fma(tl.fma(tl.fma(dl5, e, dl4), e, dl3), e, dl2), e, l1)
            corr = e * tl.fma(tl.fma(tl.fma(tl.fma(l5, e, l4), e, l3), e, l2), e, l1)
            f = tl.fma(e, tl.fma(0.5, e, b0), corr - big_l)
            e = e - tl.div_rn(f, b0 + e + dl)
        e = tl.where(e > 0.0, e, 0.0)
        return _clamp_to(_rescale(tl.fma(-sd_hi, e, tl.fma(-sd_lo, e, edge)), scale), lo, hi)

    @triton.jit
    def _trunc_normal_value(
        word,
        table_ptr,
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
        MODE: tl.constexpr,
    ):
        """trunc_normal_value<float, MODE>(word, P): fp32 values in [lo, hi].

        The arguments are the fields of TruncNormalParams<float> (flip and
        split as int32 bits); table_ptr: the fp32 rows of ndtri_table.
        """
        # Float arguments are fp32 scalars when compiled and Python floats in
        # the interpreter; tl.cast makes both fp32 (exact: they are fp32 values).
        lo = tl.cast(lo, tl.float32)
        hi = tl.cast(hi, tl.float32)
        if MODE == MODE_UNIFORM:
            x = _uniform_value(
                word,
                lo,
                hi,
                tl.cast(edge, tl.float32),
                tl.cast(width, tl.float32),
                tl.cast(slope, tl.float32),
                tl.cast(scale, tl.float32),
            )
        elif MODE == MODE_TAIL:
            x = _tail_value(
                word ^ _u32(flip),
                tl.cast(sd_hi, tl.float32),
                tl.cast(sd_lo, tl.float32),
                tl.cast(scale, tl.float32),
                lo,
                hi,
                tl.cast(edge, tl.float32),
                tl.cast(b0, tl.float32),
                tl.cast(ratio, tl.float32),
                tl.cast(l1, tl.float32),
                tl.cast(l2, tl.float32),
                tl.cast(l3, tl.float32),
                tl.cast(l4, tl.float32),
                tl.cast(l5, tl.float32),
            )
        elif MODE == MODE_TWO_SIDED_PRECISE:
            x = _two_sided_precise_value(
                word ^ _u32(flip),
                table_ptr,
                split,
                tl.cast(a_cdf, tl.float32),
                tl.cast(b_sf, tl.float32),
                tl.cast(a_half, tl.float32),
                tl.cast(b_half, tl.float32),
                tl.cast(step, tl.float32),
                tl.cast(mean, tl.float32),
                tl.cast(sd_hi, tl.float32),
                tl.cast(sd_lo, tl.float32),
                tl.cast(scale, tl.float32),
                lo,
                hi,
            )
        else:
            tl.static_assert(MODE == MODE_TWO_SIDED, "MODE must be a tinit.params.Mode value")
            x = _two_sided_value(
                word ^ _u32(flip),
                table_ptr,
                split,
                tl.cast(a_cdf, tl.float32),
                tl.cast(b_sf, tl.float32),
                tl.cast(a_half, tl.float32),
                tl.cast(b_half, tl.float32),
                tl.cast(step, tl.float32),
                tl.cast(mean, tl.float32),
                tl.cast(sd_hi, tl.float32),
                tl.cast(sd_lo, tl.float32),
                lo,
                hi,
            )
        return x

    # --------------------------------------------------------------- kernels

    @triton.jit(
        do_not_specialize=[
            "numel",
            "seed_lo",
            "seed_hi",
            "stream_lo",
            "stream_hi",
            "offset_lo",
            "offset_hi",
            "flip",
            "split",
        ]
    )
    def _trunc_normal_kernel(
        out_ptr,
        table_ptr,
        numel,
        seed_lo,
        seed_hi,
        stream_lo,
        stream_hi,
        offset_lo,
        offset_hi,
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
        MODE: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """Fill out[0:numel] with the values of stream indices offset + [0, numel).

        Args (device): out_ptr: fp32/bf16/fp16 tensor. table_ptr: fp32
        ndtri_table rows. numel: int. seed, stream, offset: uint64 as two
        int32 bit patterns each. flip, split: uint32 as int32 bits. The
        float arguments are the fp32 fields of TruncNormalParams<float>
        (transform.h) of the same names. MODE: TransformMode. BLOCK: counter
        blocks per program (4 BLOCK elements).
        """
        words, local, start = _stream_words(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, BLOCK)
        x = _trunc_normal_value(
            words,
            table_ptr,
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
            MODE,
        )
        base = tl.program_id(0).to(tl.int64) * (4 * BLOCK)
        _store_block(out_ptr, out_ptr, base, (offset_lo & 3) == 0, start, local, numel, x)

    @triton.jit
    def _store_block(out_ptr, vec_ptr, base, aligned, start, local, numel, x):
        """Store the values ``x`` of tensor elements start + local that lie in [0, numel).

        ``base``: a multiple of 4 BLOCK, equal to start when ``aligned`` (the
        fill's offset is a multiple of 4 and ``vec_ptr``, equal to out_ptr
        then, is aligned for a 4-element store). Then, for a program inside
        the tensor, the store has no mask and is vectorized in groups of 4
        elements, the four words of a counter block, which one thread holds:
        no layout conversion. Otherwise each element is stored alone.
        """
        if aligned & (base + local.numel <= numel):
            _store_values(vec_ptr + base, local, x, None)
        else:
            _store_values(out_ptr + start, local, x, _in_tensor(local, start, numel, local.numel))

    @triton.jit
    def _store_values(out_ptr, local, x, mask):
        """Store values ``x`` at ``out_ptr + local`` (where ``mask``): fp32 rounded once to the output dtype
        (or int32 words as they are)."""
        if out_ptr.dtype.element_ty == tl.bfloat16:
            # float_to_bf16_bits (transform.h): round to nearest even, once.
            u = x.to(tl.uint32, bitcast=True)
            r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
            tl.store(out_ptr + local, r.to(tl.uint16).to(tl.bfloat16, bitcast=True), mask=mask)
        else:
            tl.store(out_ptr + local, x.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit(do_not_specialize=["numel", "seed_lo", "seed_hi", "stream_lo", "stream_hi", "offset_lo", "offset_hi"])
    def _philox_kernel(
        out_ptr, numel, seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, BLOCK: tl.constexpr
    ):
        """Raw stream words of indices offset + [0, numel) into an int32 tensor (uint32 bits).

        Word k of every block is stored by its own strided store (out[4 b + k]): the four
        words never meet in one register tile, so there is no layout conversion (the fills'
        [BLOCK, 4] tile costs one through shared memory), at four 4-byte stores a block.
        """
        pid = tl.program_id(0).to(tl.int64)
        off = _join_u64(offset_lo, offset_hi).to(tl.int64)  # < 2**63
        blk = (off >> 2) + pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        zero = tl.full([BLOCK], 0, tl.uint32)
        r0, r1, r2, r3 = _philox4x32_10(
            blk.to(tl.uint32),
            (blk >> 32).to(tl.uint32),
            zero + _u32(stream_lo),
            zero + _u32(stream_hi),
            _u32(seed_lo),
            _u32(seed_hi),
        )
        start = pid * (4 * BLOCK) - (off & 3)  # tensor element of the program's first word
        local = tl.arange(0, BLOCK) * 4
        if (start >= 0) & (start + 4 * BLOCK <= numel):
            _store_word(out_ptr + start, local, r0, None)
            _store_word(out_ptr + start, local + 1, r1, None)
            _store_word(out_ptr + start, local + 2, r2, None)
            _store_word(out_ptr + start, local + 3, r3, None)
        else:
            _store_word(out_ptr + start, local, r0, _in_tensor(local, start, numel, 4 * BLOCK))
            _store_word(out_ptr + start, local + 1, r1, _in_tensor(local + 1, start, numel, 4 * BLOCK))
            _store_word(out_ptr + start, local + 2, r2, _in_tensor(local + 2, start, numel, 4 * BLOCK))
            _store_word(out_ptr + start, local + 3, r3, _in_tensor(local + 3, start, numel, 4 * BLOCK))

    @triton.jit
    def _store_word(ptr, local, word, mask):
        """Store uint32 words at ptr + local (where mask) as int32 bits."""
        tl.store(ptr + local, word.to(tl.int32, bitcast=True), mask=mask)

    # ---------------------------------------------------------------- the op

    def _launch(
        tensor: torch.Tensor,
        seed: int,
        stream: int,
        offset: int,
        constants,
        block: int,
        wrap,
        table: torch.Tensor | None = None,
    ) -> None:
        args = _kernel_constants(constants)
        kernel = wrap(_trunc_normal_kernel)
        if table is None:
            table = _ndtri_table_on(tensor.device)
        # Triton launches on the current device: make it the tensor's (cuda:1 on a cuda:0 thread).
        guard = torch.cuda.device(tensor.device) if tensor.device.type == "cuda" else contextlib.nullcontext()
        with guard:
            kernel[_grid(tensor.numel(), offset, block)](
                tensor,
                table,
                tensor.numel(),
                **_stream_args(seed, stream, offset),
                **args,
                BLOCK=block,
                **LAUNCH_OPTIONS,
            )

    def _is_fake(tensor: torch.Tensor) -> bool:
        from torch._subclasses.fake_tensor import is_fake

        return tensor.device.type == "meta" or is_fake(tensor)

    @torch.library.triton_op(OP_NAME, mutates_args={"tensor"})
    def _trunc_normal_triton_op(
        tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: list[float]
    ) -> None:
        """Registered body of ``torch.ops.tinit.trunc_normal_triton_``.

        seed and stream arrive as int64 bits of the uint64 values (the schema's
        int), like ``tinit::trunc_normal_``.
        """
        if tensor.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{OP_NAME}: {why_not(tensor) or tensor.dtype}")
        _check_target(tensor, offset, OP_NAME)
        if tensor.numel() == 0:
            return
        # The interpreter runs the kernel in Python on the tensor's storage,
        # which fake and meta tensors do not have; a compiled kernel goes
        # through wrap_triton's higher-order op, whose fake kernel does
        # nothing. A mutation-only op has no output shape to compute.
        fake = _is_fake(tensor)
        if interpreted() and fake:
            return
        # Traced (fake tensors): the table is made in the trace, where the
        # cached real tensor would be foreign to its fake mode.
        table = (
            torch.tensor(_NDTRI_COEFFICIENTS, dtype=torch.float32, device=tensor.device)
            if fake
            else _ndtri_table_on(tensor.device)
        )
        block = _INTERPRETER_BLOCK if interpreted() else DEFAULT_BLOCK
        _launch(tensor, seed, stream, offset, constants, block, torch.library.wrap_triton, table)


def trunc_normal_triton_(
    tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: tuple[float, ...], *, block: int | None = None
) -> None:
    """Fill contiguous ``tensor`` in place with tinit's truncated normal, in Triton.

    Element j (row-major) takes stream index offset + j of (seed, stream)
    (csrc/include/tinit/philox.h); its value is the transform of
    csrc/include/tinit/transform.h (stream version 2, fp32 arithmetic) with
    the constants of ``tinit.params.transform_constants``, bit-identical to
    ``tinit.ops.trunc_normal_native``. Bounds are absolute (tensor units).

    Args:
        tensor: contiguous fp32, bf16 or fp16 tensor on a GPU (or on the CPU
            under ``TRITON_INTERPRET=1``), written in place.
        seed: unsigned 64-bit Philox key, 0 <= seed < 2**64.
        stream: unsigned 64-bit stream id (upper counter words).
        offset: stream index of element 0, 0 <= offset and offset + numel <= 2**63.
        constants: the PARAM_COUNT floats of ``transform_constants(mean, std, a, b, tensor.dtype)``
            (or ``uniform_constants``), a ``tinit.params.TruncNormalParams``.
        block: counter blocks per program (a power of two; 4*block elements);
            None for the default through the registered op. The values do not
            depend on it.

    Returns:
        None.

    Raises:
        ImportError: triton is not installed (or torch lacks triton_op).
        TypeError: fp64 or another dtype this backend does not fill.
        ValueError: a non-contiguous tensor, a bad offset, seed or stream, or
            malformed constants.
    """
    _require_triton()
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"tinit triton backend: {why_not(tensor)}")
    _check_target(tensor, offset, "trunc_normal_triton_")
    seed64, stream64 = as_int64(seed), as_int64(stream)
    if block is None:
        _kernel_constants(constants)  # fail early, with the op's message
        torch.ops.tinit.trunc_normal_triton_(tensor, seed64, stream64, offset, list(constants))
        return
    _check_block(block)
    if tensor.numel():
        _launch(tensor, seed64, stream64, offset, constants, block, lambda k: k)


def philox_words_triton(
    numel: int,
    seed: int,
    stream: int,
    offset: int = 0,
    device: torch.device | str = "cuda",
    *,
    block: int = WORDS_BLOCK,
) -> torch.Tensor:
    """The uint32 stream words for indices [offset, offset + numel), computed in Triton.

    Args:
        numel: number of words (>= 0).
        seed, stream: unsigned 64-bit Philox key and stream id.
        offset: index of the first word (>= 0).
        device: where the kernel runs (a GPU, or "cpu" under TRITON_INTERPRET=1).
        block: counter blocks per program (a power of two); the words do not depend on it.

    Returns:
        int64 tensor of shape (numel,) with values in [0, 2**32), equal to
        ``tinit.ops.philox_words(numel, seed, stream, offset)``.

    Raises:
        ImportError: triton is not installed (or torch lacks triton_op).
        ValueError: negative numel or offset, or seed/stream outside [0, 2**64).
    """
    _require_triton()
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    _check_block(block)
    out = torch.empty(numel, dtype=torch.int32, device=device)
    _check_target(out, offset, "philox_words_triton")
    seed64, stream64 = as_int64(seed), as_int64(stream)
    if numel:
        _philox_kernel[_grid(numel, offset, block)](
            out, numel, **_stream_args(seed64, stream64, offset), BLOCK=block, num_warps=_NUM_WARPS
        )
    return out.to(torch.int64) & 0xFFFFFFFF


def _check_block(block: int) -> None:
    if not (isinstance(block, int) and block > 0 and block & (block - 1) == 0):
        raise ValueError(f"block must be a power of two, got {block!r}")
