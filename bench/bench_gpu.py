"""GPU benchmark: tinit (cuda, triton) against torch's fills, beside the static SASS estimate.

    python bench/bench_gpu.py --sass-json S.json          # 2^28, 2^24, 2^20, 2^32 elements; f32, bf16; every window
    python bench/bench_gpu.py --sizes 256M --dtypes f32 --windows pm2sigma --budget-s 60
    python bench/bench_gpu.py --device cpu --sizes 1M      # the pipeline on CPU (no GPU timing)

Windows (mean, std, a, b: absolute bounds):
    pm2sigma     (0, 0.02, -0.04, 0.04)   +-2 sigma (GPT-2)
    default      (0, 0.02, -2, 2)         torch.nn.init.trunc_normal_'s default bounds
    untruncated  (0, 1, -inf, inf)
    uniform      U(-0.1, 0.1)             tinit.params.uniform_constants
    tail         (0, 1, 8, 100)           the tail mode
Methods (baselines are torch's own functions, imported, not rewritten):
    fill           torch.Tensor.fill_(x, 0.01): the HBM write ceiling (once per size and dtype)
    torch          torch.Tensor.normal_(x, mean, std), or uniform_(x, low, high) for the uniform
    torch_trunc    torch.nn.init.trunc_normal_(x, mean, std, a, b) (truncated normals only)
    torch_func     torch.func._random.normal_ / uniform_ (stateless Philox, torch >= 2.12; CUDA only)
    tinit_cuda     the cuda backend's fill (torch.ops.tinit.trunc_normal_) with the window's constants
    tinit_cuda_misaligned  the same on the view one element in (no 16-byte-aligned vector store)
    tinit_compute  the same CUDA kernel with its stores removed: the compute-only time
    tinit_triton   the triton backend's fill
    tinit_cpu      (only with --device cpu) the cpu backend's fill
The tinit methods call the backend's fill with constants computed beforehand
(int(constants.mode) is the transform mode, tinit.params.Mode), so the time is
the kernel's and the launch's, not the argument checks'.

Each (size, dtype) allocates one tensor that every method fills. Each method
makes one untimed call whose output is validated (tinit: finite, inside the
dtype's values in [a, b], mean/std of a subsample near the exact moments, the
first and last 4096 values those of the cpu backend: bit for bit for cuda,
within 2 ulp of max(|x|, std) for triton; baselines: facts recorded), then is
timed: the median of N samples (CUDA events on CUDA, perf_counter elsewhere),
each sample back-to-back calls filling at least MIN_SAMPLE_S, N adapted to
about REP_BUDGET_S per method. A method that would overrun --budget-s is
skipped and the report says so; so is torch_trunc where its rejection
sampler (torch >= 2.12) would need many full-tensor passes or the GPU lacks
memory for its temporaries.

Estimate (SASS): with --sass-json (or $TINIT_SASS_JSON), the JSON report of
bench/sass_budget.py; a tinit row shows the est_gelem_s of the case with its
backend, single-tensor kernel, dtype and transform mode, and "of est." the
measured rate over it.

Every row is printed as it is measured and the report is rewritten after each
window (and on SIGINT): gpu_<date>_<commit>.json and .md under --out-dir (default
bench/results; gpu_dryrun_<date> off a GPU) and bench_gpu.json and .md under
$OUT when it is set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from _env import (
    REPO,
    Timer,
    environment_lines,
    gpu_environment,
    label,
    load_sass_estimates as load_estimates,
    parse_size,
    sass_estimate,
    save,
)

from tinit import dispatch, ops
from tinit.params import Mode, transform_constants, uniform_constants

SEED = 1234
REP_BUDGET_S = 0.25
MIN_SAMPLE_S = 2e-3
MAX_INNER = 64
CHECK = 4096
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SASS_DTYPES = {"f32": "fp32", "bf16": "bf16"}
SASS_KERNELS = {"tinit_cuda": ("cuda", "trunc_normal_kernel"), "tinit_triton": ("triton", "_trunc_normal_kernel")}
TARGETS = {"vs_torch_trunc": 10.0, "vs_torch": 1.0, "fill_fraction_f32": 0.70}
TARGET_WINDOW = "pm2sigma"
MAX_TORCH_PASSES = 50


@dataclass(frozen=True)
class Window:
    """One distribution to fill: a truncated normal (mean, std, a, b) or a uniform (low, high)."""

    name: str
    args: tuple[float, ...]

    @property
    def uniform(self) -> bool:
        return len(self.args) == 2

    @property
    def bounds(self) -> tuple[float, float]:
        return self.args if self.uniform else self.args[2:]

    @property
    def scale(self) -> float:
        """The unit the triton check's ulp floor uses: std, or the uniform's width."""
        return self.args[1] - self.args[0] if self.uniform else self.args[1]

    def constants(self, dtype: torch.dtype):
        return uniform_constants(*self.args, dtype) if self.uniform else transform_constants(*self.args, dtype)

    def text(self) -> str:
        if self.uniform:
            return f"U({self.args[0]:g}, {self.args[1]:g})"
        return "N({:g}, {:g}) in [{:g}, {:g}]".format(*self.args)

    def _frame(self) -> tuple[float, float, float]:
        """(alpha, beta, sign): the standardised window, mirrored (sign -1) when it lies more on the upper side."""
        mean, std, a, b = self.args
        alpha, beta = (a - mean) / std, (b - mean) / std
        return (-beta, -alpha, -1.0) if alpha > -beta else (alpha, beta, 1.0)

    def mass(self) -> float:
        """Phi(beta) - Phi(alpha), from the lower tail of the mirrored window (no cancellation in a tail)."""
        alpha, beta, _ = self._frame()
        return 0.5 * math.erfc(-beta / math.sqrt(2)) - 0.5 * math.erfc(-alpha / math.sqrt(2))

    def moments(self) -> tuple[float, float]:
        """Exact mean and std (uniform; truncated normal: Johnson, Kotz & Balakrishnan, Continuous
        Univariate Distributions, 13.10, with the mass taken from the lower tail, mirrored, so a
        window in the upper tail keeps its digits)."""
        if self.uniform:
            lo, hi = self.args
            return (lo + hi) / 2, (hi - lo) / math.sqrt(12)
        mean, std = self.args[:2]
        alpha, beta, sign = self._frame()

        def pdf(t):
            return 0.0 if math.isinf(t) else math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)

        def tpdf(t):
            return 0.0 if math.isinf(t) else t * pdf(t)

        z = self.mass()
        m = (pdf(alpha) - pdf(beta)) / z
        var = 1 + (tpdf(alpha) - tpdf(beta)) / z - m * m
        return mean + std * sign * m, std * math.sqrt(var)


INF = math.inf
WINDOWS = {
    w.name: w
    for w in (
        Window("pm2sigma", (0.0, 0.02, -0.04, 0.04)),
        Window("default", (0.0, 0.02, -2.0, 2.0)),
        Window("untruncated", (0.0, 1.0, -INF, INF)),
        Window("uniform", (-0.1, 0.1)),
        Window("tail", (0.0, 1.0, 8.0, 100.0)),
    )
}


def methods(
    window: Window, dtype: torch.dtype, numel: int, device: torch.device
) -> dict[str, tuple[callable, str | None]]:
    """name -> (fn(x), why it cannot run here or None) for one window, in the order they run."""
    constants = window.constants(dtype)

    def backend_fn(name):
        fill = dispatch.BACKENDS[name].fill
        return lambda x: fill(x, SEED, 0, 0, constants)

    probe = torch.empty(4, dtype=dtype, device=device)
    table = {}
    if device.type == "cuda":
        why = dispatch.BACKENDS["cuda"].why_not(probe)
        table["tinit_cuda"] = (backend_fn("cuda"), why)
        # One element in: every vector store straddles, the shifted loop of the kernel runs.
        cuda_fill = backend_fn("cuda")
        table["tinit_cuda_misaligned"] = (lambda x: cuda_fill(x.reshape(-1)[1:]), why)
        table["tinit_compute"] = (lambda x: ops.trunc_normal_compute_only(x, SEED, 0, 0, constants), why)
    else:
        table["tinit_cpu"] = (backend_fn("cpu"), dispatch.BACKENDS["cpu"].why_not(probe))
    stateless, why_stateless = _stateless_random(device)
    if window.uniform:
        table["torch"] = (lambda x: x.uniform_(*window.args), None)
        low, high = window.args
        table["torch_func"] = (lambda x: stateless.uniform_(_key(device), x, low=low, high=high), why_stateless)
    else:
        table["torch"] = (lambda x: x.normal_(window.args[0], window.args[1]), None)
        mean, std = window.args[:2]
        table["torch_func"] = (lambda x: stateless.normal_(_key(device), x, mean=mean, std=std), why_stateless)
        table["torch_trunc"] = (
            lambda x: torch.nn.init.trunc_normal_(x, *window.args),
            _torch_trunc_reason(window, numel),
        )
    if device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1":  # last: its first call compiles
        table["tinit_triton"] = (backend_fn("triton"), dispatch.BACKENDS["triton"].why_not(probe))
    return table


def _stateless_random(device: torch.device):
    """(torch.func._random, None), or (None, why not): torch's stateless Philox fills (a key in, no
    generator state; torch >= 2.12, CUDA only), the closest thing torch has to tinit's stream."""
    try:
        from torch.func import _random as stateless
    except ImportError:
        return None, f"torch {torch.__version__} has no torch.func._random"
    if device.type != "cuda":
        return None, "torch.func._random fills only CUDA tensors"
    return stateless, None


