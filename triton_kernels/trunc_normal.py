"""Triton backend of tinit: the Philox4x32-10 stream and the truncated-normal transform.

The kernel computes exactly what the CPU op computes: the stream of
``csrc/include/tinit/philox.h`` (key = seed, counter = (block, stream), four
words per Philox call) and the transform of ``csrc/include/tinit/transform.h``,
written op for op in the same order from IEEE basic operations (``tl.fma`` for
every ``fma_rn``, ``tl.div_rn``/``tl.sqrt_rn`` for fp32 division and square
root, whose plain forms are approximate on NVIDIA; fp64 ``/`` and ``tl.sqrt``
compile to div.rn.f64/sqrt.rn.f64). No libdevice call is used.
Launches pass ``enable_fp_fusion=False`` so that no multiply-add is contracted
beyond the explicit ones, as the C++ build does with ``-ffp-contract=off``.
On a GPU the values are therefore bit-identical to the CPU kernel's; under
``TRITON_INTERPRET=1`` they are too (the interpreter's ``tl.fma`` is a true
fused multiply-add).

As in the CPU op, fp32 tensors evaluate the AS 241 rationals of
``ndtri_lower`` (and mean + std z) in fp64, bf16/fp16 tensors in fp32
(``RationalT`` in ``csrc/cpu/trunc_normal.cpp``); everything else (uniforms,
logs, ``ndtri_central``, the tail fixed point) is fp32. fp64 tensors are not
supported by this backend (the C++ ``double`` path uses libm ``log``, which
has no bit-exact Triton counterpart).

The fill is registered as the op ``torch.ops.tinit.trunc_normal_triton_``
(``torch.library.triton_op`` + ``wrap_triton``), so it can be traced by
``make_fx``/``torch.export`` and checked with ``torch.library.opcheck``.
Importing this module never requires triton; calling it without triton
raises ImportError.
"""

from __future__ import annotations

import numpy as np
import torch

