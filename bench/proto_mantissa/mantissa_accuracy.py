"""Accuracy of the prototype's table against an mpmath oracle, beside today's table.

The oracle: Phi^-1(s) of each fp32 s at 50 significant digits (``DPS``), Newton's method on
Phi from scipy's fp64 ndtri until a step is below 10^-45 max(|z|, 1). Errors are in units of
2^-24 max(|z|, 1) (the unit of ``tinit::ndtri_table``'s bound) unless said otherwise; the fp32
values are ``mantissa_fp32``'s emulation, bit for bit the kernels' arithmetic.

- ``row_study``: each row's worst error, fp32 single (``ndtri_table``) and pair
  (``ndtri_table_pair``: z_hi + z_lo), today's and the prototype's inverse on the same s.
  Today's central rows are given q = s - 1/2 exactly (it is, in fp32, for s in [1/4, 1]).
- ``centre_study``: s -> 1/2, where z -> 0: z at s = 1/2, wrong signs, order, relative error,
  the antisymmetry about 1/2.
- ``row3_fits``: row 3 fitted on the whole half binade, its first half (the prototype's) and a
  narrow range.
- ``end_to_end`` and ``mirror_check``: the two-sided values of stream words, against the fp64
  oracle; word ~w against word w in symmetric windows.
"""

from __future__ import annotations

import functools

import mantissa_fit
import mantissa_fp32 as fp
import mpmath
import numpy as np
from scipy.special import ndtri

DPS = 50
UNIT = 2.0**-24
# The prototype's bounds (units of 2^-24 max(|z|, 1)), measured by run.py over every row and
# checked by tests/test_proto_mantissa.py: fp32 single (today's stated ~1.5) and the pair.
SINGLE_BOUND = 1.5
PAIR_BOUND = 0.5


def phi_inv(s) -> list:
    """Phi^-1 of each value of s (fp64 holding fp32 values, 0 < s < 1) as mpmath numbers."""
    out = []
    with mpmath.workdps(DPS):
        tol = mpmath.mpf(10) ** -45
        for v in np.asarray(s, np.float64):
            target, z = mpmath.mpf(float(v)), mpmath.mpf(float(ndtri(v)))
            for _ in range(8):
                step = (mpmath.ncdf(z) - target) / mpmath.npdf(z)
                z -= step
                if abs(step) < tol * max(abs(z), 1):
                    break
            out.append(+z)
    return out


def errors(z, ref) -> np.ndarray:
    """|z - ref| / max(|ref|, 1) in units of 2^-24; z fp32 (or fp64 sums of pairs, exact)."""
    with mpmath.workdps(DPS):
        return np.array(
            [float(abs(mpmath.mpf(float(a)) - b) / max(abs(b), 1)) / UNIT for a, b in zip(z, ref, strict=True)]
        )


def row_samples(row: int, n: int) -> np.ndarray:
    """n fp32 values of s on a row, both ends included, evenly spread (fp64 array)."""
    lo, hi = mantissa_fit.row_range(row)
    last = float(np.nextafter(np.float32(hi), np.float32(0)))
    return np.unique(np.linspace(lo, last, n).astype(np.float32)).astype(np.float64)


@functools.cache
def inverses() -> dict:
    """{"today": (single, pair), "mantissa": (single, pair)}: functions of (s, q), tables bound."""
    today, proto = fp.by_top(mantissa_fit.today_rows()), fp.by_top(mantissa_fit.mantissa_rows())
    return {
        "today": (functools.partial(fp.ndtri_today, today), functools.partial(fp.ndtri_today_pair, today)),
        "mantissa": (functools.partial(fp.ndtri_mantissa, proto), functools.partial(fp.ndtri_mantissa_pair, proto)),
    }


def worst_of(s: np.ndarray, ref: list) -> dict:
    """Each inverse's worst single and pair error over s (fp32 values), with where."""
    s32, q = s.astype(np.float32), (s - 0.5).astype(np.float32)  # exact for s in [1/4, 1]
    out = {}
    for name, (single, pair) in inverses().items():
        e1 = errors(single(s32, q), ref)
        hi, lo = pair(s32, q)
        e2 = errors(hi.astype(np.float64) + lo.astype(np.float64), ref)
        out[name] = {
            "single": float(e1.max()),
            "single_at": float(s[e1.argmax()]),
            "pair": float(e2.max()),
            "pair_at": float(s[e2.argmax()]),
        }
    return out


