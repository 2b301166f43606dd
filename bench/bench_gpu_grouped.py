"""GPU benchmark of grouped fills: many tensors (or a shard's rows) per launch against one launch each.

    python bench/bench_gpu_grouped.py                          # H200-sized cases, 25 s each
    python bench/bench_gpu_grouped.py --case-s large=10,model=20 --cases large,model
    python bench/bench_gpu_grouped.py --device cpu             # the pipeline on tiny CPU tensors (no timing claims)

Cases (run in this order; each gets --budget-s seconds, or its own from --case-s: bench/gpu_check.sh
decides them from the time its run has left):

large   one --large-numel tensor (default 2^28 elements), bf16 and fp32, std 0.02 in [-0.04, 0.04]:
            single     torch.ops.tinit.trunc_normal_ (the single-tensor kernel)
            grouped_1  the same tensor as a one-entry torch.ops.tinit.trunc_normal_grouped_
        and the Shard(1) half of an N x N weight (default N 8192: 8192 rows of 4096, rank 1 of 2):
            runs       torch.ops.tinit.trunc_normal_runs_ (one launch;
                       ShardLayout.from_offsets(...).runs(0), tinit.ops.trunc_normal_runs_native)
            row_loop   one trunc_normal_ per row (row views made beforehand); when the whole loop would
                       not fit the case's time, a prefix of the rows is timed and scaled to all rows
model   whole-model init of bench/bench_grouped.py's GPT (tinit.tools.toy_models.GPT, --blocks 167 blocks: 2,008
        tensors) at --widths 64 and 1024, bf16 and fp32, built on the meta device and materialised on
        --device; the methods are bench_grouped's own functions:
            grouped     tinit.init_model_(model, "gpt2") (tinit.write_grouped_: one
                        trunc_normal_grouped_ launch per dtype, foreach zeros, fill_ for the gains)
            per_tensor  tinit.init_model_(model, "gpt2", grouped=False)
            fill_loop   tinit.fill_ per named parameter
            torch_loop  torch.nn.init.trunc_normal_ per tensor (fill_ for constants)
        plus the CUDA kernels one grouped call launches (torch.profiler, one untimed call).
triton  the truncated-normal tensors of the same model (the ones write_grouped_ puts in its table):
            triton_per_tensor  trunc_normal_triton_ per tensor
            triton_grouped     tinit.triton_kernels.trunc_normal_grouped.trunc_normal_grouped_
            native_grouped     torch.ops.tinit.trunc_normal_grouped_ on the same list
        skipped when the triton backend cannot fill tensors on --device (on the CPU it needs
        TRITON_INTERPRET=1).

Every method makes one untimed call into tensors first set to NaN, validated before timing: the native
methods equal their reference bit for bit (model: the per-tensor path; large: the single-tensor kernel,
and its first and last 4096 values the CPU kernel's; runs: the per-row launches, first and last rows the
CPU kernel's), triton_grouped equals triton_per_tensor bit for bit and native_grouped within 2 ulp (of
max(|x|, std)), and every truncated-normal tensor is finite and inside its bounds (torch_loop: recorded,
not required). Then the median of N timed calls (CUDA events on CUDA, wall clock elsewhere; case model
also records wall time), N adapted to about REP_BUDGET_S per method and to the time left. A method that
would overrun its case's time is skipped and the report says so; a method that raises is recorded with
its error and the run goes on; the exit status is 1 when any method failed.

With --sass-json (or $TINIT_SASS_JSON: bench/sass_budget.py's report) each native large-tensor row
(single, grouped_1, runs) carries the static estimate of the CUDA kernel it launches (est_gelem_s).

Writes gpu_<date>_<commit>_grouped.json and .md (gpu_dryrun_<date>_grouped with --device cpu) under
--out-dir (default bench/results) after every case, and, when $OUT is set, bench_gpu_grouped.json and
.md under $OUT.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import bench_grouped
import torch
from _env import (
    REPO,
    Timer,
    environment_lines,
    gpu_environment,
    label,
    load_sass_estimates,
    parse_size,
    sass_estimate,
    save,
)
from bench_trunc_normal import STD, A, B

import tinit
from tinit import dispatch, ops, stream_for
from tinit.params import transform_constants
from tinit.sharding import ShardLayout

SEED, STREAM = 1234, 7
CHECK = 4096
REP_BUDGET_S = 0.3
MIN_REPS, MAX_REPS = 3, 30
MIN_METHOD_S = 1.0  # a method starts only with this much of its case's time left
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}
BITS = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
DEFAULTS = {
    "cuda": {"blocks": 167, "widths": "64,1024", "large_numel": "256M", "shard": 8192},
    "cpu": {"blocks": 4, "widths": "16,32", "large_numel": "64K", "shard": 64},
}


class Budget:
    """Each case's deadline, from the seconds the caller gives it (bench/gpu_check.sh owns the run's time
    and splits it between the cases; this script only keeps to what it is given)."""

    def __init__(self, seconds: dict[str, float]):
        self.seconds = seconds
        self.case_deadline = time.perf_counter()

    def start(self, case: str) -> None:
        self.case_deadline = time.perf_counter() + self.seconds[case]

    def left(self) -> float:
        return self.case_deadline - time.perf_counter()


def _time(fn, reps: int, cuda: bool) -> tuple[list[float], list[float]]:
    """(event seconds, wall seconds) of each of ``reps`` calls of ``fn()`` (``_env.Timer``)."""
    samples = Timer("cuda" if cuda else "cpu").samples(fn, reps)
    return [event for event, _ in samples], [wall for _, wall in samples]


def _error_text(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)
    at = f" (at {Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{at}"


def _measure(row: dict, fn, check, reset, budget: Budget, cuda: bool) -> None:
    """reset(); one untimed call of fn(); check() (raises when wrong, may return facts); timed calls."""
    left = budget.left()
    if left < MIN_METHOD_S:
        row["skipped"] = f"would overrun the budget: {max(left, 0):.1f} s left of this case's time"
        return
    try:
        with torch.no_grad():
            reset()
            first = _time(fn, 1, cuda)[1][0]
            facts = check()
        row["first_call_s"] = first
        row["validation"] = facts or "ok"
        if budget.left() < min(first, MIN_METHOD_S):  # a slow first call may have been a compile
            row["skipped"] = f"validated, but no time left to time it ({max(budget.left(), 0):.1f} s left)"
            return
        with torch.no_grad():  # warm (the first call may have compiled a kernel): plans the repetitions
            warm = _time(fn, 1, cuda)[1][0]
        left = budget.left()
        if left < warm:
            row["skipped"] = f"validated, but no time left to time it ({max(left, 0):.1f} s left, {warm:.2f} s a call)"
            return
        reps = min(MAX_REPS, max(MIN_REPS, int(REP_BUDGET_S / max(warm, 1e-6))))
        reps = max(1, min(reps, int(left / 2 / max(warm, 1e-6))))
        with torch.no_grad():
            events, walls = _time(fn, reps, cuda)
        row.update(reps=reps, median_s=statistics.median(events), min_s=min(events), wall_s=statistics.median(walls))
    except Exception as exc:  # noqa: BLE001  recorded; the run goes on
        row["error"] = _error_text(exc)


def _nan_(tensors) -> None:
    for t in tensors:
        t.fill_(math.nan)


def _same_bits(got: list[torch.Tensor], want: list[torch.Tensor], what: str) -> None:
    """Raise naming the first tensor whose bits differ (one host sync for the whole list)."""
    diffs = torch.stack(
        [(g.view(BITS[g.dtype]) != w.view(BITS[w.dtype])).sum() for g, w in zip(got, want, strict=True)]
    )
    bad = torch.nonzero(diffs).flatten().tolist()
    if bad:
        t = bad[0]
        raise AssertionError(
            f"{what}: {len(bad)} of {len(got)} tensors differ in their bits; tensor {t} "
            f"(shape {tuple(got[t].shape)}, {got[t].dtype}): {int(diffs[t])} elements"
        )


def _in_bounds(tensors: list[torch.Tensor], bounds: list[tuple[float, float]]) -> tuple[int, int]:
    """(non-finite tensors, tensors with a value outside its (lo, hi)), one host sync."""
    if not tensors:
        return 0, 0
    mins, maxs = zip(*(torch.aminmax(t.reshape(-1)) for t in tensors), strict=True)
    lo = torch.stack(mins).double().cpu()
    hi = torch.stack(maxs).double().cpu()
    want_lo = torch.tensor([b[0] for b in bounds], dtype=torch.float64)
    want_hi = torch.tensor([b[1] for b in bounds], dtype=torch.float64)
    finite = torch.isfinite(lo) & torch.isfinite(hi)
    return int((~finite).sum()), int((finite & ((lo < want_lo) | (hi > want_hi))).sum())


def _require_in_bounds(tensors, bounds, what: str) -> None:
    nonfinite, outside = _in_bounds(tensors, bounds)
    assert not nonfinite and not outside, (
        f"{what}: {nonfinite} tensors with non-finite values, {outside} with values outside their bounds"
    )


def _cpu_values(dtype, stream: int, offset: int, count: int, constants) -> torch.Tensor:
    out = torch.empty(count, dtype=dtype)
    ops.trunc_normal_native(out, SEED, stream, offset, constants)
    return out


def _within_ulp(got: list[torch.Tensor], want: list[torch.Tensor], stds: list[float]) -> float:
    """Largest |got - want| in units of eps(dtype) * max(|want|, std), over all tensors (one sync)."""
    worst = [
        ((g.double() - w.double()).abs() / (torch.finfo(w.dtype).eps * w.double().abs().clamp(min=s))).max()
        for g, w, s in zip(got, want, stds, strict=True)
        if w.numel()
    ]
    return float(torch.stack(worst).max()) if worst else 0.0


# ---------------------------------------------------------------- case large


def case_large(args, device: torch.device, budget: Budget, rows: list[dict]) -> None:
    """Per dtype: one big tensor (single-tensor kernel vs one-entry grouped call), then a Shard(1) half."""
    for dtype_name in args.dtypes:
        rows += _large(parse_size(args.large_numel), dtype_name, device, budget)
        rows += _shard(args.shard, dtype_name, device, budget)
        if device.type == "cuda":
            torch.cuda.empty_cache()


# The CUDA kernel (bench/sass_budget.py's name) each native large-tensor method launches: its static
# estimate stands beside the measurement. The runs op walks its rows with the grouped kernel.
SASS_KERNELS = {"single": "trunc_normal_kernel", "grouped_1": "grouped_kernel", "runs": "grouped_kernel"}
SASS_DTYPES = {"bf16": "bf16", "f32": "fp32"}


def add_estimates(rows: list[dict], estimates: dict) -> None:
    """Put bench/sass_budget.py's estimate (``_env.sass_estimate``) beside each large-tensor row of a
    native method: std STD in [A, B], the transform mode of that window in the row's dtype."""
    for row in rows:
        kernel = SASS_KERNELS.get(row.get("method"))
        if row.get("case") not in ("large", "shard") or kernel is None or row.get("dtype") not in SASS_DTYPES:
            continue
        mode = int(transform_constants(0.0, STD, A, B, DTYPES[row["dtype"]]).mode)
        row.update(sass_estimate(estimates, "cuda", kernel, SASS_DTYPES[row["dtype"]], mode))


