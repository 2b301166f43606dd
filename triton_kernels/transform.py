"""The truncated-normal transform in Triton: stream words to fp32 values, and their store.

``tinit::trunc_normal_value`` and its helpers (float path, stream version 2), written op for op
in the same order from IEEE basic operations: ``tl.fma`` for every ``fma_rn``,
``tl.div_rn``/``tl.sqrt_rn`` for fp32 division and square root (whose plain forms are approximate
on NVIDIA), bit casts for ``float_as_bits``, and the same compares and selects. No libdevice call
and no fp64 operation is used. ``tinit::ndtri_table``'s coefficient rows
(``tinit._ndtri_table.COEFFICIENTS``, the values of ``TINIT_NDTRI_COEFFICIENTS``) are an fp32
tensor (``_host.ndtri_rows``, last row first) that the kernels read a row of per value.

The record: ``KernelParams`` is ``tinit::TruncNormalParams<float>`` as the kernels hold it, the
fields of ``tinit.params.TruncNormalParams`` by name but mode (the MODE constexpr, the C++
template argument) and sign (its ``flip`` word, as in the C++ record). The @triton.jit helpers
take it as one argument ``P``, as ``tinit::trunc_normal_value<float, MODE>(w, P)`` does; Triton
flattens a tuple argument into its fields and inlines the helpers, so the generated code is that
of separate arguments. Importing this module never requires triton; without it the device
functions are not defined.
"""

from __future__ import annotations

from collections import namedtuple

from tinit._ndtri_table import ROW as _ROW
from tinit.params import PARAM_COUNT, Mode, TruncNormalParams, valid_params

from ._host import f32, i32_bits, is_interpreted, tl, triton

# The transform's device functions and the kernels' record, shared by this package's kernels: no API.
__all__: list[str] = []

_MODES = tuple(int(mode) for mode in Mode)
# The fp32 fields of TruncNormalParams<float> the kernels take, by name and in
# the record's order (mode is the MODE constexpr; sign only gives flip; split
# is a uint32).
# (a NamedTuple's annotations are its fields, in order)
FLOAT_FIELDS = tuple(name for name in TruncNormalParams.__annotations__ if name not in ("mode", "sign", "split"))
# tinit::TruncNormalParams<float> less mode and sign, in its order: flip and split as int32 bits,
# then FLOAT_FIELDS as fp32.
KernelParams = namedtuple("KernelParams", ("flip", "split", *FLOAT_FIELDS))


def kernel_constants(constants) -> dict:
    """The kernel arguments of ``tinit::TruncNormalParams<float>::from_packed``, by field name.

    Args:
        constants: PARAM_COUNT numbers, a ``tinit.params.TruncNormalParams`` (or its tuple).

    Returns:
        {"flip", "split": int32 bits, each name of FLOAT_FIELDS: its fp32
        value as a Python float, "MODE": the mode as an int}.

    Raises:
        ValueError: not PARAM_COUNT constants, an unknown mode, a split
            that is not a uint32, or two-sided constants outside the range
            of ``tinit::valid_params``, which keeps the table reads in bounds.
    """
    if len(constants) != PARAM_COUNT:
        raise ValueError(
            f"expected {PARAM_COUNT} transform constants (tinit.params.TruncNormalParams), got {len(constants)}"
        )
    p = TruncNormalParams(*constants)
    if p.mode not in _MODES:  # tinit::valid_mode; NaN and inf too
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
        "split": i32_bits(split),
        **{name: f32(getattr(p, name)) for name in FLOAT_FIELDS},
        "MODE": mode,
    }


