"""tinit.trunc_normal_ against torch's fills, in one pytest-benchmark run.

    python -m pytest bench/bench_trunc_normal.py --benchmark-only \
        --benchmark-json=bench/results/raw.json          # full: 16 M, 64 M, 256 M
    python -m pytest bench/bench_trunc_normal.py --benchmark-only --quick   # 1 M
    python bench/report.py bench/results/raw.json        # table + ratios, peak memory, files

The run itself ends with the throughput table on screen (bench/conftest.py's terminal summary:
G elements/s and the ratios, machine and versions).

Methods (baselines are torch's own functions, imported, not rewritten):
    tinit        tinit.trunc_normal_(x, 0, std, a, b)
    torch_trunc  torch.nn.init.trunc_normal_(x, 0, std, a, b)
    normal       torch.Tensor.normal_(x, 0, std)   (untruncated; a lower bar)
    zero         torch.Tensor.zero_(x)             (memory-write ceiling)
Every case uses std 0.02, a = -0.04, b = 0.04 (+-2 sigma, absolute bounds).

Each case allocates its tensor once, makes one untimed call whose output is
validated (finite; inside [a, b]; mean and std near the exact truncated
moments), then times whole in-place calls in pedantic mode. Rounds adapt to
the first call's time (about ROUND_BUDGET_S seconds per case, at least one
round), so the slow torch.nn.init.trunc_normal_ gets 1-2 rounds at 64 M and
more. extra_info carries numel, dtype, bytes per element and the bound check,
from which bench/report.py derives G elements/s and write GB/s.
"""

from __future__ import annotations

import math
import time

import pytest
import torch

import tinit

STD, A, B = 0.02, -0.04, 0.04
M = 1 << 20
FULL_CASES = [
    (16 * M, torch.float32),
    (16 * M, torch.bfloat16),
    (64 * M, torch.float32),
    (256 * M, torch.float32),
    (256 * M, torch.bfloat16),
]
QUICK_CASES = [(M, torch.float32), (M, torch.bfloat16)]
SLOW_NUMEL = 256 * M
ROUND_BUDGET_S = 3.0
MAX_ROUNDS = 30
DTYPE_IDS = {torch.float32: "f32", torch.bfloat16: "bf16"}


def _tinit(x):
    tinit.trunc_normal_(x, 0.0, STD, A, B)


def _torch_trunc(x):
    torch.nn.init.trunc_normal_(x, 0.0, STD, A, B)


def _normal(x):
    torch.Tensor.normal_(x, 0.0, STD)


def _zero(x):
    torch.Tensor.zero_(x)


METHODS = {"tinit": _tinit, "torch_trunc": _torch_trunc, "normal": _normal, "zero": _zero}


def truncated_moments(std: float, a: float, b: float) -> tuple[float, float]:
    """Mean and std of N(0, std^2) truncated to [a, b] (closed form, e.g.
    Johnson, Kotz & Balakrishnan, Continuous Univariate Distributions, 13.10)."""

    def pdf(t: float) -> float:
        return math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)

    def cdf(t: float) -> float:
        return 0.5 * math.erfc(-t / math.sqrt(2))

    alpha, beta = a / std, b / std
    z = cdf(beta) - cdf(alpha)
    m = (pdf(alpha) - pdf(beta)) / z
    var = 1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - m * m
    return std * m, std * math.sqrt(var)


def _strict_out_of_bounds(x: torch.Tensor, a: float, b: float) -> int:
    """Values outside the exact real interval [a, b], compared in fp64."""
    lo, hi = (float(v) for v in torch.aminmax(x.reshape(-1)))
    if a <= lo and hi <= b:
        return 0
    return sum(int(((c.double() < a) | (c.double() > b)).sum()) for c in x.reshape(-1).split(1 << 24))


