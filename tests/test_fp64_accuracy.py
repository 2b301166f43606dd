"""The fp64 transform against mpmath: its logarithm, and one-sided and far-tail windows with mean != 0.

``tinit::log_pos(double)`` (fdlibm's log, IEEE basic operations only) is reached through the
test op ``torch.ops.tinit.log_f64``; the oracle is mpmath's log at 120 bits. The fills are
checked on the cpu backend against an mpmath oracle of the same exact uniform: x = F^-1(u) in
the mirrored frame (tests/test_edges.py's ``mp_quantile`` convention), found by one Newton
step on Phi at 32 digits from the value under test (quadratic convergence: a start within
1e-12 relative of the root ends within 1e-24; a start further off stays visibly off). Error in fp64 ulp
of max(|x|, std) (``value_scale``).
"""

from __future__ import annotations

import math
import random

import mpmath
import numpy as np
import pytest
import torch
from helpers import assert_within_ulp, fill_at
from test_edges import value_scale

from tinit.ops import philox_words

INF = math.inf
WORDS = 2**32
F64_MAX_ULP = 16.0


def _log_inputs(count: int) -> list[float]:
    """Random and edge inputs of log: (0, 1] uniformly, 2^U(-1074, 1024) (subnormal to the
    largest double), near 1 and sqrt(2) (the reduction's edges), powers of two and their
    neighbours, the subnormal and normal limits."""
    rng = random.Random(20261202)
    edges = [5e-324, 2.0**-1074 * 3, 2.0**-1022, math.nextafter(2.0**-1022, 0), 1e-310, 1.0, 0.5, 2.0]
    edges += [math.nextafter(1.0, 0.0), math.nextafter(1.0, 2.0), math.sqrt(0.5), math.sqrt(2.0)]
    edges += [1.7976931348623157e308]
    mantissas = (1.0, math.nextafter(1.0, 2.0), math.nextafter(2.0, 0.0))
    edges += [m * 2.0**k for k in range(-1074, 1024, 7) for m in mantissas]
    quarter = (count - len(edges)) // 4
    xs = [1.0 - rng.random() for _ in range(quarter)]
    xs += [2.0 ** rng.uniform(-1074.0, 1023.99) for _ in range(quarter)]
    xs += [1.0 + rng.uniform(-(2.0**-18), 2.0**-18) for _ in range(quarter)]
    xs += [math.sqrt(2.0) * 2.0 ** rng.randint(-60, 60) * (1 + rng.uniform(-1e-3, 1e-3)) for _ in range(quarter)]
    xs = [x for x in xs if x > 0]
    return edges + xs + [1.0 - rng.random() for _ in range(count - len(edges) - len(xs))]


def test_log_f64_within_1_ulp_of_mpmath():
    """tinit::log_pos(double) within 1 ulp of the exact log over 10^6 inputs (subnormal ones too); log(1) = 0."""
    xs = _log_inputs(10**6)
    got = torch.ops.tinit.log_f64(xs)
    worst, where = 0.0, None
    with mpmath.workprec(120):
        for x, g in zip(xs, got, strict=True):
            exact = mpmath.log(mpmath.mpf(x))
            unit = math.ulp(float(exact)) if exact != 0 else 2.0**-1074
            err = float(abs(mpmath.mpf(g) - exact)) / unit
            if err > worst:
                worst, where = err, (x, g)
    assert worst <= 1.0, f"log_f64 off by {worst:.3f} ulp at x = {where[0]!r} (gave {where[1]!r})"
    assert torch.ops.tinit.log_f64([1.0, 0.0]) == [0.0, -INF]


def _newton_oracle(words, values, mean: float, std: float, a: float, b: float) -> np.ndarray:
    """x = F^-1(u) of each word, by one Newton step on Phi (32 digits) from ``values``."""
    out = []
    with mpmath.workdps(32):
        m, sd = mpmath.mpf(mean), mpmath.mpf(std)
        alpha, beta = (mpmath.mpf(a) - m) / sd, (mpmath.mpf(b) - m) / sd
        sign = 1
        if alpha > -beta:
            alpha, beta, sign = -beta, -alpha, -1
        p_lo = mpmath.ncdf(alpha)
        p_hi = mpmath.ncdf(beta)
        for w, v in zip(np.asarray(words, dtype=np.int64).tolist(), values.tolist(), strict=True):
            frame_word = w if sign > 0 else WORDS - 1 - w
            s = p_lo + (mpmath.mpf(frame_word) + mpmath.mpf(0.5)) / WORDS * (p_hi - p_lo)
            z = sign * (mpmath.mpf(v) - m) / sd
            z -= (mpmath.ncdf(z) - s) / mpmath.npdf(z)
            out.append(float(m + sd * sign * z))
    return np.array(out, dtype=np.float64)