if triton is not None:
    from .philox import in_tensor, u32

    # Kernels may read module globals only as constexprs: the modes of
    # tinit.params.Mode (tinit::TransformMode), named here once for both kernels,
    # and ndtri_table's row width.
    MODE_UNIFORM = tl.constexpr(int(Mode.UNIFORM))
    MODE_TWO_SIDED = tl.constexpr(int(Mode.TWO_SIDED))
    MODE_TWO_SIDED_PRECISE = tl.constexpr(int(Mode.TWO_SIDED_PRECISE))
    MODE_TAIL = tl.constexpr(int(Mode.TAIL))
    _NDTRI_ROW = tl.constexpr(_ROW)

    # tinit::trunc_normal_value, op for op (float path): every fma_rn is a tl.fma, division
    # and square root are tl.div_rn / tl.sqrt_rn, float_as_bits a bit cast.

    @triton.jit
    def uniform_open(w):
        """``tinit::uniform_open<float>``: fma(float(w), 2^-32, 2^-33).

        In (0, 1] in fp32: float(w) keeps 24 bits, so words >= 2^32 - 128 give 1.0.
        """
        return tl.fma(w.to(tl.float32), 2.3283064365386962890625e-10, 1.16415321826934814453125e-10)

    @triton.jit
    def log_pos(x):
        """``tinit::log_pos(float)``: Cephes logf on [sqrt(1/2), sqrt(2)), fp32, x normal and > 0."""
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
    def fp32_params(P):
        """``P`` with its floats made fp32 (``TruncNormalParams<float>::from_packed``'s casts).

        Float kernel arguments are fp32 scalars when compiled and Python floats
        in the interpreter; tl.cast makes both fp32 (exact: they are fp32
        values), and is no operation on fp32 values (loaded rows, compiled kernels).
        """
        return KernelParams(
            P.flip,
            P.split,
            tl.cast(P.a_cdf, tl.float32),
            tl.cast(P.b_sf, tl.float32),
            tl.cast(P.a_half, tl.float32),
            tl.cast(P.b_half, tl.float32),
            tl.cast(P.step, tl.float32),
            tl.cast(P.mean, tl.float32),
            tl.cast(P.sd_hi, tl.float32),
            tl.cast(P.sd_lo, tl.float32),
            tl.cast(P.scale, tl.float32),
            tl.cast(P.lo, tl.float32),
            tl.cast(P.hi, tl.float32),
            tl.cast(P.edge, tl.float32),
            tl.cast(P.width, tl.float32),
            tl.cast(P.slope, tl.float32),
            tl.cast(P.b0, tl.float32),
            tl.cast(P.ratio, tl.float32),
            tl.cast(P.l1, tl.float32),
            tl.cast(P.l2, tl.float32),
            tl.cast(P.l3, tl.float32),
            tl.cast(P.l4, tl.float32),
            tl.cast(P.l5, tl.float32),
        )

    @triton.jit
    def clamp_to(x, P):
        """``tinit::clamp_to``, its device form fminf(fmaxf(x, P.lo), P.hi) (x is never NaN nor -0: the
        compare form's bits)."""
        return tl.minimum(tl.maximum(x, P.lo), P.hi)

    @triton.jit
    def ndtri_row(table_ptr, s):
        """The 8 coefficients c0..c6, c0_lo of s's row (``tinit::ndtri_segment``), s one-dimensional;
        table_ptr: ``_host.ndtri_rows``.

        The row's 32 bytes are two 4-element vector loads a value (its halves, 16-byte aligned:
        the table tensor is, and a row is 32 bytes), each a [len(s), 4] tile that one thread
        holds whole, split in registers into its columns: no layout conversion.
        """
        # ndtri_segment: seg = 255 - (bits >> 22), in [0, 255] for s in [0, 1.75] (kernel_constants
        # checks), whose row the table (_host.ndtri_rows: last row first) holds at bits >> 22.
        row = (s.to(tl.uint32, bitcast=True) >> 22).to(tl.int32)
        half = (row * _NDTRI_ROW)[:, None] + tl.arange(0, 4)[None, :]
        c0, c1, c2, c3 = _columns(tl.load(table_ptr + half))
        c4, c5, c6, c7 = _columns(tl.load(table_ptr + 4 + half))
        return c0, c1, c2, c3, c4, c5, c6, c7

    @triton.jit
    def _columns(tile):
        """The four columns of a [N, 4] tile (the inverse of ``store_block``'s join)."""
        even, odd = tl.split(tl.reshape(tile, [tile.shape[0], 2, 2]))
        t0, t2 = tl.split(even)
        t1, t3 = tl.split(odd)
        return t0, t1, t2, t3

    @triton.jit
    def ndtri_variable(s, q, central):
        """``tinit::ndtri_variable``: q^2 on row 0, else r in [-1/4, 1/4) from the mantissa bits of s."""
        bits = s.to(tl.int32, bitcast=True)
        r = ((bits & 0x003FFFFF) | 0x3F800000).to(tl.float32, bitcast=True) - 1.25
        return tl.where(central, q * q, r)

    @triton.jit
    def ndtri_acc(c1, c2, c3, c4, c5, c6, t):
        """``tinit::horner``(t, c1, ..., c6): the row polynomial but its last step."""
        acc = tl.fma(c6, t, c5)
        acc = tl.fma(acc, t, c4)
        acc = tl.fma(acc, t, c3)
        acc = tl.fma(acc, t, c2)
        return tl.fma(acc, t, c1)

    @triton.jit
    def ndtri_table(table_ptr, s, q):
        """``tinit::ndtri_table``: Phi^-1(s) <= 0 for s in [2^-125, 1/2], q = s - 1/2 (one polynomial per row)."""
        central = s >= 0.25
        c0, c1, c2, c3, c4, c5, c6, _ = ndtri_row(table_ptr, s)  # c0_lo unused
        t = ndtri_variable(s, q, central)
        p = tl.fma(ndtri_acc(c1, c2, c3, c4, c5, c6, t), t, c0)
        return tl.where(central, q * p, p)

    @triton.jit
    def ndtri_table_pair(table_ptr, s, q):
        """``tinit::ndtri_table_pair``: the same z as (z_hi, z_lo), with ``tinit::ndtri_poly``'s p_lo."""
        central = s >= 0.25
        c0, c1, c2, c3, c4, c5, c6, c7 = ndtri_row(table_ptr, s)
        t = ndtri_variable(s, q, central)
        acc = ndtri_acc(c1, c2, c3, c4, c5, c6, t)
        p_hi = tl.fma(acc, t, c0)
        p_lo = tl.fma(acc, t, c0 - p_hi) + c7
        m = tl.where(central, q, 1.0)
        z_hi = m * p_hi
        z_lo = tl.fma(m, p_hi, -z_hi) + m * p_lo
        return z_hi, z_lo

    @triton.jit
    def two_sided_s(w, P):
        """``tinit::two_sided_s``: (s, q, lower) of word w (already flipped), s = s0 + step w' in one rounding."""
        lower = w <= u32(P.split)
        fw = tl.where(lower, w, ~w).to(tl.float32)
        q = tl.fma(fw, P.step, tl.where(lower, P.a_half, P.b_half))
        s = tl.fma(fw, P.step, tl.where(lower, P.a_cdf, P.b_sf))
        return s, q, lower

    @triton.jit
    def rescale(x, scale):
        """``tinit::rescale``: x scale + 0 (an underflowed -0 becomes +0)."""
        return x * scale + 0.0

    @triton.jit
    def uniform_value(w, P):
        """``tinit::uniform_value``: (edge + width (u + slope u (u - 1))) scale, clamped."""
        u = uniform_open(w)
        g = tl.fma(P.slope * u, u - 1.0, u)
        return clamp_to(rescale(tl.fma(P.width, g, P.edge), P.scale), P)

    @triton.jit
    def two_sided_value(w, table_ptr, P):
        """``tinit::two_sided_value`` (float): mean + (sd_hi + sd_lo) z, clamped."""
        s, q, lower = two_sided_s(w ^ u32(P.flip), P)
        # lower ? zl : -zl as a sign-bit xor (z is never NaN): a word, not a predicate, lives
        # across the table loads; the predicate made ptxas spill at 16 values a thread.
        sign = tl.where(lower, 0, 0x80000000).to(tl.uint32)
        zl = ndtri_table(table_ptr, s, q)
        z = (zl.to(tl.uint32, bitcast=True) ^ sign).to(tl.float32, bitcast=True)
        return clamp_to(tl.fma(P.sd_hi, z, tl.fma(P.sd_lo, z, P.mean)), P)

    @triton.jit
    def two_sided_precise_value(w, table_ptr, P):
        """``tinit::two_sided_precise_value``: (fma(sd_hi, z_hi, mean) + (sd_hi z_lo + sd_lo z_hi)) scale,
        clamped."""
        s, q, lower = two_sided_s(w ^ u32(P.flip), P)
        zl_hi, zl_lo = ndtri_table_pair(table_ptr, s, q)
        z_hi = tl.where(lower, zl_hi, -zl_hi)
        z_lo = tl.where(lower, zl_lo, -zl_lo)
        main = tl.fma(P.sd_hi, z_hi, P.mean)
        small = tl.fma(P.sd_hi, z_lo, P.sd_lo * z_hi)
        return clamp_to(rescale(main + small, P.scale), P)

    @triton.jit
    def tail_value(w, P):
        """``tinit::tail_value<float>``: the excursion e from the nearer bound (quadratic root, 2 Newton steps)."""
        wf = w ^ u32(P.flip)
        u = uniform_open(wf)  # large words: u near 1, e near 0
        uc = uniform_open(~wf)
        big_l = -log_pos(tl.fma(P.ratio, uc, u))
        e = tl.div_rn(big_l + big_l, P.b0 + tl.sqrt_rn(tl.fma(P.b0, P.b0, big_l + big_l)))
        dl2, dl3, dl4, dl5 = 2.0 * P.l2, 3.0 * P.l3, 4.0 * P.l4, 5.0 * P.l5
        for _ in tl.static_range(2):
            # tinit::tail_correction: l(e) and its slope l'(e) from the host's polynomial
            dl = tl.fma(tl.fma(tl.fma(tl.fma(dl5, e, dl4), e, dl3), e, dl2), e, P.l1)
            corr = e * tl.fma(tl.fma(tl.fma(tl.fma(P.l5, e, P.l4), e, P.l3), e, P.l2), e, P.l1)
            f = tl.fma(e, tl.fma(0.5, e, P.b0), corr - big_l)
            e = e - tl.div_rn(f, P.b0 + e + dl)
        e = tl.where(e > 0.0, e, 0.0)
        return clamp_to(rescale(tl.fma(-P.sd_hi, e, tl.fma(-P.sd_lo, e, P.edge)), P.scale), P)

    @triton.jit
    def trunc_normal_value(word, table_ptr, P, MODE: tl.constexpr):
        """``tinit::trunc_normal_value<float, MODE>(word, P)``: fp32 values in [P.lo, P.hi].

        P: a ``KernelParams`` (flip and split as int32 bits); table_ptr: the
        fp32 rows of ndtri_table.
        """
        P = fp32_params(P)
        if MODE == MODE_UNIFORM:
            x = uniform_value(word, P)
        elif MODE == MODE_TAIL:
            x = tail_value(word, P)
        elif MODE == MODE_TWO_SIDED_PRECISE:
            x = two_sided_precise_value(word, table_ptr, P)
        else:
            tl.static_assert(MODE == MODE_TWO_SIDED, "MODE must be a tinit.params.Mode value")
            x = two_sided_value(word, table_ptr, P)
        return x

    # ------------------------------------------------------------------ store

    @triton.jit
    def vector_base(out_ptr, offset_lo):
        """(vec_ptr, aligned) of a fill of ``out_ptr`` from stream index ``offset`` (its low word offset_lo).

        The four elements of a counter block, out_ptr - offset % 4 + 4 b + [0, 4), are one aligned
        4-element vector (16 bytes of fp32, 8 of bf16/fp16) when ``aligned``; vec_ptr is
        out_ptr - offset % 4 rounded down to that alignment, which it therefore has whatever the
        tensor's address (the hint is true), and equals out_ptr - offset % 4 when ``aligned``.
        Computed here, not by specialising the kernel on its argument's alignment: a view or shard
        at any address of its dtype's alignment takes the same compiled code.
        """
        align: tl.constexpr = out_ptr.dtype.element_ty.primitive_bitwidth // 2  # 4 elements, in bytes
        addr = (out_ptr - (offset_lo & 3)).to(tl.int64)
        vec_ptr = tl.multiple_of((addr & -align).to(out_ptr.dtype), align)
        return vec_ptr, (addr & (align - 1)) == 0

    @triton.jit
    def store_block(out_ptr, vec_ptr, base, aligned, start, numel, x0, x1, x2, x3, BLOCK: tl.constexpr):
        """Store the values x_k[b] of tensor elements start + 4 b + k that lie in [0, numel).

        x0..x3: the values of the columns of ``philox.stream_words_at``, in their layout (block b
        in one thread). ``base``: start + offset % 4, a multiple of 4 BLOCK; ``vec_ptr``,
        ``aligned``: of ``vector_base``. For a program inside the tensor the stores have no mask:
        one 4-element vector store a block when aligned (the columns joined in registers into
        the [BLOCK, 4] tile of the store's layout), else four element stores a block. At the
        tensor's ends each element is stored alone under its mask. No path converts a layout.
        """
        local = tl.arange(0, BLOCK) * 4
        if (start >= 0) & (start + 4 * BLOCK <= numel):
            if aligned:
                # [b, i, j] = value 2 i + j of block b, read row-major as [BLOCK, 4]: [b, k] = x_k[b].
                x = tl.reshape(tl.join(tl.join(x0, x2), tl.join(x1, x3)), [BLOCK, 4])
                store_values(vec_ptr + base, local[:, None] + tl.arange(0, 4)[None, :], x, None)
            else:
                store_values(out_ptr + start, local, x0, None)
                store_values(out_ptr + start, local + 1, x1, None)
                store_values(out_ptr + start, local + 2, x2, None)
                store_values(out_ptr + start, local + 3, x3, None)
        else:
            span = 4 * BLOCK
            store_values(out_ptr + start, local, x0, in_tensor(local, start, numel, span))
            store_values(out_ptr + start, local + 1, x1, in_tensor(local + 1, start, numel, span))
            store_values(out_ptr + start, local + 2, x2, in_tensor(local + 2, start, numel, span))
            store_values(out_ptr + start, local + 3, x3, in_tensor(local + 3, start, numel, span))

    @triton.jit
    def store_values(out_ptr, local, x, mask):
        """Store values ``x`` at ``out_ptr + local`` (where ``mask``): fp32 rounded once to the output dtype."""
        if out_ptr.dtype.element_ty == tl.bfloat16:
            if _INTERPRETED:
                # tinit::float_to_bf16_bits: round to nearest even, once, in integer operations:
                # the interpreter's own fp32 -> bf16 conversion rounds ties away from even.
                u = x.to(tl.uint32, bitcast=True)
                r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
                tl.store(out_ptr + local, r.to(tl.uint16).to(tl.bfloat16, bitcast=True), mask=mask)
            else:
                # cvt.rn.bf16.f32, the same round to nearest even in hardware (two values an
                # F2FP.BF16.F32.PACK_AB), as the CUDA kernels' __floats2bfloat162_rn: values are
                # never NaN, and subnormals are kept (no .ftz).
                tl.store(out_ptr + local, x.to(tl.bfloat16, fp_downcast_rounding="rtne"), mask=mask)
        else:
            tl.store(out_ptr + local, x.to(out_ptr.dtype.element_ty), mask=mask)

    # Whether this module's kernels run in the Triton interpreter (TRITON_INTERPRET=1 when they
    # were created), as a constexpr so store_values compiles only its own branch.
    _INTERPRETED = tl.constexpr(is_interpreted(store_values))