_KEYS: dict[str, torch.Tensor] = {}


def _key(device: torch.device) -> torch.Tensor:
    """torch.func._random's key for SEED on ``device``, made once (its creation is not timed twice)."""
    if str(device) not in _KEYS:
        from torch.func import _random as stateless

        _KEYS[str(device)] = stateless.key(SEED, device=device)
    return _KEYS[str(device)]


def _torch_trunc_reason(window: Window, numel: int) -> str | None:
    """Why torch.nn.init.trunc_normal_ is not timed on ``window``: torch >= 2.12 samples a window of
    mass <= 0.3 by rejection from U(a, b), one full-tensor pass a round, ~ln(n) / acceptance rounds."""
    if torch.__version__ < "2.12":
        return None
    mean, std, a, b = window.args
    alpha, beta = (a - mean) / std, (b - mean) / std
    if 0.5 * (math.erf(beta / math.sqrt(2)) - math.erf(alpha / math.sqrt(2))) > 0.3:  # torch's own test
        return None
    if math.isinf(a) or math.isinf(b):
        return f"torch {torch.__version__} draws U(a, b) for a window of mass <= 0.3: needs finite bounds"
    peak = max(alpha, min(0.0, beta))
    accept = window.mass() * math.sqrt(2 * math.pi) / ((beta - alpha) * math.exp(-0.5 * peak * peak))
    passes = math.log(max(numel, 2)) / accept
    if passes > MAX_TORCH_PASSES:
        return (
            f"torch {torch.__version__} rejection-samples this window from U(a, b), acceptance "
            f"{accept:.2g}: ~{passes:.0f} full-tensor passes"
        )
    return None


