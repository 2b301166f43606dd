"""The filled values have the truncated-normal distribution.

KS tests against scipy.stats.truncnorm for fp32/fp64 (fixed seeds, p > 1e-4,
2**20 samples); for bf16/fp16 the mean and std against the exact moments,
both of the continuous truncated normal and of its rounding to the dtype;
the count of values equal to each bound against the probability of rounding
there (so nothing piles up on a bound); bounds, finiteness and reach.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch
from helpers import (
    DTYPE_PARAMS,
    FLOAT_DTYPE_PARAMS,
    LOW_DTYPE_PARAMS,
    exact_moments,
    fill_at,
    place_words,
)

import tinit
from tinit.params import transform_constants

INF = math.inf
NUMEL = 2**20
KS_MIN_P = 1e-4
# (mean, std, a, b), absolute bounds.
GRID = {
    "sym_2sigma": (0.0, 1.0, -2.0, 2.0),
    "sym_3sigma": (0.0, 1.0, -3.0, 3.0),
    "std0.002_default_bounds": (0.0, 0.002, -2.0, 2.0),
    "gpt2_std0.02_2sigma": (0.0, 0.02, -0.04, 0.04),
    "narrow_0.5_0.51": (0.0, 1.0, 0.5, 0.51),
    "narrow_central": (0.0, 1.0, -0.05, 0.05),
    "one_sided_a0": (0.0, 1.0, 0.0, INF),
    "one_sided_b_mean": (1.0, 2.0, -INF, 1.0),
    "far_tail_8_100": (0.0, 1.0, 8.0, 100.0),
    "tail_20_25": (0.0, 1.0, 20.0, 25.0),
    "tail_neginf_-15": (0.0, 1.0, -INF, -15.0),
    "shifted_mean3_std2": (3.0, 2.0, -1.0, 4.0),
}
GRID_PARAMS = [pytest.param(name, window, id=name) for name, window in GRID.items()]
# Extra windows for the bound and finiteness checks only.
EDGE_WINDOWS = {
    "full_line": (0.0, 1.0, -INF, INF),
    "large_mean_full_line": (100.0, 1.0, -INF, INF),
    "tiny_std": (0.0, 1e-6, -2e-6, 2e-6),
    "bound_at_mean": (0.5, 0.25, 0.5, 0.75),
    "tail_38_39": (0.0, 1.0, 38.0, 39.0),
}
ALL_WINDOW_PARAMS = GRID_PARAMS + [pytest.param(n, w, id=n) for n, w in EDGE_WINDOWS.items()]


def _seed(name: str) -> int:
    """A fixed per-window seed (stable across runs, unlike hash())."""
    return 1000 + sorted(GRID.keys() | EDGE_WINDOWS.keys()).index(name)


def _fillable(window, dtype) -> None:
    try:
        transform_constants(*window, dtype)
    except ValueError as exc:
        pytest.skip(f"window not representable in {dtype}: {exc}")


def _dist(window):
    mean, std, a, b = window
    return scipy.stats.truncnorm((a - mean) / std, (b - mean) / std, loc=mean, scale=std)


@pytest.mark.parametrize("dtype", FLOAT_DTYPE_PARAMS)
@pytest.mark.parametrize("name,window", GRID_PARAMS)
def test_ks_against_truncnorm(name, window, dtype):
    values = fill_at(NUMEL, dtype, *window, seed=_seed(name)).double().numpy()
    result = scipy.stats.kstest(values, _dist(window).cdf)
    assert result.pvalue > KS_MIN_P, (
        f"{name} {dtype}: KS statistic {result.statistic:.3g} at x={result.statistic_location!r}, "
        f"p = {result.pvalue:.3g} <= {KS_MIN_P} over {NUMEL} samples"
    )


def test_far_tail_exact_moments():
    """The issue's figures for a = 8, b = 100 (std 1): mean 8.1214, std 0.1197."""
    mean, std = exact_moments(0.0, 1.0, 8.0, 100.0)
    assert abs(mean - 8.1214) < 5e-5 and abs(std - 0.1197) < 5e-5, f"scipy gives mean {mean}, std {std}"


def _moment_tolerances(values_std: float, fourth_central: float, n: int) -> tuple[float, float]:
    """Five standard errors of the sample mean and of the sample std."""
    se_mean = values_std / math.sqrt(n)
    se_var = math.sqrt(max(fourth_central - values_std**4, 0.0) / n)
    return 5.0 * se_mean, 5.0 * se_var / (2.0 * values_std)