from tinit.ops import as_int64
from tinit.params import MODE_CENTRAL, MODE_TAIL, MODE_TWO_SIDED, MODE_TWO_SIDED_FAR

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
_PARAM_COUNT = 14  # kParamCount, transform.h
_MODES = (MODE_TWO_SIDED, MODE_TAIL, MODE_TWO_SIDED_FAR, MODE_CENTRAL)
# Counter blocks (four elements each) per program and warps per program. The
# interpreter's cost is per program, so it takes larger programs.
DEFAULT_BLOCK = 256
_INTERPRETER_BLOCK = 2048
_NUM_WARPS = 4
# Compile options of the fill: no contraction of a*b + c into an fma beyond the
# explicit tl.fma calls (the C++ builds use -ffp-contract=off).
LAUNCH_OPTIONS = {"num_warps": _NUM_WARPS, "enable_fp_fusion": False}
_INSTALL_HINT = "install triton (`pip install triton`, or tinit[triton]) to use the triton backend"


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
        return (f"fills float32, bfloat16 and float16 tensors, got {tensor.dtype} "
                "(the fp64 transform uses libm log, which Triton cannot reproduce bit for bit)")
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
    """The kernel arguments of ``TruncNormalParams<float>::from_packed`` (transform.h)."""
    if len(constants) != _PARAM_COUNT:
        raise ValueError(f"expected {_PARAM_COUNT} transform constants (tinit/params.py), got {len(constants)}")
    mode = int(constants[0])
    if mode not in _MODES or mode != constants[0]:
        raise ValueError(f"unknown transform mode {constants[0]!r}; expected one of {_MODES}")
    split = int(constants[7])
    if not 0 <= split < 2**32:
        raise ValueError(f"split word {constants[7]!r} is not a uint32")
    return {
        "sign": _f32(constants[1]),
        "flip": -1 if constants[1] < 0 else 0,  # ~0u when mirrored, as int32 bits
        "a_cdf": _f32(constants[2]),
        "b_sf": _f32(constants[3]),
        "mass": _f32(constants[4]),
        "log_b_cdf": _f32(constants[5]),
        "ratio": _f32(constants[6]),
        "split": _i32_bits(split),
        "mean": _f32(constants[8]),
        "std": _f32(constants[9]),
        "lo": _f32(constants[10]),
        "hi": _f32(constants[11]),
        "a_half": _f32(constants[12]),
        "b_half": _f32(constants[13]),
        "MODE": mode,
    }


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
            n0 = tl.umulhi(c2, 0xCD9E8D57) ^ c1 ^ k0
            n2 = tl.umulhi(c0, 0xD2511F53) ^ c3 ^ k1
            c1 = tl.mul(c2, 0xCD9E8D57, sanitize_overflow=False)  # low halves: mod 2^32
            c3 = tl.mul(c0, 0xD2511F53, sanitize_overflow=False)
            c0 = n0
            c2 = n2
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
        return _stream_words_at(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi,
                                tl.program_id(0).to(tl.int64), BLOCK)

    @triton.jit
    def _stream_words_at(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, program,
                         BLOCK: tl.constexpr):
        """The words of the BLOCK counter blocks of program ``program`` of a fill, and their tensor positions.

        64-bit scalars arrive as two int32 bit patterns (see ``_split_u64``).
        Program p (an int64 scalar; the grouped kernel numbers the programs of
        each of its tensors from 0) covers counter blocks first + p*BLOCK +
        [0, BLOCK), first = offset // 4; word k of block b is stream index
        4b + k, which is tensor element 4b + k - offset (philox.h). Returns
        (words uint32[4 BLOCK], positions int64[4 BLOCK]) in stream order.
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
        # [BLOCK, 2, 2] with [b, i, j] = word 2i + j of block b, flattened
        # row-major: position 4b + k holds word k of block b.
        words = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [4 * BLOCK])
        pos = blk0 * 4 - off + tl.arange(0, 4 * BLOCK).to(tl.int64)
        return words, pos

    # ------------------------------------------------------------- transform

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
    def _sqrt_rn(x):
        """sqrt_rn: correctly rounded (tl.sqrt is approximate for fp32 only)."""
        if x.dtype == tl.float64:
            return tl.sqrt(x)
        else:
            return tl.sqrt_rn(x)

    @triton.jit
    def _div_rn(x, y):
        """IEEE division (fp32 ``/`` is div.full, approximate, on NVIDIA)."""
        if x.dtype == tl.float64:
            return x / y
        else:
            return tl.div_rn(x, y)

    @triton.jit
    def _coef(far, near: tl.constexpr, far_coef: tl.constexpr, FAR: tl.constexpr, DT: tl.constexpr):
        """TINIT_C(near, far) of ndtri_lower as a DT value (typed, so fp64 keeps every digit)."""
        if FAR:
            return tl.where(far, tl.full([], far_coef, DT), tl.full([], near, DT))
        else:
            return tl.full([], near, DT)

    @triton.jit
    def _ndtri_lower(q_in, log_s_in, FAR: tl.constexpr, F64: tl.constexpr):
        """ndtri_lower<float, FAR, A>: Phi^-1(s), s in (0, 1/2], from q = s - 1/2 and log s;
        A = fp64 if F64 else fp32.

        Wichura, "Algorithm AS 241", Applied Statistics 37(3), 1988 (PPND16).
        """
        if F64:
            DT: tl.constexpr = tl.float64
        else:
            DT: tl.constexpr = tl.float32
        q = q_in.to(DT)
        log_s = log_s_in.to(DT)
        central = q >= -0.425
        tc = tl.fma(-q, q, 0.180625)
        num_c = tl.fma(tl.full([], 2.5090809287301226727e+3, DT), tc, 3.3430575583588128105e+4)
        num_c = tl.fma(num_c, tc, 6.7265770927008700853e+4)
        num_c = tl.fma(num_c, tc, 4.5921953931549871457e+4)
        num_c = tl.fma(num_c, tc, 1.3731693765509461125e+4)
        num_c = tl.fma(num_c, tc, 1.9715909503065514427e+3)
        num_c = tl.fma(num_c, tc, 1.3314166789178437745e+2)
        num_c = tl.fma(num_c, tc, 3.3871328727963666080e+0)
        den_c = tl.fma(tl.full([], 5.2264952788528545610e+3, DT), tc, 2.8729085735721942674e+4)
        den_c = tl.fma(den_c, tc, 3.9307895800092710610e+4)
        den_c = tl.fma(den_c, tc, 2.1213794301586595867e+4)
        den_c = tl.fma(den_c, tc, 5.3941960214247511077e+3)
        den_c = tl.fma(den_c, tc, 6.8718700749205790830e+2)
        den_c = tl.fma(den_c, tc, 4.2313330701600911252e+1)
        den_c = tl.fma(den_c, tc, 1.0)
        rt = _sqrt_rn(-log_s)
        far = rt > 5.0  # used only when FAR
        if FAR:
            tt = tl.where(far, rt - 5.0, rt - 1.6)
        else:
            tt = rt - 1.6
        num_t = tl.fma(_coef(far, 7.74545014278341407640e-4, 2.01033439929228813265e-7, FAR, DT), tt,
                       _coef(far, 2.27238449892691845833e-2, 2.71155556874348757815e-5, FAR, DT))
        num_t = tl.fma(num_t, tt, _coef(far, 2.41780725177450611770e-1, 1.24266094738807843860e-3, FAR, DT))
        num_t = tl.fma(num_t, tt, _coef(far, 1.27045825245236838258e+0, 2.65321895265761230930e-2, FAR, DT))
        num_t = tl.fma(num_t, tt, _coef(far, 3.64784832476320460504e+0, 2.96560571828504891230e-1, FAR, DT))
        num_t = tl.fma(num_t, tt, _coef(far, 5.76949722146069140550e+0, 1.78482653991729133580e+0, FAR, DT))
        num_t = tl.fma(num_t, tt, _coef(far, 4.63033784615654529590e+0, 5.46378491116411436990e+0, FAR, DT))
        num_t = tl.fma(num_t, tt, _coef(far, 1.42343711074968357734e+0, 6.65790464350110377720e+0, FAR, DT))
        den_t = tl.fma(_coef(far, 1.05075007164441684324e-9, 2.04426310338993978564e-15, FAR, DT), tt,
                       _coef(far, 5.47593808499534494600e-4, 1.42151175831644588870e-7, FAR, DT))
        den_t = tl.fma(den_t, tt, _coef(far, 1.51986665636164571966e-2, 1.84631831751005468180e-5, FAR, DT))
        den_t = tl.fma(den_t, tt, _coef(far, 1.48103976427480074590e-1, 7.86869131145613259100e-4, FAR, DT))
        den_t = tl.fma(den_t, tt, _coef(far, 6.89767334985100004550e-1, 1.48753612908506148525e-2, FAR, DT))
        den_t = tl.fma(den_t, tt, _coef(far, 1.67638483018380384940e+0, 1.36929880922735805310e-1, FAR, DT))
        den_t = tl.fma(den_t, tt, _coef(far, 2.05319162663775882187e+0, 5.99832206555887937690e-1, FAR, DT))
        den_t = tl.fma(den_t, tt, 1.0)
        ratio = _div_rn(tl.where(central, num_c, num_t), tl.where(central, den_c, den_t))
        return tl.where(central, q * ratio, -ratio)

    @triton.jit
    def _central_poly_tail(q, s):
        """central_poly_tail<float>: (v, h) with G = c0 + v h, v = -log(4 s (1 - s)) - 3.125, q = s - 1/2."""
        y = tl.where((q > -0.25) & (q < 0.25), tl.fma(-4.0 * q, q, 1.0), 4.0 * tl.fma(-s, s, s))
        w = -_log_pos(y)
        v = w - 3.125
        h = tl.fma(-1.76240363502017303e-11, v, 5.96620113740977795e-12)
        h = tl.fma(h, v, 1.46103378864113002e-09)
        h = tl.fma(h, v, -6.66849891677600610e-09)
        h = tl.fma(h, v, -4.09017025663115202e-08)
        h = tl.fma(h, v, 6.03361620658563376e-07)
        h = tl.fma(h, v, -1.93183641443874362e-06)
        h = tl.fma(h, v, -1.96445117269990424e-05)
        h = tl.fma(h, v, 2.64083328814145697e-04)
        h = tl.fma(h, v, -1.04749843972010777e-03)
        h = tl.fma(h, v, -8.53289995011116860e-03)
        h = tl.fma(h, v, 3.39634954474917872e-01)
        return v, h

    @triton.jit
    def _central_finish(d, v, h, signed_std, mean, F64: tl.constexpr):
        """central_finish<A>: last Horner step, (2s - 1) g and mean + std z in A, one rounding to fp32."""
        if F64:
            DT: tl.constexpr = tl.float64
        else:
            DT: tl.constexpr = tl.float32
        c0 = tl.full(v.shape, 2.33862071010127481e+00, DT)
        g = tl.fma(v.to(DT), h.to(DT), c0)
        t = d.to(DT) * g
        return tl.fma(signed_std.to(DT), t, mean.to(DT)).to(tl.float32)

    @triton.jit
    def _upper_tail_quantile_from_log(log_p):
        """upper_tail_quantile_from_log<float>: y with log Q(y) = log_p (Mills-ratio fixed point)."""
        c = -log_p - 0.91893853320467274178
        y = tl.sqrt_rn(c + c)
        for _ in tl.static_range(4):
            t = tl.div_rn(tl.full(y.shape, 1.0, tl.float32), y * y)
            m = 10395.0 * t - 945.0
            m = m * t + 105.0
            m = m * t - 15.0
            m = m * t + 3.0
            m = m * t - 1.0
            m = m * t + 1.0
            h = c - _log_pos(y) + _log_pos(m)
            y = tl.sqrt_rn(h + h)
        return y

    @triton.jit
    def _trunc_normal_value(word, sign, flip, a_cdf, b_sf, mass, log_b_cdf, ratio, split,
                            mean, std, lo, hi, a_half, b_half, MODE: tl.constexpr, F64: tl.constexpr):
        """trunc_normal_value<float, MODE, A>(word, P), with standard_deviate and
        two_sided_s inlined; A = fp64 if F64 else fp32. Returns fp32 values in [lo, hi]."""
        if F64:
            DT: tl.constexpr = tl.float64
        else:
            DT: tl.constexpr = tl.float32
        # Float arguments are fp32 scalars when compiled and Python floats in
        # the interpreter; tl.cast makes both fp32 (exact: they are fp32 values).
        sign = tl.cast(sign, tl.float32)
        a_cdf = tl.cast(a_cdf, tl.float32)
        b_sf = tl.cast(b_sf, tl.float32)
        mass = tl.cast(mass, tl.float32)
        log_b_cdf = tl.cast(log_b_cdf, tl.float32)
        ratio = tl.cast(ratio, tl.float32)
        mean = tl.cast(mean, tl.float32)
        std = tl.cast(std, tl.float32)
        lo = tl.cast(lo, tl.float32)
        hi = tl.cast(hi, tl.float32)
        a_half = tl.cast(a_half, tl.float32)
        b_half = tl.cast(b_half, tl.float32)
        w = word ^ _u32(flip)
        if MODE == 1:  # kTail
            u = _uniform_open(w)
            uc = _uniform_open(~w)
            log_p = log_b_cdf + _log_pos(u + ratio * uc)
            z = -(_upper_tail_quantile_from_log(log_p).to(DT))
        else:
            lower = w <= _u32(split)
            u = _uniform_open(tl.where(lower, w, ~w))
            q = tl.fma(u, mass, tl.where(lower, a_half, b_half))
            s = tl.fma(u, mass, tl.where(lower, a_cdf, b_sf))
            if MODE != 3:
                z = _ndtri_lower(q, _log_pos(s), MODE == 2, F64)
                z = tl.where(lower, z, -z)
        if MODE == 3:  # kCentral: central_stage1 + central_finish<A>
            v, h = _central_poly_tail(q, s)
            x = _central_finish(q + q, v, h, tl.where(lower, std, -std) * sign, mean, F64)
        else:
            x = tl.fma(std.to(DT), z * sign.to(DT), mean.to(DT)).to(tl.float32)
        c = tl.where(x < lo, lo, x)
        return tl.where(c > hi, hi, c)

    # --------------------------------------------------------------- kernels

    @triton.jit(do_not_specialize=["numel", "flip", "split"])
    def _trunc_normal_kernel(out_ptr, numel, seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi,
                             sign, flip, a_cdf, b_sf, mass, log_b_cdf, ratio, split,
                             mean, std, lo, hi, a_half, b_half, MODE: tl.constexpr, BLOCK: tl.constexpr):
        """Fill out[0:numel] with the values of stream indices offset + [0, numel).

        Args (device): out_ptr: fp32/bf16/fp16 tensor. numel: int. seed, stream,
        offset: uint64 as two int32 bit patterns each. flip, split: uint32 as int32 bits.
        The float arguments are the fp32 TruncNormalParams (transform.h).
        MODE: TransformMode. BLOCK: counter blocks per program (4 BLOCK elements).
        """
        words, pos = _stream_words(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, BLOCK)
        F64: tl.constexpr = out_ptr.dtype.element_ty == tl.float32  # RationalT<out_t>
        x = _trunc_normal_value(words, sign, flip, a_cdf, b_sf, mass, log_b_cdf, ratio, split,
                                mean, std, lo, hi, a_half, b_half, MODE, F64)
        _store_values(out_ptr, pos, x, (pos >= 0) & (pos < numel.to(tl.int64)))

    @triton.jit
    def _store_values(out_ptr, pos, x, mask):
        """Store fp32 values ``x`` at ``out_ptr + pos`` (where ``mask``), rounded once to the output dtype."""
        if out_ptr.dtype.element_ty == tl.bfloat16:
            # float_to_bf16_bits (transform.h): round to nearest even, once.
            u = x.to(tl.uint32, bitcast=True)
            r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
            tl.store(out_ptr + pos, r.to(tl.uint16).to(tl.bfloat16, bitcast=True), mask=mask)
        else:
            tl.store(out_ptr + pos, x.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit(do_not_specialize=["numel"])
    def _philox_kernel(out_ptr, numel, seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi,
                       BLOCK: tl.constexpr):
        """Raw stream words of indices offset + [0, numel) into an int32 tensor (uint32 bits)."""
        words, pos = _stream_words(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, BLOCK)
        mask = (pos >= 0) & (pos < numel.to(tl.int64))
        tl.store(out_ptr + pos, words.to(tl.int32, bitcast=True), mask=mask)

    # ---------------------------------------------------------------- the op

    def _launch(tensor: torch.Tensor, seed: int, stream: int, offset: int,
                constants, block: int, wrap) -> None:
        args = _kernel_constants(constants)
        kernel = wrap(_trunc_normal_kernel)
        kernel[_grid(tensor.numel(), offset, block)](
            tensor, tensor.numel(), **_stream_args(seed, stream, offset), **args, BLOCK=block,
            **LAUNCH_OPTIONS)

    def _is_fake(tensor: torch.Tensor) -> bool:
        from torch._subclasses.fake_tensor import is_fake

        return tensor.device.type == "meta" or is_fake(tensor)

    @torch.library.triton_op(OP_NAME, mutates_args={"tensor"})
    def _trunc_normal_triton_op(tensor: torch.Tensor, seed: int, stream: int, offset: int,
                                constants: list[float]) -> None:
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
        if interpreted() and _is_fake(tensor):
            return
        block = _INTERPRETER_BLOCK if interpreted() else DEFAULT_BLOCK
        _launch(tensor, seed, stream, offset, constants, block, torch.library.wrap_triton)


def trunc_normal_triton_(tensor: torch.Tensor, seed: int, stream: int, offset: int,
                         constants: tuple[float, ...], *, block: int | None = None) -> None:
    """Fill contiguous ``tensor`` in place with tinit's truncated normal, in Triton.

    Element j (row-major) takes stream index offset + j of (seed, stream)
    (csrc/include/tinit/philox.h); its value is the transform of
    csrc/include/tinit/transform.h with the constants of
    ``tinit.params.transform_constants``, bit-identical to
    ``tinit.ops.trunc_normal_native``. Bounds are absolute (tensor units).

    Args:
        tensor: contiguous fp32, bf16 or fp16 tensor on a GPU (or on the CPU
            under ``TRITON_INTERPRET=1``), written in place.
        seed: unsigned 64-bit Philox key, 0 <= seed < 2**64.
        stream: unsigned 64-bit stream id (upper counter words).
        offset: stream index of element 0, 0 <= offset and offset + numel <= 2**63.
        constants: the 12 floats of ``transform_constants(mean, std, a, b, tensor.dtype)``.
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


def philox_words_triton(numel: int, seed: int, stream: int, offset: int = 0,
                        device: torch.device | str = "cuda", *, block: int = DEFAULT_BLOCK) -> torch.Tensor:
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
        _philox_kernel[_grid(numel, offset, block)](out, numel, **_stream_args(seed64, stream64, offset),
                                                    BLOCK=block, num_warps=_NUM_WARPS)
    return out.to(torch.int64) & 0xFFFFFFFF


def _check_block(block: int) -> None:
    if not (isinstance(block, int) and block > 0 and block & (block - 1) == 0):
        raise ValueError(f"block must be a power of two, got {block!r}")