def validate(method: str, x: torch.Tensor) -> dict:
    """Check one output; returns facts for extra_info, fails the case on a bad output.

    Bounds: tinit must stay in [a, b] exactly. torch.nn.init.trunc_normal_ is
    allowed [a, b] rounded to the dtype (it clamps in the tensor's dtype); its
    strict violations are recorded, not failed.
    """
    n = x.numel()
    xf = x.float()
    if not bool(torch.isfinite(xf).all()):
        pytest.fail(f"{method}: non-finite values in a {x.dtype} output")
    if method == "zero":
        if bool(xf.any()):
            pytest.fail("zero_: nonzero values")
        return {"out_of_bounds": 0}
    lo, hi = (float(v) for v in torch.aminmax(xf))
    std_hat, mean_hat = (float(v) for v in torch.std_mean(xf))
    if method == "normal":
        want_mean, want_std, oob = 0.0, STD, 0
    else:
        want_mean, want_std = truncated_moments(STD, A, B)
        oob = _strict_out_of_bounds(x, A, B)
        a_dt, b_dt = (float(torch.tensor(v, dtype=x.dtype)) for v in (A, B))
        slack_lo, slack_hi = (A, B) if method == "tinit" else (min(A, a_dt), max(B, b_dt))
        if lo < slack_lo or hi > slack_hi:
            pytest.fail(f"{method}: values outside [{slack_lo}, {slack_hi}]: min {lo}, max {hi}")
    if abs(std_hat / want_std - 1) > 0.01:
        pytest.fail(f"{method}: std {std_hat:.6g}, expected {want_std:.6g} (1% tolerance)")
    if abs(mean_hat - want_mean) > 6 * want_std / math.sqrt(n) + 1e-6:
        pytest.fail(f"{method}: mean {mean_hat:.3g}, expected {want_mean:.3g}")
    return {"out_of_bounds": oob, "min": lo, "max": hi, "std": std_hat, "mean": mean_hat}


def _label(numel: int) -> str:
    return f"{numel // M}M"


def pytest_generate_tests(metafunc):
    if {"numel", "dtype", "method"} <= set(metafunc.fixturenames):
        quick = metafunc.config.getoption("--quick")
        skip_slow = metafunc.config.getoption("--skip-slow")
        params = []
        for numel, dtype in QUICK_CASES if quick else FULL_CASES:
            for method in METHODS:
                marks = ()
                if skip_slow and method == "torch_trunc" and numel >= SLOW_NUMEL:
                    marks = pytest.mark.skip(reason="--skip-slow: torch.nn.init.trunc_normal_ at 256 M")
                params.append(
                    pytest.param(numel, dtype, method, marks=marks, id=f"{method}-{DTYPE_IDS[dtype]}-{_label(numel)}")
                )
        metafunc.parametrize(("numel", "dtype", "method"), params)


def _tinit_backend(x: torch.Tensor) -> str:
    from tinit import dispatch

    return dispatch.select(x).name


def test_fill(benchmark, record_throughput, numel, dtype, method):
    fn = METHODS[method]
    x = torch.empty(numel, dtype=dtype)
    benchmark.group = f"{DTYPE_IDS[dtype]}-{_label(numel)}"
    info = {
        "method": method,
        "numel": numel,
        "dtype": DTYPE_IDS[dtype],
        "element_size": x.element_size(),
        "std": STD,
        "a": A,
        "b": B,
    }
    if method == "tinit":
        info["backend"] = _tinit_backend(x)
        if info["backend"] != "cpu":
            pytest.fail(
                f"tinit would run on its {info['backend']!r} backend, not the native CPU op; "
                "build it with scripts/setup.sh"
            )
    x.fill_(float("nan"))
    start = time.perf_counter()
    fn(x)
    first_s = time.perf_counter() - start
    info.update(validate(method, x))
    rounds = max(1, min(MAX_ROUNDS, int(ROUND_BUDGET_S / max(first_s, 1e-9))))
    info["rounds"] = rounds
    benchmark.extra_info.update(info)
    benchmark.pedantic(fn, args=(x,), rounds=rounds, iterations=1, warmup_rounds=0)
    record_throughput(benchmark)