def _check_moments(values: np.ndarray, mean: float, std: float, fourth: float, slack: float, what: str):
    tol_mean, tol_std = _moment_tolerances(std, fourth, values.size)
    got_mean, got_std = float(values.mean()), float(values.std())
    assert abs(got_mean - mean) <= tol_mean + slack, (
        f"{what}: mean {got_mean!r}, expected {mean!r} +- {tol_mean + slack:.3g} (off by {abs(got_mean - mean):.3g})"
    )
    assert abs(got_std - std) <= tol_std + slack, (
        f"{what}: std {got_std!r}, expected {std!r} +- {tol_std + slack:.3g} (off by {abs(got_std - std):.3g})"
    )


@pytest.mark.parametrize("dtype", FLOAT_DTYPE_PARAMS)
def test_far_tail_sample_moments(dtype):
    window = (0.0, 1.0, 8.0, 100.0)
    dist = _dist(window)
    values = fill_at(NUMEL, dtype, *window, seed=_seed("far_tail_8_100") + 500).double().numpy()
    _check_moments(values, float(dist.mean()), float(dist.std()), _central_fourth(dist), 0.0, f"far tail {dtype}")


def _central_fourth(dist) -> float:
    m = float(dist.mean())
    raw = [float(dist.moment(k)) for k in range(1, 5)]
    return raw[3] - 4 * m * raw[2] + 6 * m**2 * raw[1] - 3 * m**4