def _rates(row: dict) -> None:
    if "median_s" in row:
        row["g_elements_per_s"] = row["numel"] / row["median_s"] / 1e9
        row["write_gb_per_s"] = row["bytes"] / row["median_s"] / 1e9


def _large(numel: int, dtype_name: str, device: torch.device, budget: Budget) -> list[dict]:
    """``trunc_normal_`` vs a one-entry ``trunc_normal_grouped_`` on one ``numel``-element tensor."""
    cuda = device.type == "cuda"
    dtype = DTYPES[dtype_name]
    constants = transform_constants(0.0, STD, A, B, dtype)
    x = torch.empty(numel, dtype=dtype, device=device)
    ref = {}

    def single():
        ops.trunc_normal_native(x, SEED, STREAM, 0, constants)

    def grouped():
        ops.trunc_normal_grouped_native([x], SEED, [STREAM], [0], [constants])

    def check_single():
        _require_in_bounds([x], [(A, B)], "single")
        for start in (0, x.numel() - min(CHECK, x.numel())):
            got = x[start : start + CHECK].cpu()
            _same_bits(
                [got],
                [_cpu_values(dtype, STREAM, start, got.numel(), constants)],
                f"single, elements from {start} vs the CPU kernel",
            )
        ref["bits"] = x.clone()
        return {"in_bounds": True, "ends": "equal to the CPU kernel"}

    def check_grouped():
        _require_in_bounds([x], [(A, B)], "grouped_1")
        if "bits" not in ref:
            raise AssertionError("no reference: the single-tensor method did not validate")
        _same_bits([x], [ref["bits"]], "grouped_1 vs single")
        return {"in_bounds": True, "bits": "equal to single"}

    out = []
    for name, fn, check in (("single", single, check_single), ("grouped_1", grouped, check_grouped)):
        row = {
            "case": "large",
            "dtype": dtype_name,
            "numel": numel,
            "size": label(numel),
            "method": name,
            "bytes": numel * x.element_size(),
        }
        _measure(row, fn, check, lambda: _nan_([x]), budget, cuda)
        _rates(row)
        _census_into(row, fn, device, budget)
        out.append(row)
    if all("median_s" in r for r in out):
        out[1]["grouped_over_single"] = out[0]["median_s"] / out[1]["median_s"]
    return out