def row_study(rows, n: int) -> dict:
    """{row: worst_of(n samples of the row)} for each row of ``rows``."""
    found = {}
    for row in rows:
        s = row_samples(row, n)
        if row == 3:  # fitted on [1/2, 5/8) (mantissa_fit.NEW_ROWS); valid records reach s <= 1/2 + 2^-25
            s = np.unique(np.concatenate([s[s < 0.625], 0.5 + np.arange(64) * 2.0**-24]))
        found[row] = worst_of(s, phi_inv(s))
    return found


def centre_study() -> dict:
    """s -> 1/2: every fp32 s in [1/2 - 2^-14, 1/2 + 2^-20], and s = 1/2 - 2^-k (k = 2..25).

    Returns:
        Per inverse: z at s = 1/2, the count of s < 1/2 with z >= 0 and of s > 1/2 with z <= 0,
        the count of consecutive s whose z decreases, the worst single error near the centre
        (units of 2^-24) and, for each k, |z - ref| / |ref| (relative, units of 2^-24).
    """
    below = 0.5 - np.arange(1, 2**11 + 1)[::-1] * 2.0**-25
    s = np.concatenate([below, 0.5 + np.arange(0, 17) * 2.0**-24])
    ref = phi_inv(s)
    steps = 0.5 - 2.0 ** -np.arange(2, 26)
    ref_k = phi_inv(steps)
    d = np.arange(1, 17) * 2.0**-24
    out = {}
    for name, (single, _) in inverses().items():
        up = single((0.5 + d).astype(np.float32), d.astype(np.float32)).astype(np.float64)
        down = single((0.5 - d).astype(np.float32), (-d).astype(np.float32)).astype(np.float64)
        z = single(s.astype(np.float32), (s - 0.5).astype(np.float32)).astype(np.float64)
        zk = single(steps.astype(np.float32), (steps - 0.5).astype(np.float32)).astype(np.float64)
        with mpmath.workdps(DPS):
            rel = [float(abs(mpmath.mpf(a) - b) / abs(b)) / UNIT for a, b in zip(zk, ref_k, strict=True)]
        out[name] = {
            "z_at_half": float(z[s == 0.5][0]),
            "wrong_sign": int(np.sum((s < 0.5) & (z >= 0)) + np.sum((s > 0.5) & (z <= 0))),
            "decreasing": int(np.sum(np.diff(z) < 0)),
            "worst": float(errors(z, ref).max()),
            "relative_by_k": dict(zip(range(2, 26), rel, strict=True)),
            "antisymmetry": float(np.max(np.abs(up + down)) / UNIT),  # |z(1/2 + d) + z(1/2 - d)|, d = k 2^-24
        }
    return out


def row3_fits() -> dict:
    """Row 3 (s in [1/2, 3/4)) fitted on r in [-1/4, r_hi) for r_hi = 1/4 (the whole half binade),
    0 (its first half: the prototype's) and -1/4 + 2^-12 (s < 1/2 + 2^-13): the worst fp32 error on
    [1/2, 3/4), on [1/2, 5/8) and on the s a rounding reaches (1/2 + k 2^-24, k < 64), single and
    pair."""
    reach = 0.5 + np.arange(64) * 2.0**-24
    s = np.unique(np.concatenate([row_samples(3, 1024), reach]))
    ref = phi_inv(s)
    found = {}
    for r_hi in (0.25, 0.0, -0.25 + 2.0**-12):
        rows = mantissa_fit.mantissa_rows().copy()
        rows[3] = mantissa_fit.fit_row(126, 1.25, r_hi)
        table = fp.by_top(rows)
        single = errors(fp.ndtri_mantissa(table, s.astype(np.float32)), ref)
        hi, lo = fp.ndtri_mantissa_pair(table, s.astype(np.float32))
        pair = errors(hi.astype(np.float64) + lo.astype(np.float64), ref)
        near = s < reach[-1] * (1 + 1e-12)
        found[r_hi] = {
            "whole_row": float(single.max()),
            "first_half": float(single[s < 0.625].max()),
            "reach_single": float(single[near].max()),
            "reach_pair": float(pair[near].max()),
        }
    return found