def _rounded_distribution(window, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every ``dtype`` value in [lo, hi] and the probability of the values rounding to it.

    A value x of the continuous truncated normal becomes its nearest ``dtype``
    value, clamped to [lo, hi] (the representable part of [a, b]).
    """
    a, b = window[2:]
    p = transform_constants(*window, dtype)
    lo, hi = p.lo, p.hi
    bits = {torch.bfloat16: torch.int16, torch.float16: torch.int16}[dtype]
    every = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(bits).view(dtype).double().numpy()
    grid = np.unique(every[np.isfinite(every) & (every >= lo) & (every <= hi)])
    edges = np.concatenate([[a], (grid[:-1] + grid[1:]) / 2, [b]])
    cdf = _dist(window).cdf(edges)
    return grid, np.diff(cdf)


@pytest.mark.parametrize("dtype", LOW_DTYPE_PARAMS)
@pytest.mark.parametrize("name,window", GRID_PARAMS)
def test_low_precision_moments(name, window, dtype):
    _fillable(window, dtype)
    values = fill_at(NUMEL, dtype, *window, seed=_seed(name)).double().numpy()
    grid, prob = _rounded_distribution(window, dtype)
    mean = float(np.sum(prob * grid))
    var = float(np.sum(prob * (grid - mean) ** 2))
    fourth = float(np.sum(prob * (grid - mean) ** 4))
    _check_moments(
        values, mean, math.sqrt(var), fourth, 0.0, f"{name} {dtype} vs the exact moments of the rounded distribution"
    )
    # Against the continuous truncated normal: rounding moves each value by at
    # most half an ulp of the largest magnitude in the window.
    exact_mean, exact_std = exact_moments(*window)
    half_ulp = 0.5 * torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(max(abs(grid[0]), abs(grid[-1]))))
    _check_moments(
        values, exact_mean, exact_std, fourth, half_ulp, f"{name} {dtype} vs the continuous truncated moments"
    )


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("name,window", ALL_WINDOW_PARAMS)
def test_no_pile_up_on_bounds(name, window, dtype):
    """Values equal to lo/hi (the bounds rounded inwards) as often as rounding puts them there.

    The count at each bound matches the probability of the bound's rounding
    cell, so nothing piles up there (as clamping would), and a bound whose
    cell has (practically) zero probability never appears.
    """
    _fillable(window, dtype)
    a, b = window[2:]
    p = transform_constants(*window, dtype)
    lo, hi = p.lo, p.hi
    values = fill_at(NUMEL, dtype, *window, seed=_seed(name) + 7).double().numpy()
    cdf = _dist(window).cdf
    # Rounding cells: [a, midpoint(lo, next value up)] and [midpoint(next value down, hi), b].
    cells = {
        "lo": (lo, cdf(min((lo + _neighbour(lo, dtype, +1)) / 2, b))),
        "hi": (hi, 1.0 - cdf(max((_neighbour(hi, dtype, -1) + hi) / 2, a))),
    }
    for side, (bound, mass) in cells.items():
        expected = NUMEL * float(mass)
        count = int(np.sum(values == bound))
        if expected < 1e-3:
            assert count == 0, f"{name} {dtype}: {count} values at the zero-probability bound {side}={bound!r}"
        else:
            slack = 6.0 * math.sqrt(expected) + 6.0
            assert abs(count - expected) <= slack, (
                f"{name} {dtype}: {count} values at {side}={bound!r}, expected {expected:.1f} +- "
                f"{slack:.1f} (probability {float(mass):.3g} of rounding there)"
            )


def _neighbour(value: float, dtype: torch.dtype, direction: int) -> float:
    """The next ``dtype`` value above (direction +1) or below (-1) ``value``."""
    t = torch.tensor([value], dtype=dtype)
    return float(torch.nextafter(t, torch.full_like(t, direction * INF))[0])


EXTREME_WORDS = [0, 1, 2, 3, 2**31 - 1, 2**31, 2**32 - 4, 2**32 - 3, 2**32 - 2, 2**32 - 1]


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("name,window", ALL_WINDOW_PARAMS)
def test_values_inside_bounds_and_finite(backend, name, window, dtype):
    """Every value lies in [a, b] and is finite, for the extreme words too."""
    backend.skip_unless(dtype)
    _fillable(window, dtype)
    a, b = window[2:]
    parts = [fill_at(2**12 + 1 if backend.small else 2**16 + 1, dtype, *window, seed=_seed(name) + 3, backend=backend)]
    for seed, stream, offset, _ in place_words(EXTREME_WORDS):
        parts.append(fill_at(4, dtype, *window, seed=seed, stream=stream, offset=offset, backend=backend))
    values = torch.cat(parts)
    assert values.dtype == dtype
    bad = ~torch.isfinite(values)
    assert not bad.any(), f"{name} {dtype} {backend}: {int(bad.sum())} non-finite values, e.g. {values[bad][:4]}"
    as_f64 = values.double()
    outside = (as_f64 < a) | (as_f64 > b)
    assert not outside.any(), (
        f"{name} {dtype} {backend}: {int(outside.sum())} values outside [{a}, {b}], "
        f"min {float(as_f64.min())!r}, max {float(as_f64.max())!r}"
    )


def test_bf16_std002_default_bounds():
    """bf16, std 0.02, a = -2, b = 2 (100 sigma): nothing clamped to -2, unbiased, right spread."""
    values = fill_at(10**5, torch.bfloat16, 0.0, 0.02, -2.0, 2.0, seed=2012).double()
    at_bound = int(((values == -2.0) | (values == 2.0)).sum())
    assert at_bound == 0, f"{at_bound} bf16 values sit on a bound of +-2 (100 sigma)"
    mean, std = float(values.mean()), float(values.std())
    assert abs(mean) < 3e-4, f"|mean| = {abs(mean):.3g} >= 3e-4"
    assert abs(std / 0.02 - 1.0) < 0.01, f"std {std:.6g} is {100 * abs(std / 0.02 - 1):.2f} % from 0.02"


def test_f32_std0002_no_outliers():
    """fp32, std 0.002, default bounds, 4 * 2**24 values: none beyond 7 sigma."""
    values = fill_at(4 * 2**24, torch.float32, 0.0, 0.002, -2.0, 2.0, seed=2013)
    worst = float(values.abs().max())
    assert worst <= 7 * 0.002, f"max |x| = {worst!r} = {worst / 0.002:.1f} sigma > 7 sigma"
    assert torch.isfinite(values).all(), "non-finite values"


@pytest.mark.parametrize("dtype", [pytest.param(torch.float32, id="f32"), pytest.param(torch.float64, id="f64")])
@pytest.mark.parametrize(
    "std,a,b",
    [
        pytest.param(1e8, -2.0, 2.0, id="std1e8_pm2"),
        pytest.param(1e10, 0.0, 1.0, id="std1e10_0_1"),
        pytest.param(1.0, -1e-6, 1e-6, id="pm1e-6_sigma"),
    ],
)
def test_window_narrow_against_std_is_not_collapsed(std, a, b, dtype):
    """A window far narrower than std sits where Phi is ~1/2 and its mass has
    few digits beside Phi(alpha); the central branches take q = s - 1/2 from
    its own constant, so the sample is still the (nearly uniform) truncated
    normal rather than a few repeated values."""
    t = torch.empty(2**16, dtype=dtype)
    tinit.trunc_normal_at_(t, 0.0, std, a, b, seed=3, stream=1)
    x = t.double().numpy()
    assert len(np.unique(x)) > 0.99 * x.size, f"only {len(np.unique(x))} distinct values"
    p = scipy.stats.kstest(x, scipy.stats.truncnorm(a / std, b / std, scale=std).cdf).pvalue
    assert p > 1e-4, f"KS p = {p:.3g} for std {std} on [{a}, {b}]"