def _shard(n: int, dtype_name: str, device: torch.device, budget: Budget) -> list[dict]:
    """Rank 1 of 2 of an (n, n) weight split on dim 1: runs_ in one launch vs one trunc_normal_ per row."""
    cuda = device.type == "cuda"
    dtype = DTYPES[dtype_name]
    constants = transform_constants(0.0, STD, A, B, dtype)
    local = (n, n // 2)
    runs = ShardLayout.from_offsets((n, n), local, (0, n // 2)).runs(0)
    starts = [runs.row_start(r) for r in range(runs.rows)]
    x = torch.empty(local, dtype=dtype, device=device)
    views = list(x.unbind(0))
    ref = {}
    base = {
        "case": "shard",
        "dtype": dtype_name,
        "shape": f"{n}x{n // 2} of {n}x{n}",
        "numel": x.numel(),
        "bytes": x.numel() * x.element_size(),
        "rows": runs.rows,
        "run": runs.run,
    }

    def fill_runs():
        ops.trunc_normal_runs_native(x, SEED, STREAM, runs, constants)

    def check_runs():
        _require_in_bounds([x], [(A, B)], "runs")
        for r in sorted({0, 1, runs.rows - 2, runs.rows - 1}):
            _same_bits(
                [x[r].cpu()],
                [_cpu_values(dtype, STREAM, starts[r], runs.run, constants)],
                f"runs, row {r} vs the CPU kernel",
            )
        ref["bits"] = x.clone()
        return {"in_bounds": True, "rows 0, 1, -2, -1": "equal to the CPU kernel"}

    row = dict(base, method="runs")
    _measure(row, fill_runs, check_runs, lambda: _nan_([x]), budget, cuda)
    _rates(row)
    _census_into(row, fill_runs, device, budget)

    loop = dict(base, method="row_loop")
    count = loop["rows_timed"] = _rows_that_fit(views, starts, constants, budget, cuda)

    def row_loop():
        for r in range(count):
            ops.trunc_normal_native(views[r], SEED, STREAM, starts[r], constants)

    def check_loop():
        if "bits" not in ref:
            raise AssertionError("no reference: the runs method did not validate")
        _same_bits([x[:count]], [ref["bits"][:count]], f"row_loop, first {count} rows vs runs")
        return {"bits": f"first {count} rows equal to runs"}

    _measure(loop, row_loop, check_loop, lambda: _nan_([x]), budget, cuda)
    if "median_s" in loop and count < runs.rows:  # scaled to the whole shard
        loop["extrapolated_from_rows"] = count
        for key in ("median_s", "min_s", "wall_s"):
            loop[key] *= runs.rows / count
    _rates(loop)
    if "median_s" in row and "median_s" in loop:
        row["row_loop_over_runs"] = loop["median_s"] / row["median_s"]
    return [row, loop]


def _rows_that_fit(views, starts, constants, budget: Budget, cuda: bool) -> int:
    """Rows of the per-row loop that fit (1 validated, 1 warm and MIN_REPS timed calls in half the time left)."""
    probe = min(len(views), 64)

    def fill():
        for r in range(probe):
            ops.trunc_normal_native(views[r], SEED, STREAM, starts[r], constants)

    per_row = _time(fill, 1, cuda)[1][0] / probe
    fit = int(max(budget.left(), 0) / 2 / (2 + MIN_REPS) / max(per_row, 1e-9))
    return max(probe, min(len(views), fit))


# ---------------------------------------------------------------- case model


def _build(width: int, blocks: int, dtype: torch.dtype, device: torch.device):
    """bench_grouped's GPT, built on the meta device, cast, and materialised on ``device`` (ties restored)."""
    with torch.device("meta"):
        model = bench_grouped._model(width, blocks)
    model.to(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # buffers left uninitialised: none are used
        tinit.materialise_(model, device)
    return model


def _is_normal(spec) -> bool:
    return spec.constant is None and spec.parts is None and spec.distribution != "uniform"


def _short(name: str) -> str:
    return name if len(name) <= 80 else name[:77] + "..."


def trace_kernels(trace: dict) -> dict[str, dict]:
    """Per kernel name (shortened): launches, registers per thread, block, grid and occupancy, from a
    torch.profiler chrome trace (kineto's ``cat == "kernel"`` events)."""
    found: dict[str, dict] = {}
    for event in trace.get("traceEvents", []):
        if event.get("cat") != "kernel":
            continue
        args = event.get("args", {})
        entry = found.setdefault(_short(event.get("name", "?")), {"launches": 0})
        entry["launches"] += 1
        for key, out in (
            ("registers per thread", "registers"),
            ("block", "block"),
            ("grid", "grid"),
            ("est. achieved occupancy %", "occupancy_pct"),
        ):
            if key in args:
                entry[out] = args[key]
    return found


def _kernel_census(fn, device: torch.device) -> dict:
    """Kernels one call of ``fn`` launches (CUDA; copies and memsets counted apart) with their
    registers per thread; on the CPU (a rehearsal) the tinit ops it calls."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    if cuda:
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        copies = [n for n in names if any(w in n.lower() for w in ("memcpy", "memset"))]
        kernels = [n for n in names if n not in copies]
        what = "CUDA kernels"
    else:
        kernels, copies = [e.name for e in prof.events() if e.name.startswith("tinit::")], []
        what = "tinit ops (CPU rehearsal: no kernels)"
    by_name: dict[str, int] = {}
    for name in kernels:
        by_name[_short(name)] = by_name.get(_short(name), 0) + 1
    census = {
        "what": what,
        "kernels": len(kernels),
        "copies": len(copies),
        "by_name": dict(sorted(by_name.items(), key=lambda kv: -kv[1])[:8]),
    }
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "trace.json"
            prof.export_chrome_trace(str(path))
            detail = trace_kernels(json.loads(path.read_text()))
        census["detail"] = dict(sorted(detail.items(), key=lambda kv: -kv[1]["launches"])[:8])
    except Exception as exc:  # noqa: BLE001  registers are a bonus; the count above stands
        census["detail_error"] = _error_text(exc)
    return census


def _census_into(row: dict, fn, device: torch.device, budget: Budget) -> None:
    """row["launches"] = the kernel census of one untimed call, when the row was timed and time is left."""
    if "median_s" not in row or budget.left() < MIN_METHOD_S:
        return
    try:
        with torch.no_grad():
            row["launches"] = _kernel_census(fn, device)
    except Exception as exc:  # noqa: BLE001  a profiler problem is not a tinit failure
        row["launches_error"] = _error_text(exc)
    if device.type == "cuda":
        row["host_syncs"] = _host_syncs(fn)


def _host_syncs(fn) -> int:
    """Host synchronisations of one untimed call: the warnings of ``torch.cuda.set_sync_debug_mode("warn")``
    (torch's own count of the syncing calls it makes: ``.item()``, blocking copies, ...); 0 is the target."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with torch.no_grad():
                fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def _configs(args, case: str, budget: Budget, run) -> list[dict]:
    """``run(width, dtype_name, base row)`` for every (width, dtype); a setup error or no time left is a row."""
    rows = []
    for width in args.widths:
        for dtype_name in args.dtypes:
            base = {"case": case, "width": width, "dtype": dtype_name, "blocks": args.blocks}
            if budget.left() < 2 * MIN_METHOD_S:
                rows.append(dict(base, method="all", skipped=f"would overrun the budget: {budget.left():.1f} s left"))
                continue
            try:
                rows += run(width, dtype_name, base)
            except Exception as exc:  # noqa: BLE001  the other configurations still run
                rows.append(dict(base, method="setup", error=_error_text(exc)))
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return rows


def case_model(args, device: torch.device, budget: Budget, rows: list[dict]) -> None:
    """Whole-model init: grouped vs per-tensor vs fill_ loop vs torch loop, per (width, dtype)."""
    rows += _configs(
        args,
        "model",
        budget,
        lambda width, dtype_name, base: _model(width, args.blocks, dtype_name, device, budget, base),
    )


def _model(width: int, blocks: int, dtype_name: str, device: torch.device, budget: Budget, base: dict) -> list[dict]:
    cuda = device.type == "cuda"
    dtype = DTYPES[dtype_name]
    model = _build(width, blocks, dtype, device)
    with torch.no_grad():  # the per-tensor path once: the reference and the specs
        summary = tinit.init_model_(model, "gpt2", seed=bench_grouped.SEED, grouped=False)
    params = list(model.parameters())
    reference = [p.detach().clone() for p in params]
    named = dict(model.named_parameters())
    specs = [(named[e.name], e.spec) for e in summary]
    normal = [e for e in summary if _is_normal(e.spec)]
    normal_tensors, bounds = [named[e.name] for e in normal], [e.spec.bounds for e in normal]
    largest = max(normal, key=lambda e: e.numel)
    numel = sum(e.numel for e in summary)
    base = dict(
        base, tensors=len(summary), normal_tensors=len(normal), numel=numel, bytes=numel * params[0].element_size()
    )

    def check_tinit(what):
        def check():
            _same_bits(params, reference, f"{what} vs the per-tensor path")
            _require_in_bounds(normal_tensors, bounds, what)
            head = named[largest.name].detach().reshape(-1)[:CHECK].cpu()
            want = torch.empty(head.numel(), dtype=dtype)
            tinit.trunc_normal_at_(
                want,
                largest.spec.mean,
                largest.spec.std,
                *largest.spec.bounds,
                seed=bench_grouped.SEED,
                stream=stream_for(largest.name),
                backend="cpu",
            )
            _same_bits([head], [want], f"{what}: {largest.name} vs the CPU kernel")
            return {
                "bits": "equal to per_tensor",
                "in_bounds": True,
                "cpu_check": f"first {head.numel()} of {largest.name}",
            }

        return check

    def check_torch():
        nonfinite, outside = _in_bounds(normal_tensors, bounds)
        return {"nonfinite_tensors": nonfinite, "tensors_outside_bounds": outside}

    methods = {
        "grouped": (lambda: bench_grouped._grouped(model), check_tinit("grouped")),
        "per_tensor": (lambda: bench_grouped._per_tensor(model), check_tinit("per_tensor")),
        "fill_loop": (lambda: bench_grouped._fill_loop(model, blocks, width), check_tinit("fill_loop")),
        "torch_loop": (lambda: bench_grouped._torch_loop(specs), check_torch),
    }
    out = []
    for name, (fn, check) in methods.items():
        row = dict(base, method=name)
        _measure(row, fn, check, lambda: _nan_(params), budget, cuda)
        _rates(row)
        if name == "grouped":
            _census_into(row, fn, device, budget)
        out.append(row)
    for row in out:
        if "median_s" in row and "median_s" in out[0]:
            row["x_grouped"] = row["median_s"] / out[0]["median_s"]
    return out


# ---------------------------------------------------------------- case triton


def case_triton(args, device: torch.device, budget: Budget, rows: list[dict]) -> None:
    """The model's truncated-normal tensors: Triton grouped launcher vs Triton per tensor vs native grouped."""
    why = dispatch.BACKENDS["triton"].why_not(torch.empty(4, device=device))
    if why is not None:
        rows.append({"case": "triton", "method": "all", "skipped": f"triton backend unavailable: {why}"})
        return
    rows += _configs(
        args,
        "triton",
        budget,
        lambda width, dtype_name, base: _triton(width, args.blocks, dtype_name, device, budget, base),
    )


def _triton(width: int, blocks: int, dtype_name: str, device: torch.device, budget: Budget, base: dict) -> list[dict]:
    cuda = device.type == "cuda"
    dtype = DTYPES[dtype_name]
    single = importlib.import_module("tinit.triton_kernels.trunc_normal")
    grouped_module = importlib.import_module("tinit.triton_kernels.trunc_normal_grouped")
    model = _build(width, blocks, dtype, device)
    summary = tinit.init_model_(model, "gpt2", seed=bench_grouped.SEED)
    named = dict(model.named_parameters())
    entries = [e for e in summary if _is_normal(e.spec)]
    tensors = [named[e.name].detach() for e in entries]
    streams = [stream_for(e.name) for e in entries]
    offsets = [0] * len(entries)
    packed = [transform_constants(e.spec.mean, e.spec.std, *e.spec.bounds, dtype) for e in entries]
    bounds, stds = [e.spec.bounds for e in entries], [e.spec.std for e in entries]
    numel = sum(t.numel() for t in tensors)
    base = dict(base, tensors=len(tensors), numel=numel, bytes=numel * tensors[0].element_size())
    ref = {}

    def per_tensor():
        for t, s, c in zip(tensors, streams, packed, strict=True):
            single.trunc_normal_triton_(t, bench_grouped.SEED, s, 0, c)

    def triton_grouped():
        grouped_module.trunc_normal_grouped_(tensors, bench_grouped.SEED, streams, offsets, packed)

    def native_grouped():
        ops.trunc_normal_grouped_native(tensors, bench_grouped.SEED, streams, offsets, packed)

    def check_per_tensor():
        _require_in_bounds(tensors, bounds, "triton_per_tensor")
        ref["bits"] = [t.clone() for t in tensors]
        return {"in_bounds": True}

    def check_grouped():
        _require_in_bounds(tensors, bounds, "triton_grouped")
        if "bits" not in ref:
            raise AssertionError("no reference: triton_per_tensor did not validate")
        _same_bits(tensors, ref["bits"], "triton_grouped vs triton_per_tensor")
        return {"in_bounds": True, "bits": "equal to triton_per_tensor"}

    def check_native():
        _require_in_bounds(tensors, bounds, "native_grouped")
        if "bits" not in ref:
            raise AssertionError("no reference: triton_per_tensor did not validate")
        ulp = _within_ulp(ref["bits"], tensors, stds)
        assert ulp <= 2, f"native_grouped vs triton: {ulp:.2f} ulp apart (at most 2 expected)"
        return {"in_bounds": True, "max_ulp_vs_triton": ulp}

    out = []
    for name, fn, check in (
        ("triton_per_tensor", per_tensor, check_per_tensor),
        ("triton_grouped", triton_grouped, check_grouped),
        ("native_grouped", native_grouped, check_native),
    ):
        row = dict(base, method=name)
        _measure(row, fn, check, lambda: _nan_(tensors), budget, cuda)
        _rates(row)
        if name == "triton_grouped":
            _census_into(row, fn, device, budget)
        out.append(row)
    if "median_s" in out[1]:
        for row in out:
            if "median_s" in row:
                row["x_triton_grouped"] = row["median_s"] / out[1]["median_s"]
    return out


# ---------------------------------------------------------------- report


def _cell(row: dict, key: str, spec: str, scale: float = 1.0) -> str:
    return format(row[key] * scale, spec) if key in row else "-"


def markdown(env: dict, rows: list[dict], complete: bool) -> str:
    """The report: environment, one table per case, kernel counts, skips and failures."""
    cuda = env["device"].startswith("cuda")
    out = [
        f"# tinit grouped-fill GPU benchmark, {env['date']}{'' if complete else ' (incomplete run)'}",
        "",
        *environment_lines(env),
        (
            f"- {'CUDA-event' if cuda else 'wall-clock (CPU rehearsal: no timing claims)'} medians; "
            f"std {STD}, bounds [{A}, {B}] for the large tensors; GB/s = bytes written / time"
        ),
        "",
    ]
    large = [r for r in rows if r["case"] in ("large", "shard") and "median_s" in r]
    if large:
        out += [
            "## Large tensors",
            "",
            (
                "| case | dtype | method | ms | G elem/s | estimate (SASS) G elem/s | write GB/s | "
                "grouped/single throughput | row loop / runs |"
            ),
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in large:
            what = r["size"] if r["case"] == "large" else f"shard {r['shape']}"
            if "extrapolated_from_rows" in r:
                what += f" ({r['extrapolated_from_rows']} rows timed, scaled)"
            out.append(
                f"| {what} | {r['dtype']} | {r['method']} | {r['median_s'] * 1e3:.3f} | "
                f"{r['g_elements_per_s']:.2f} | {_cell(r, 'est_gelem_s', '.1f')} | {r['write_gb_per_s']:.0f} | "
                f"{_cell(r, 'grouped_over_single', '.3f')} | {_cell(r, 'row_loop_over_runs', '.1f')} |"
            )
        out.append("")
    model = [r for r in rows if r["case"] == "model" and "median_s" in r]
    if model:
        out += [
            "## Whole-model init (GPT, gpt2 scheme)",
            "",
            "| d_model | dtype | tensors | elements | method | ms | wall ms | x grouped | write GB/s | reps |",
            "| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in model:
            out.append(
                f"| {r['width']} | {r['dtype']} | {r['tensors']} | {r['numel']:,} | {r['method']} | "
                f"{r['median_s'] * 1e3:.2f} | {r['wall_s'] * 1e3:.2f} | {_cell(r, 'x_grouped', '.2f')} | "
                f"{r['write_gb_per_s']:.1f} | {r['reps']} |"
            )
        out += ["", "x grouped: the method's time over the grouped call's (above 1: grouped is faster).", ""]
    triton = [r for r in rows if r["case"] == "triton" and "median_s" in r]
    if triton:
        out += [
            "## Triton (the model's truncated-normal tensors)",
            "",
            "| d_model | dtype | tensors | elements | method | ms | wall ms | x triton_grouped | reps |",
            "| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
        ]
        for r in triton:
            out.append(
                f"| {r['width']} | {r['dtype']} | {r['tensors']} | {r['numel']:,} | {r['method']} | "
                f"{r['median_s'] * 1e3:.2f} | {r['wall_s'] * 1e3:.2f} | "
                f"{_cell(r, 'x_triton_grouped', '.2f')} | {r['reps']} |"
            )
        out.append("")
    census = [r for r in rows if "launches" in r or "launches_error" in r]
    if census:
        out += ["## Launches of one call (torch.profiler)", ""]
        for r in census:
            what = " ".join(str(r[k]) for k in ("case", "width", "dtype", "size", "shape", "method") if k in r)
            if "launches_error" in r:
                out.append(f"- {what}: not counted ({r['launches_error']})")
                continue
            c = r["launches"]
            tensors = f" for {r['tensors']} tensors" if "tensors" in r else ""
            names = "; ".join(f"{n} x{k}" for n, k in c["by_name"].items())
            syncs = f", {r['host_syncs']} host syncs" if "host_syncs" in r else ""
            out.append(f"- {what}: {c['kernels']} {c['what']} ({c['copies']} copies/memsets){tensors}{syncs}: {names}")
            for name, d in c.get("detail", {}).items():
                if "registers" in d:
                    out.append(
                        f"  - {name}: {d['registers']} registers/thread, block {d.get('block')}, "
                        f"grid {d.get('grid')}, est. occupancy {d.get('occupancy_pct', '-')}%"
                    )
        out.append("")
    notes = []
    for r in rows:
        if "median_s" in r:
            continue
        what = " ".join(str(r[k]) for k in ("case", "width", "dtype", "size", "shape", "method") if k in r)
        notes.append(f"- {what}: {'FAILED: ' + r['error'] if 'error' in r else r.get('skipped')}")
    if notes:
        out += ["## Skipped or failed", "", *notes, ""]
    out += [
        "## Validation (before timing)",
        "",
        (
            "- native methods: bit-identical to their reference (model: the per-tensor path and the CPU kernel "
            "on the largest tensor's first 4096 values; large: the single-tensor kernel, whose ends equal the "
            "CPU kernel; runs: the per-row launches and, rows 0, 1, -2, -1, the CPU kernel)"
        ),
        "- triton_grouped bit-identical to triton_per_tensor; native_grouped within 2 ulp of Triton",
        "- every truncated-normal tensor finite and inside its bounds (torch_loop: recorded only)",
    ]
    return "\n".join(out) + "\n"


def write(env: dict, rows: list[dict], out_dir: Path, complete: bool) -> list[Path]:
    """JSON + markdown under ``out_dir`` and, when $OUT is set, under $OUT (rewritten after every case)."""
    payload = {"environment": env, "complete": complete, "results": rows, "failed": [r for r in rows if "error" in r]}
    return save(env, payload, markdown(env, rows, complete), out_dir, "_grouped")


def _print_rows(rows: list[dict]) -> None:
    for r in rows:
        what = " ".join(str(r[k]) for k in ("case", "width", "dtype", "size", "shape", "method") if k in r)
        state = (
            f"{r['median_s'] * 1e3:10.3f} ms" + (f" {r['write_gb_per_s']:8.1f} GB/s" if "write_gb_per_s" in r else "")
            if "median_s" in r
            else ("FAILED " + r["error"])
            if "error" in r
            else f"skipped: {r.get('skipped')}"
        )
        print(f"{what:<44} {state}", flush=True)


CASES = {"large": case_large, "model": case_model, "triton": case_triton}


def main(argv: list[str] | None = None) -> int:
    """Run the cases; returns 1 when any method failed, 2 without a CUDA device for --device cuda, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (pipeline rehearsal, tiny sizes)")
    parser.add_argument("--budget-s", type=float, default=25.0, help="seconds each case may take (default 25)")
    parser.add_argument("--case-s", default="", help="per-case seconds overriding --budget-s, e.g. large=10,model=20")
    parser.add_argument("--cases", default="large,model,triton", help="comma-separated: large, model, triton")
    parser.add_argument("--dtypes", default="bf16,f32", help="comma-separated: bf16, f32")
    parser.add_argument("--blocks", type=int, help="GPT blocks (default 167 on CUDA: 2,008 tensors; 4 on CPU)")
    parser.add_argument("--widths", help="comma-separated d_model values (default 64,1024 on CUDA; 16,32 on CPU)")
    parser.add_argument(
        "--large-numel", help="elements of the large tensor, K/M/G = 2^10/20/30 (default 256M on CUDA, 64K on CPU)"
    )
    parser.add_argument(
        "--shard",
        type=int,
        help="N of the N x N weight whose Shard(1) half is filled (default 8192 on CUDA, 64 on CPU)",
    )
    parser.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument(
        "--sass-json",
        type=Path,
        default=os.environ.get("TINIT_SASS_JSON") or None,
        help="bench/sass_budget.py's JSON report, for the estimate column of the large tensors",
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu_grouped: no CUDA device visible; use --device cpu for a rehearsal", file=sys.stderr)
        return 2
    defaults = DEFAULTS["cuda" if device.type == "cuda" else "cpu"]
    args.blocks = args.blocks or defaults["blocks"]
    args.widths = [int(w) for w in (args.widths or defaults["widths"]).split(",")]
    args.large_numel = args.large_numel or defaults["large_numel"]
    args.shard = args.shard or defaults["shard"]
    args.dtypes = [d.strip() for d in args.dtypes.split(",")]
    cases = [c.strip() for c in args.cases.split(",")]
    unknown = [c for c in cases if c not in CASES] + [d for d in args.dtypes if d not in DTYPES]
    if unknown:
        parser.error(f"unknown case or dtype: {unknown}")
    seconds = {case: args.budget_s for case in cases}
    for item in filter(None, (x.strip() for x in args.case_s.split(","))):
        name, _, value = item.partition("=")
        if name not in CASES or not value:
            parser.error(f"--case-s takes CASE=SECONDS items of {list(CASES)}, not {item!r}")
        seconds[name] = float(value)
    budget = Budget(seconds)
    env = gpu_environment(device)
    estimates, env["sass_note"] = load_sass_estimates(args.sass_json)
    env["arguments"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    rows: list[dict] = []
    for case in cases:
        budget.start(case)
        first = len(rows)
        try:
            CASES[case](args, device, budget, rows)
        except Exception as exc:  # noqa: BLE001  the other cases still run
            rows.append({"case": case, "method": "case", "error": _error_text(exc)})
        add_estimates(rows, estimates)
        _print_rows(rows[first:])
        write(env, rows, args.out_dir, complete=False)
    for path in write(env, rows, args.out_dir, complete=True):
        print(f"bench_gpu_grouped: wrote {path}")
    print(markdown(env, rows, True))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
