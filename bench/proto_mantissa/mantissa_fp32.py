"""The fp32 transform, today's and the prototype's, emulated bit for bit in numpy.

Every step is one IEEE fp32 operation as transform.h spells it (``fma_rn``, ``mul_rn``, the
row's Horner steps); an fma is formed exactly in fp64 (the product of two fp32 values is exact
there), its sum rounded to odd and then to fp32, which is the correctly rounded fp32 fma (a
rounding to odd with two or more extra bits, then to nearest, rounds once). ``run.py`` checks
today's emulation against the native extension's values, bit for bit, before it measures
anything with the prototype's.

- ``ndtri_today`` / ``ndtri_today_pair``: ``tinit::ndtri_table`` / ``tinit::ndtri_table_pair``
  (rows 0..5 central: z = q P0(q^2), the multiplier m = q).
- ``ndtri_mantissa`` / ``ndtri_mantissa_pair``: the prototype, z = P(r) on every row, r from the
  mantissa bits of s; no q, no select, no multiplier.
- ``two_sided``: ``tinit::two_sided_value`` (clamped) and ``tinit::two_sided_precise_value`` on
  stream words, with either inverse.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

F32, F64 = np.float32, np.float64
ONE = F32(1.0)


def fma32(a, b, c) -> np.ndarray:
    """Correctly rounded fp32 a * b + c of fp32 arrays (finite, the product not subnormal)."""
    p = np.asarray(a, F32).astype(F64) * np.asarray(b, F32).astype(F64)  # exact: 24 + 24 bits
    c = np.asarray(c, F32).astype(F64)
    s = p + c
    back = s - p
    err = (p - (s - back)) + (c - back)  # TwoSum: s + err == p + c exactly
    even = (s.view(np.int64) & 1) == 0
    s = np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)  # to odd
    return s.astype(F32)


def mul32(a, b) -> np.ndarray:
    return (np.asarray(a, F32).astype(F64) * np.asarray(b, F32).astype(F64)).astype(F32)


def add32(a, b) -> np.ndarray:
    return fma32(a, ONE, b)


def bits(x) -> np.ndarray:
    return np.asarray(x, F32).view(np.uint32)


def by_top(rows: np.ndarray) -> np.ndarray:
    """A table in ndtri_segment order, (256, 8), as ``tinit::NdtriByTop``: row 255 - top at top."""
    return np.ascontiguousarray(np.asarray(rows, F32)[::-1])


def _row(table: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Each s's coefficients (ndtri_row): an (8, n) array."""
    return table[bits(s) >> 22].T


def _mantissa_r(s: np.ndarray) -> np.ndarray:
    """``ndtri_variable``'s r: (bits & 0x003fffff | 0x3f800000) as a float, minus 1.25 (exact)."""
    return ((bits(s) & np.uint32(0x003FFFFF)) | np.uint32(0x3F800000)).view(F32) - F32(1.25)


def _poly(c: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ndtri_poly``: (acc, p_hi), acc = horner(t, c1, ..., c6), p_hi = fma(acc, t, c0)."""
    acc = c[6]
    for k in (5, 4, 3, 2, 1):
        acc = fma32(acc, t, c[k])
    return acc, fma32(acc, t, c[0])


def _pair(c: np.ndarray, acc: np.ndarray, t: np.ndarray, p_hi: np.ndarray) -> np.ndarray:
    """``ndtri_poly``'s p_lo: fma(acc, t, c0 - p_hi) + c0_lo."""
    return add32(fma32(acc, t, add32(c[0], -p_hi)), c[7])


def ndtri_today(table: np.ndarray, s, q) -> np.ndarray:
    s, q = np.asarray(s, F32), np.asarray(q, F32)
    central = s >= F32(0.25)
    t = np.where(central, mul32(q, q), _mantissa_r(s))
    _, p = _poly(_row(table, s), t)
    return np.where(central, mul32(q, p), p)


def ndtri_today_pair(table: np.ndarray, s, q) -> tuple[np.ndarray, np.ndarray]:
    s, q = np.asarray(s, F32), np.asarray(q, F32)
    central = s >= F32(0.25)
    c = _row(table, s)
    t = np.where(central, mul32(q, q), _mantissa_r(s))
    acc, p_hi = _poly(c, t)
    p_lo = _pair(c, acc, t, p_hi)
    m = np.where(central, q, ONE)
    z_hi = mul32(m, p_hi)
    return z_hi, add32(fma32(m, p_hi, -z_hi), mul32(m, p_lo))


def ndtri_mantissa(table: np.ndarray, s, q=None) -> np.ndarray:
    s = np.asarray(s, F32)
    _, p = _poly(_row(table, s), _mantissa_r(s))
    return p


def ndtri_mantissa_pair(table: np.ndarray, s, q=None) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(s, F32)
    c, r = _row(table, s), _mantissa_r(s)
    acc, p_hi = _poly(c, r)
    return p_hi, _pair(c, acc, r, p_hi)


class Record(NamedTuple):
    """The fields of ``TruncNormalParams<float>`` the two-sided modes read, from the packed list."""

    flip: np.uint32
    split: np.uint32
    a_cdf: F32
    b_sf: F32
    a_half: F32
    b_half: F32
    step: F32
    mean: F32
    sd_hi: F32
    sd_lo: F32
    scale: F32
    lo: F32
    hi: F32
    precise: bool

    @classmethod
    def of(cls, packed) -> Record:
        p = [float(v) for v in packed]
        # kPackedMode, kPackedSign, kPackedSplit, then the fields in TruncNormalParams order
        return cls(
            np.uint32(0xFFFFFFFF if p[1] < 0 else 0),
            np.uint32(int(p[2])),
            *(F32(v) for v in p[3:14]),
            precise=p[0] == 2.0,
        )


def two_sided(words, record: Record, single, pair) -> np.ndarray:
    """``two_sided_value`` (or ``two_sided_precise_value`` for a precise record) of uint32 words.

    Args:
        words: stream words (any integer array of values in [0, 2^32)).
        record: ``Record.of`` a packed two-sided record.
        single, pair: ndtri functions of (s, q) with their table bound (``functools.partial``):
            today's ``ndtri_today`` and ``ndtri_today_pair``, or the prototype's.

    Returns:
        fp32 values.
    """
    wf = np.asarray(words, np.uint64).astype(np.uint32) ^ record.flip
    lower = wf <= record.split
    fw = np.where(lower, wf, ~wf).astype(F32)  # uint32 -> fp64 exactly -> fp32 once
    q = fma32(fw, record.step, np.where(lower, record.a_half, record.b_half))
    s = fma32(fw, record.step, np.where(lower, record.a_cdf, record.b_sf))
    if record.precise:
        zl_hi, zl_lo = pair(s, q)
        z_hi, z_lo = np.where(lower, zl_hi, -zl_hi), np.where(lower, zl_lo, -zl_lo)
        main = fma32(record.sd_hi, z_hi, record.mean)
        small = fma32(record.sd_hi, z_lo, mul32(record.sd_lo, z_hi))
        x = add32(mul32(add32(main, small), record.scale), F32(0.0))
    else:
        zl = single(s, q)
        z = np.where(lower, zl, -zl)
        x = fma32(record.sd_hi, z, fma32(record.sd_lo, z, record.mean))
    x = np.where(x < record.lo, record.lo, x)
    return np.where(x > record.hi, record.hi, x).astype(F32)