# (mean, std, a, b): one-sided windows far from the mean on either side, far tails (the tail mode,
# beyond 8 std), windows narrow against std next to 0 and windows the float path calls precise
# (mean + std z cancels).
GRID = {
    "issue_N(5,0.7)_(-inf,0]": (5.0, 0.7, -INF, 0.0),
    "N(3,0.5)_(-inf,0]": (3.0, 0.5, -INF, 0.0),
    "N(1,1/7)_(-inf,0]": (1.0, 1.0 / 7.0, -INF, 0.0),
    "N(-4,0.6)_[0,inf)": (-4.0, 0.6, 0.0, INF),
    "N(-2,0.1)_[0,0.5]": (-2.0, 0.1, 0.0, 0.5),
    "N(5,0.7)_(-inf,0.5]": (5.0, 0.7, -INF, 0.5),
    "N(1e3,99)_(-inf,0]": (1000.0, 99.0, -INF, 0.0),
    "N(0.07,0.0099)_(-inf,0]": (0.07, 0.0099, -INF, 0.0),
    "N(2.9,0.99)_(-inf,0]": (2.9, 0.99, -INF, 0.0),
    "N(3.9,0.99)_(-inf,0]": (3.9, 0.99, -INF, 0.0),
    "N(1,0.02)_(-inf,0]": (1.0, 0.02, -INF, 0.0),
    "N(1,1/37)_(-inf,0]": (1.0, 1.0 / 37.0, -INF, 0.0),
    "N(-1,0.1)_[0,inf)": (-1.0, 0.1, 0.0, INF),
    "N(0,1)_(-inf,-7.9]": (0.0, 1.0, -INF, -7.9),
    "N(0,1)_[8,100]": (0.0, 1.0, 8.0, 100.0),
    "N(0,1)_[20,20.5]": (0.0, 1.0, 20.0, 20.5),
    "N(2,3)_[40,45]": (2.0, 3.0, 40.0, 45.0),
    "N(5,0.7)_[-0.01,0]": (5.0, 0.7, -0.01, 0.0),
    "N(5,0.7)_[-1,-0.999]": (5.0, 0.7, -1.0, -0.999),
    "N(0,1)_[-7.5,-7.4]": (0.0, 1.0, -7.5, -7.4),
    "N(0,1)_[3,3.5]": (0.0, 1.0, 3.0, 3.5),
    "N(-7,1)_[0,1]": (-7.0, 1.0, 0.0, 1.0),
    "N(0.3,1e-3)_(-inf,0.296]": (0.3, 1e-3, -INF, 0.296),
    "N(6,1)_(-inf,0]": (6.0, 1.0, -INF, 0.0),
}
NUMEL = 3000


@pytest.mark.parametrize("window", GRID.values(), ids=GRID.keys())
def test_f64_windows_within_16_ulp(window):
    """Every value of the window (3000 stream words) within 16 fp64 ulp of the mpmath oracle."""
    seed, stream = 11, 5
    values = fill_at(NUMEL, torch.float64, *window, seed=seed, stream=stream, backend="cpu").numpy()
    words = philox_words(NUMEL, seed, stream).numpy()
    assert (values >= window[2]).all() and (values <= window[3]).all()
    assert_within_ulp(
        values,
        _newton_oracle(words, values, *window),
        scale=value_scale(window, torch.float64),
        dtype=torch.float64,
        max_ulp=F64_MAX_ULP,
        what=f"fp64 {window}",
        words=words,
    )


def test_f64_issue_element():
    """The element that was 24.6 ulp off (seed 11, stream 5, element 89632 of N(5, 0.7) on (-inf, 0])."""
    window = (5.0, 0.7, -INF, 0.0)
    value = fill_at(1, torch.float64, *window, seed=11, stream=5, offset=89632, backend="cpu").numpy()
    word = philox_words(1, 11, 5, 89632).numpy()
    assert_within_ulp(
        value, _newton_oracle(word, value, *window), scale=0.7, dtype=torch.float64, max_ulp=8.0, what="issue element"
    )