def _subsample(x: torch.Tensor, n: int = 1 << 24) -> torch.Tensor:
    flat = x.reshape(-1)
    return flat[:: max(1, flat.numel() // n)].float()


def _reference(x: torch.Tensor, window: Window, offset: int, count: int) -> torch.Tensor:
    """The cpu backend's values for elements [offset, offset + count) of a tinit fill of x."""
    ref = torch.empty(count, dtype=x.dtype)
    dispatch.BACKENDS["cpu"].fill(ref, SEED, 0, offset, window.constants(x.dtype))
    return ref


def validate(name: str, window: Window | None, x: torch.Tensor, before: torch.Tensor | None = None) -> dict:
    """Facts about one output; raises AssertionError when a tinit output is wrong."""
    if name.endswith("_misaligned"):  # the fill wrote the view one element in, from its stream index 0
        x, name = x.reshape(-1)[1:], name.removesuffix("_misaligned")
    if name == "tinit_compute":
        assert before is not None and torch.equal(_subsample(x), before), "compute-only run wrote to the tensor"
        return {"unchanged": True}
    lo, hi = (float(v) for v in torch.aminmax(x.reshape(-1)))
    sample = _subsample(x)
    facts = {
        "min": lo,
        "max": hi,
        "finite": math.isfinite(lo) and math.isfinite(hi),
        "sample_mean": float(sample.mean()),
        "sample_std": float(sample.std()),
    }
    if window is None:  # fill_
        return facts
    a, b = window.bounds
    if not name.startswith("tinit"):
        facts["inside_bounds"] = a <= lo and hi <= b
        return facts
    assert facts["finite"], f"{name}: non-finite values"
    constants = window.constants(x.dtype)
    assert constants.lo <= lo and hi <= constants.hi, f"{name}: values in [{lo}, {hi}], outside [{a}, {b}]"
    mean, std = window.moments()
    n = sample.numel()
    # Rounding to the dtype moves a value by at most half an ulp of the largest |value|.
    half_ulp = 0.5 * torch.finfo(x.dtype).eps * 2.0 ** math.floor(math.log2(max(abs(lo), abs(hi), 1e-30)))
    std_tol = 0.01 * std + 6 * std / math.sqrt(2 * n) + 2 * half_ulp  # sd of a sample std <= std / sqrt(2n)
    assert abs(facts["sample_std"] - std) < std_tol, f"{name}: std {facts['sample_std']}, expected {std}"
    assert abs(facts["sample_mean"] - mean) < 6 * std / math.sqrt(n) + half_ulp, (
        f"{name}: mean {facts['sample_mean']}, expected {mean}"
    )
    ends = {}
    for start in sorted({0, max(0, x.numel() - CHECK)}):
        got = x.reshape(-1)[start : start + CHECK].cpu()
        want = _reference(x, window, start, got.numel())
        if name in ("tinit_cuda", "tinit_cpu"):
            bits = {torch.float32: torch.int32, torch.bfloat16: torch.int16}[x.dtype]
            ok, how = torch.equal(got.view(bits), want.view(bits)), "equal to the cpu backend's"
        else:
            ulp = torch.finfo(x.dtype).eps * want.double().abs().clamp(min=window.scale)
            ok, how = bool(((got.double() - want.double()).abs() <= 2 * ulp).all()), "within 2 ulp of the cpu backend's"
        assert ok, f"{name}: elements [{start}, {start + got.numel()}) differ from the cpu backend's"
        ends[str(start)] = how
    facts["cpu_check"] = ends
    return facts


def _estimate(estimates: dict, method: str, dtype_name: str, mode: int) -> dict:
    if method not in SASS_KERNELS:
        return {}
    return sass_estimate(estimates, *SASS_KERNELS[method], SASS_DTYPES[dtype_name], mode)


def planned_estimates(estimates: dict, windows: list[Window], dtypes: list[str]) -> list[str]:
    """One line per (dtype, window): its transform mode and the SASS estimate of each GPU backend."""
    out = []
    for dtype_name in dtypes:
        for w in windows:
            mode = int(w.constants(DTYPES[dtype_name]).mode)
            ests = [_estimate(estimates, m, dtype_name, mode).get("est_gelem_s") for m in SASS_KERNELS]
            cells = ", ".join(
                f"{m.removeprefix('tinit_')} {'-' if e is None else f'{e:.1f}'}"
                for m, e in zip(SASS_KERNELS, ests, strict=True)
            )
            out.append(f"- {dtype_name} {w.name} [{Mode(mode).name}]: {cells} G elem/s")
    return out


def _over_budget(row: dict, nbytes: int, device: torch.device, deadline: float, history: dict) -> str | None:
    """Why this method should be skipped at this size (time or memory), or None."""
    prior = history.get((row["method"], row["dtype"], row["window"]))  # time scales with numel
    remaining = deadline - time.perf_counter()
    if remaining <= 0:
        return "the time budget is spent"
    if prior:
        predicted = prior[1] * row["numel"] / prior[0]
        if predicted * 3 > remaining:
            return (
                f"would overrun the time budget (predicted {predicted:.2f} s a call from "
                f"{label(prior[0])}, {remaining:.0f} s left)"
            )
    if row["method"] == "torch_trunc" and device.type == "cuda":
        free = torch.cuda.mem_get_info()[0]
        if free < 5 * nbytes:  # torch >= 2.12 samples by rejection with tensor-sized temporaries
            return f"needs ~5x the tensor free for its temporaries ({free / 2**30:.0f} GiB free)"
    return None


def _measure(name: str, window: Window | None, fn, x: torch.Tensor, timer: Timer, deadline: float) -> dict:
    """One untimed, validated call of ``fn(x)``, one warm call, then the timed samples; an exception
    (a failed check, a kernel that does not compile, no memory) becomes the row's error."""
    try:
        before = _subsample(x) if name == "tinit_compute" else None
        first = timer.time(lambda: fn(x), 1)[0]
        facts = {"first_call_s": first, "validation": validate(name, window, x, before)}
        warm = timer.time(lambda: fn(x), 1)[0]
        inner = max(1, min(MAX_INNER, int(MIN_SAMPLE_S / max(warm, 1e-7))))
        sample = warm * inner
        reps = max(3, min(20, int(REP_BUDGET_S / max(sample, 1e-6))))
        reps = max(1, min(reps, int((deadline - time.perf_counter()) / max(sample, 1e-6) / 4)))
        times = timer.time(lambda: fn(x), reps, inner)
    except Exception as exc:  # noqa: BLE001  the other methods still run
        return {"error": f"{type(exc).__name__}: {exc}"}
    t = statistics.median(times)
    return facts | {
        "reps": reps,
        "inner": inner,
        "median_s": t,
        "min_s": min(times),
        "g_elements_per_s": x.numel() / t / 1e9,
        "write_gb_per_s": x.numel() * x.element_size() / t / 1e9,
    }


def run_group(
    numel: int,
    dtype_name: str,
    windows: list[Window],
    device: torch.device,
    deadline: float,
    timer: Timer,
    history: dict,
    estimates: dict,
    rows: list[dict],
    checkpoint,
) -> None:
    """fill_, then every method of every window on one (numel, dtype) tensor, appended to ``rows``;
    prints each row as it is measured and a summary for each window, then calls ``checkpoint()``."""
    dtype = DTYPES[dtype_name]
    x = torch.empty(numel, dtype=dtype, device=device)
    nbytes = numel * x.element_size()
    group = len(rows)
    for window in [None, *windows]:
        table = {"fill": (lambda t: t.fill_(0.01), None)} if window is None else methods(window, dtype, numel, device)
        for name, (fn, why_not) in table.items():
            row = {
                "numel": numel,
                "size": label(numel),
                "dtype": dtype_name,
                "window": window.name if window else "-",
                "method": name,
                "bytes": nbytes,
            }
            if window is not None:
                mode = int(window.constants(dtype).mode)
                row.update(
                    {
                        "mode": Mode(mode).name,
                        "distribution": window.text(),
                        **_estimate(estimates, name, dtype_name, mode),
                    }
                )
            rows.append(row)
            skip = why_not and f"cannot run: {why_not}"
            skip = skip or _over_budget(row, nbytes, device, deadline, history)
            if skip:
                row["skipped"] = skip
            else:
                row.update(_measure(name, window, fn, x, timer, deadline))
                if "median_s" in row:
                    history[(name, dtype_name, row["window"])] = (numel, row["median_s"])
            _derive(rows[group:])
            print(line(row), flush=True)
        if window is not None:
            print(summary(rows[group:], window.name), flush=True)
        checkpoint()
    del x
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _derive(rows: list[dict]) -> None:
    """Add fraction of fill_, ratios, fraction of the estimate and the bound to one group's rows."""
    fill = next((r for r in rows if r["method"] == "fill" and "median_s" in r), None)
    by = {(r["window"], r["method"]): r for r in rows if "median_s" in r}
    for (window, method), r in by.items():
        if fill:
            r["fill_fraction"] = fill["median_s"] / r["median_s"]
        if "est_gelem_s" in r:
            r["of_estimate"] = r["g_elements_per_s"] / r["est_gelem_s"]
        for base in ("torch_trunc", "torch"):
            if (window, base) in by and method.startswith("tinit") and method != "tinit_compute":
                r[f"vs_{base}"] = by[(window, base)]["median_s"] / r["median_s"]
        compute = by.get((window, "tinit_compute"))
        if method == "tinit_cuda" and compute and fill:
            tc, tf = compute["median_s"], fill["median_s"]
            kind = "compute-bound" if tc >= tf else "memory-bound"
            r["bound"] = (
                f"{kind}: arithmetic alone {tc * 1e3:.3f} ms vs stores alone (fill_) "
                f"{tf * 1e3:.3f} ms; both {r['median_s'] * 1e3:.3f} ms"
            )


def targets(rows: list[dict]) -> list[str]:
    """The issue's targets (on the +-2 sigma window), checked for each tinit GPU method and case."""
    lines = []
    for r in rows:
        if r["method"] not in ("tinit_cuda", "tinit_triton") or r["window"] != TARGET_WINDOW or "median_s" not in r:
            continue
        case = f"{r['method']} {r['dtype']} {r['size']}"
        if "vs_torch_trunc" in r:
            ok = r["vs_torch_trunc"] >= TARGETS["vs_torch_trunc"]
            lines.append(
                f"{case}: {r['vs_torch_trunc']:.1f}x torch.nn.init.trunc_normal_ "
                f"(target >= {TARGETS['vs_torch_trunc']:.0f}x) {'PASS' if ok else 'FAIL'}"
            )
        if "vs_torch" in r:
            ok = r["vs_torch"] >= TARGETS["vs_torch"]
            lines.append(f"{case}: {r['vs_torch']:.2f}x torch.Tensor.normal_ (target >= 1x) {'PASS' if ok else 'FAIL'}")
        if r["dtype"] == "f32" and "fill_fraction" in r:
            ok = r["fill_fraction"] >= TARGETS["fill_fraction_f32"]
            lines.append(
                f"{case}: {r['fill_fraction']:.0%} of fill_ write bandwidth (target >= 70%) {'PASS' if ok else 'FAIL'}"
            )
    return lines


def _fmt(row: dict, key: str, spec: str) -> str:
    return format(row[key], spec) if key in row else "-"


def line(r: dict) -> str:
    """One row as the console shows it while the benchmark runs."""
    what = f"{r['dtype']:>4} {r['size']:>5} {r['window']:<11} {r['method']:<13}"
    if "median_s" not in r:
        return f"{what} {'FAILED ' + r['error'] if 'error' in r else 'skipped: ' + r['skipped']}"
    est = f"  estimate (SASS) {r['est_gelem_s']:7.1f} ({r['of_estimate']:.0%})" if "of_estimate" in r else ""
    return (
        f"{what} {r['median_s'] * 1e3:9.3f} ms {r['g_elements_per_s']:8.2f} G elem/s{est} "
        f"{r['write_gb_per_s']:6.0f} GB/s"
    )


def summary(rows: list[dict], window: str) -> str:
    """One line per window once its methods ran: each tinit rate, its estimate and its ratios to torch."""
    parts = []
    for r in rows:
        if r["window"] != window or not r["method"].startswith("tinit") or "median_s" not in r:
            continue
        est = f" (SASS est. {r['est_gelem_s']:.0f})" if "est_gelem_s" in r else ""
        ratios = "".join(f", {r[k]:.2f}x {k[3:]}" for k in ("vs_torch", "vs_torch_trunc") if k in r)
        parts.append(f"{r['method'].removeprefix('tinit_')} {r['g_elements_per_s']:.1f} G/s{est}{ratios}")
    first = next(r for r in rows if r["window"] == window)
    return f"  -> {first['dtype']} {first['size']} {window} [{first['mode']}]: " + ("; ".join(parts) or "no tinit rows")


def markdown(env: dict, rows: list[dict], complete: bool = True, sass_note: str | None = None) -> str:
    """The report: environment, one table row per (case, window, method), targets, bounds, skips."""
    head = [
        f"# tinit GPU benchmark, {env['date']}{'' if complete else ' (incomplete: still running or cut short)'}",
        "",
        *environment_lines(env),
        (
            f"- {'CUDA-event' if env['device'].startswith('cuda') else 'wall-clock'} medians; "
            "write GB/s = tensor bytes / time; estimate (SASS): bench/sass_budget.py's issue-rate bound for "
            f"the kernel, dtype and mode ({env.get('sass_json') or sass_note or 'none'})"
        ),
        "",
        (
            "| case | window | mode | method | ms | G elem/s | estimate (SASS) | of est. | write GB/s | of fill_ "
            "| vs torch | vs torch trunc |"
        ),
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    notes = []
    for r in rows:
        case = f"{r['dtype']} {r['size']}"
        if "median_s" not in r:
            notes.append(f"- {case} {r['window']} {r['method']}: {r.get('skipped') or r.get('error')}")
            continue
        head.append(
            f"| {case} | {r['window']} | {r.get('mode', '-')} | {r['method']} | {r['median_s'] * 1e3:.3f} | "
            f"{r['g_elements_per_s']:.2f} | {_fmt(r, 'est_gelem_s', '.1f')} | {_fmt(r, 'of_estimate', '.0%')} | "
            f"{r['write_gb_per_s']:.0f} | {_fmt(r, 'fill_fraction', '.0%')} | "
            f"{_fmt(r, 'vs_torch', '.2f')} | {_fmt(r, 'vs_torch_trunc', '.1f')} |"
        )
    windows = sorted({(r["window"], r["distribution"]) for r in rows if "distribution" in r})
    out = head + ["", "Windows: " + "; ".join(f"{n} {d}" for n, d in windows)]
    if env.get("planned_estimates"):
        out += ["", "## Estimate (SASS) of each planned case", ""] + env["planned_estimates"]
    gpu_targets = targets(rows) if env["device"].startswith("cuda") else []
    out += ["", "## Targets (window pm2sigma)", ""] + [f"- {t}" for t in gpu_targets or ["(no GPU rows)"]]
    bounds = [f"- {r['dtype']} {r['size']} {r['window']} tinit_cuda: {r['bound']}" for r in rows if "bound" in r]
    out += ["", "## Bound (from the store-removed kernel)", ""] + (bounds or ["- not measured"])
    if notes:
        out += ["", "## Skipped or failed", ""] + notes
    return "\n".join(out) + "\n"


def write(
    env: dict, rows: list[dict], out_dir: Path, complete: bool = True, sass_note: str | None = None
) -> list[Path]:
    """JSON + markdown under ``out_dir`` and, when $OUT is set, under $OUT."""
    payload = {
        "environment": env,
        "complete": complete,
        "results": rows,
        "targets": targets(rows) if env["device"].startswith("cuda") else [],
        "failed": [r for r in rows if "error" in r],
        "sass_note": sass_note,
    }
    return save(env, payload, markdown(env, rows, complete, sass_note), out_dir)


def annotate(result: Path, sass_json: Path, out_dir: Path) -> list[Path]:
    """Add the estimates of ``sass_json`` to the rows of a written report that have none, and rewrite it.

    gpu_check.sh compiles the Triton kernels for their SASS while the benchmark runs (the compile takes
    about a minute of CPU, which the first throughput numbers should not wait for), then calls this so
    that every tinit row still shows its static estimate. Measured fields are not touched.

    Args:
        result: a JSON report this script wrote (its copy under $OUT or under ``out_dir``).
        sass_json: bench/sass_budget.py's JSON report.
        out_dir: the run's ``--out-dir``: the copies there and under $OUT are rewritten.

    Returns:
        The paths written.

    Raises:
        ValueError: ``sass_json`` has no kernel cases, or ``result`` is not this script's report.
    """
    estimates, note = load_estimates(sass_json)
    if not estimates:
        raise ValueError(f"annotate: {note}")
    payload = json.loads(Path(result).read_text())
    if "results" not in payload or "environment" not in payload:
        raise ValueError(f"annotate: {result} is not a bench_gpu report")
    env, rows = payload["environment"], payload["results"]
    for row in rows:
        if "mode" in row and "est_gelem_s" not in row:
            row.update(_estimate(estimates, row["method"], row["dtype"], int(Mode[row["mode"]])))
    for key in {(r["numel"], r["dtype"]) for r in rows}:
        _derive([r for r in rows if (r["numel"], r["dtype"]) == key])
    env["sass_json"] = str(sass_json)
    return write(env, rows, out_dir, payload.get("complete", True), payload.get("sass_note"))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 1 when a tinit output failed validation, 2 without a CUDA device, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="256M,16M,1M,4G",
        help="comma-separated element counts (K/M/G = 2^10/20/30), run in this order",
    )
    parser.add_argument("--dtypes", default="f32,bf16", help="comma-separated: f32, bf16")
    parser.add_argument("--windows", default=",".join(WINDOWS), help=f"comma-separated: {', '.join(WINDOWS)}")
    parser.add_argument("--budget-s", type=float, default=240.0, help="stop starting methods after this many seconds")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a dry run of the pipeline)")
    parser.add_argument(
        "--sass-json",
        type=Path,
        default=os.environ.get("TINIT_SASS_JSON") or None,
        help="bench/sass_budget.py's JSON report, for the estimate column",
    )
    parser.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument(
        "--annotate",
        type=Path,
        metavar="REPORT.json",
        help="measure nothing: add --sass-json's estimates to a written report's rows that lack one",
    )
    args = parser.parse_args(argv)
    if args.annotate is not None:
        if args.sass_json is None:
            parser.error("--annotate needs --sass-json")
        for path in annotate(args.annotate, args.sass_json, args.out_dir):
            print(f"bench_gpu: annotated {path}")
        return 0
    device = torch.device(args.device)
    windows = [WINDOWS[w.strip()] for w in args.windows.split(",")]
    dtypes = [d.strip() for d in args.dtypes.split(",")]
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu: no CUDA device visible; use --device cpu for a dry run of the pipeline", file=sys.stderr)
        return 2
    deadline = time.perf_counter() + args.budget_s
    estimates, sass_note = load_estimates(args.sass_json)
    env = gpu_environment(device)
    env["sass_json"] = str(args.sass_json) if estimates else None
    env["planned_estimates"] = planned_estimates(estimates, windows, dtypes)
    print(
        "\n".join(
            [
                *environment_lines(env),
                f"bench_gpu: estimate (SASS) from {env['sass_json'] or sass_note}",
                *env["planned_estimates"],
            ]
        ),
        flush=True,
    )
    timer, rows, history = Timer(device), [], {}
    try:
        for numel in (parse_size(s) for s in args.sizes.split(",")):
            for dtype_name in dtypes:
                run_group(
                    numel,
                    dtype_name,
                    windows,
                    device,
                    deadline,
                    timer,
                    history,
                    estimates,
                    rows,
                    lambda: write(env, rows, args.out_dir, complete=False, sass_note=sass_note),
                )
    except KeyboardInterrupt:  # gpu_check.sh's timeout: keep what was measured
        env["interrupted"] = f"after {len(rows)} rows"
        write(env, rows, args.out_dir, complete=False, sass_note=sass_note)
        print(f"bench_gpu: interrupted; the report keeps {len(rows)} rows", flush=True)
        return 130
    for path in write(env, rows, args.out_dir, complete=True, sass_note=sass_note):
        print(f"bench_gpu: wrote {path}")
    print(markdown(env, rows, True, sass_note))
    failed = [r for r in rows if "error" in r and r["method"].startswith("tinit")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