# (mean, std, a, b) of the end-to-end study: tests/test_accuracy.py's two-sided windows and a
# precise one (N(1, 1/7) on (-inf, 0], docs/stream.md's example).
WINDOWS = {
    "N(0,1) on [-2, 2]": (0.0, 1.0, -2.0, 2.0),
    "N(0,1) on [-1, 3]": (0.0, 1.0, -1.0, 3.0),
    "N(0,1), untruncated": (0.0, 1.0, -np.inf, np.inf),
    "N(0,1) on [0, inf)": (0.0, 1.0, 0.0, np.inf),
    "N(3,2) on [-1, 4]": (3.0, 2.0, -1.0, 4.0),
    "N(0,0.02) on [-0.04, 0.04]": (0.0, 0.02, -0.04, 0.04),
    "precise: N(1,1/7) on (-inf, 0]": (1.0, 1 / 7, -np.inf, 0.0),
    "precise: N(0,1e-35) on [-2e-35, 2e-35]": (0.0, 1e-35, -2e-35, 2e-35),
}


def window_words(packed, n: int, seed: int = 20240601) -> np.ndarray:
    """n consecutive stream words, the words next to the split (u near the window's centre,
    where s -> 1/2 and z -> 0: 2^12 on each side) and the two extremes, as int64."""
    from tinit.ops import philox_words

    split = int(packed[2])
    centre = np.arange(max(split - 4095, 0), min(split + 4097, 2**32), dtype=np.int64)
    return np.concatenate([philox_words(n, seed, 3).numpy(), centre, [0, 2**32 - 1]])


def mirror_check(n: int = 2**18) -> dict:
    """Words w and ~w of the symmetric windows of WINDOWS (mean 0, a = -b): how many values of
    n stream words and the 8192 around the split have x(~w) != -x(w), per inverse."""
    import torch

    from tinit.params import transform_constants

    found = {}
    for name, window in WINDOWS.items():
        if window[0] != 0.0 or window[2] != -window[3]:
            continue
        packed = transform_constants(*window, torch.float32)
        record, words = fp.Record.of(packed), window_words(packed, n)
        found[name] = {
            inv: int(np.sum(fp.two_sided((2**32 - 1) - words, record, *f) != -fp.two_sided(words, record, *f)))
            for inv, f in inverses().items()
        }
    return found


def end_to_end(n: int = 2**20) -> dict:
    """Both transforms against the fp64 oracle of the same exact uniform, per window of WINDOWS.

    The oracle is tests/helpers' ``oracle`` (scipy's truncnorm ppf in tinit's sampling frame,
    ~4 fp64 ulp, checked against mpmath by tests/test_accuracy.py). Figures, per inverse: the worst
    error in fp32 ulp of max(|x|, std) (the stream's bound: 4) and, by |x - mean| / std in
    [2^-k, 2^-k+1) (k = 1..24; the last band also holds everything below), the worst relative error
    |x - oracle| / |oracle - mean| in units of 2^-24; and the share of the n consecutive words'
    fp32 and bf16 values that differ from today's.
    """
    import torch
    from helpers import oracle, ulp

    from tinit.params import transform_constants

    found = {}
    for name, window in WINDOWS.items():
        packed = transform_constants(*window, torch.float32)
        record = fp.Record.of(packed)
        words = window_words(packed, n)
        ref = oracle(words, *window)
        mean, std = window[0], window[1]
        dev = np.abs(ref - mean) / std
        band = np.clip(np.ceil(-np.log2(np.where(dev > 0, dev, 2.0**-60))), 1, 24).astype(int)
        row = {"precise": record.precise, "words": int(words.size)}
        values = {}
        for inv, (single, pair) in inverses().items():
            x = fp.two_sided(words, record, single, pair)
            values[inv] = x[:n]
            err = np.abs(x.astype(np.float64) - ref)
            rel = np.where(dev > 0, err / np.maximum(np.abs(ref - mean), 1e-300), 0.0) / UNIT
            row[inv] = {
                "ulp": float(np.max(err / ulp(np.maximum(np.abs(ref), std), torch.float32))),
                "relative_by_band": {int(k): float(rel[band == k].max()) for k in np.unique(band)},
            }
        bf16 = {k: torch.from_numpy(v).to(torch.bfloat16).view(torch.int16).numpy() for k, v in values.items()}
        row["changed_fp32"] = float(np.mean(values["today"].view(np.uint32) != values["mantissa"].view(np.uint32)))
        row["changed_bf16"] = float(np.mean(bf16["today"] != bf16["mantissa"]))
        found[name] = row
    return found
