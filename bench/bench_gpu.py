"""GPU benchmark: tinit (cuda, triton) against torch's fills, with the bound each case hits.

    python bench/bench_gpu.py                           # 256M, 1G, 4G elements; bf16, fp32
    python bench/bench_gpu.py --sizes 256M --dtypes f32 --budget-s 60
    python bench/bench_gpu.py --device cpu --sizes 1M   # the pipeline on CPU (no GPU timing)

Methods (baselines are torch's own functions, imported, not rewritten):
    fill           torch.Tensor.fill_(x, 0.01)          the HBM write ceiling
    normal         torch.Tensor.normal_(x, 0, std)      untruncated; a lower bar
    tinit_cuda     tinit.trunc_normal_at_(..., backend="cuda")
    tinit_compute  the same CUDA kernel with its stores removed (a data dependency
                   keeps the arithmetic): the compute-only time
    tinit_triton   tinit.trunc_normal_at_(..., backend="triton")
    torch_trunc    torch.nn.init.trunc_normal_(x, 0, std, a, b)
    tinit_cpu      (only with --device cpu) backend="cpu"
Every case uses std 0.02, a = -0.04, b = 0.04 (+-2 sigma, absolute bounds).

Each case allocates one tensor; each method makes one untimed call whose output
is validated (tinit: finite, inside [a, b], mean/std of a subsample near the
exact truncated moments, the first and last 4096 values equal to the CPU
kernel's; baselines: facts recorded), then is timed with CUDA events: the
median of N calls, N adapted to about REP_BUDGET_S per method (3..20; 1..3 for
slow ones). A method that would overrun --budget-s is skipped and the report
says so. Write GB/s counts the tensor's bytes once (numel * element size /
time); "of fill_" is fill_'s time over the method's (the fraction of the write
ceiling). Bound: tinit_cuda is compute-bound when its compute-only time is at
least fill_'s time (the stores alone), memory-bound otherwise.

Writes gpu_<date>_<commit>.json and .md under bench/results/ and, when $OUT is
set, bench_gpu.json and bench_gpu.md under $OUT.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

import tinit
from tinit import dispatch, info, ops
from tinit.params import transform_constants

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import REPO, git_commit
from bench_trunc_normal import STD, A, B, truncated_moments

SEED = 1234
REP_BUDGET_S = 0.25
CHECK = 4096
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}
TARGETS = {"vs_torch_trunc": 10.0, "vs_normal": 1.0, "fill_fraction_f32": 0.70}


def parse_size(text: str) -> int:
    """'256M' -> 2**28, '4G' -> 2**32, '1000' -> 1000."""
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def label(numel: int) -> str:
    """2**28 -> '256M'."""
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if numel >= scale and numel % scale == 0:
            return f"{numel // scale}{unit}"
    return str(numel)


class Timer:
    """Times calls with CUDA events on a CUDA device, perf_counter elsewhere."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def time(self, fn, reps: int) -> list[float]:
        """Seconds of each of ``reps`` calls of ``fn()``."""
        out = []
        for _ in range(reps):
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                out.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
        return out


def methods(device: torch.device) -> dict[str, tuple[callable, str | None]]:
    """name -> (fn(x), why it cannot run here or None)."""
    def tinit_fn(backend):
        return lambda x: tinit.trunc_normal_at_(x, 0.0, STD, A, B, seed=SEED, backend=backend)

    def compute_only(x):
        ops.trunc_normal_compute_only(x, SEED, 0, 0, transform_constants(0.0, STD, A, B, x.dtype))

    probe = torch.empty(4, device=device)
    table = {
        "fill": (lambda x: x.fill_(0.01), None),
        "normal": (lambda x: x.normal_(0.0, STD), None),
    }
    if device.type == "cuda":
        table["tinit_cuda"] = (tinit_fn("cuda"), dispatch.BACKENDS["cuda"].why_not(probe))
        table["tinit_compute"] = (compute_only, dispatch.BACKENDS["cuda"].why_not(probe))
        table["tinit_triton"] = (tinit_fn("triton"), dispatch.BACKENDS["triton"].why_not(probe))
    else:
        table["tinit_cpu"] = (tinit_fn("cpu"), dispatch.BACKENDS["cpu"].why_not(probe))
    table["torch_trunc"] = (lambda x: torch.nn.init.trunc_normal_(x, 0.0, STD, A, B), None)
    return table


def _subsample(x: torch.Tensor, n: int = 1 << 24) -> torch.Tensor:
    flat = x.reshape(-1)
    return flat[:: max(1, flat.numel() // n)].float()


def _reference(x: torch.Tensor, offset: int, count: int) -> torch.Tensor:
    """The CPU kernel's values for elements [offset, offset + count) of a tinit fill of x."""
    ref = torch.empty(count, dtype=x.dtype)
    return tinit.trunc_normal_at_(ref, 0.0, STD, A, B, seed=SEED, offset=offset, backend="cpu")


def validate(name: str, x: torch.Tensor, before: torch.Tensor | None = None) -> dict:
    """Facts about one output; raises AssertionError when a tinit output is wrong."""
    lo, hi = (float(v) for v in torch.aminmax(x.reshape(-1)))
    sample = _subsample(x)
    facts = {"min": lo, "max": hi, "finite": math.isfinite(lo) and math.isfinite(hi),
             "sample_mean": float(sample.mean()), "sample_std": float(sample.std())}
    if name == "tinit_compute":
        assert before is not None and torch.equal(_subsample(x), before), "compute-only run wrote to the tensor"
        return {"unchanged": True}
    if not name.startswith("tinit"):
        facts["inside_bounds"] = A <= lo and hi <= B
        return facts
    assert facts["finite"], f"{name}: non-finite values"
    assert A <= lo and hi <= B, f"{name}: values in [{lo}, {hi}], outside [{A}, {B}]"
    mean, std = truncated_moments(STD, A, B)
    n = sample.numel()
    assert abs(facts["sample_std"] / std - 1) < 0.01, f"{name}: std {facts['sample_std']}, expected {std}"
    assert abs(facts["sample_mean"] - mean) < 6 * std / math.sqrt(n) + 1e-4, f"{name}: mean {facts['sample_mean']}"
    ends = {}
    for start in (0, x.numel() - CHECK):
        got = x.reshape(-1)[start:start + CHECK].cpu()
        want = _reference(x, start, got.numel())
        if name in ("tinit_cuda", "tinit_cpu"):
            bits = {torch.float32: torch.int32, torch.bfloat16: torch.int16}[x.dtype]
            ok = torch.equal(got.view(bits), want.view(bits))
        else:  # triton: within 2 ulp of max(|x|, std) in the tensor's dtype
            ulp = torch.finfo(x.dtype).eps * want.double().abs().clamp(min=STD)
            ok = bool(((got.double() - want.double()).abs() <= 2 * ulp).all())
        assert ok, f"{name}: elements [{start}, {start + CHECK}) differ from the CPU kernel's"
        ends[str(start)] = "equal to the CPU kernel" if name != "tinit_triton" else "within 2 ulp of the CPU kernel"
    facts["cpu_check"] = ends
    return facts


def _over_budget(name: str, dtype_name: str, numel: int, nbytes: int, device: torch.device,
                 deadline: float, history: dict) -> str | None:
    """Why ``name`` should be skipped at this size (time or memory), or None."""
    prior = history.get((name, dtype_name))  # time scales with numel
    predicted = prior[1] * numel / prior[0] if prior else None
    remaining = deadline - time.perf_counter()
    if predicted is not None and predicted * 3 > remaining:
        return (f"would overrun the time budget (predicted {predicted:.2f} s a call from "
                f"{label(prior[0])}, {remaining:.0f} s left)")
    if name == "torch_trunc" and device.type == "cuda":
        free = torch.cuda.mem_get_info()[0]
        if free < 5 * nbytes:  # torch >= 2.12 samples by rejection with tensor-sized temporaries
            return f"needs ~5x the tensor free for its temporaries ({free / 2**30:.0f} GiB free)"
    return None


def _measure(name: str, fn, x: torch.Tensor, timer: Timer, deadline: float) -> dict:
    """One untimed, validated call of ``fn(x)``, then the timed ones."""
    before = _subsample(x) if name == "tinit_compute" else None
    try:
        first = timer.time(lambda: fn(x), 1)[0]
        facts = {"validation": validate(name, x, before)}
    except (AssertionError, RuntimeError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    reps = max(1, min(20, int(REP_BUDGET_S / max(first, 1e-6))))
    reps = min(reps, 3) if first > 0.5 else max(reps, 3)
    reps = max(1, min(reps, int((deadline - time.perf_counter()) / max(first, 1e-6) / 4)))
    times = timer.time(lambda: fn(x), reps)
    t = statistics.median(times)
    return facts | {"reps": reps, "median_s": t, "min_s": min(times),
                    "g_elements_per_s": x.numel() / t / 1e9, "write_gb_per_s": x.numel() * x.element_size() / t / 1e9}


def run_case(numel: int, dtype_name: str, device: torch.device, deadline: float, timer: Timer,
             history: dict) -> list[dict]:
    """Every method on one (numel, dtype): validated, then timed. Returns one row per method."""
    dtype = DTYPES[dtype_name]
    rows = []
    x = torch.empty(numel, dtype=dtype, device=device)
    nbytes = numel * x.element_size()
    for name, (fn, why_not) in methods(device).items():
        row = {"numel": numel, "size": label(numel), "dtype": dtype_name, "method": name, "bytes": nbytes}
        rows.append(row)
        skip = why_not and f"cannot run: {why_not}"
        skip = skip or _over_budget(name, dtype_name, numel, nbytes, device, deadline, history)
        if skip:
            row["skipped"] = skip
            continue
        row.update(_measure(name, fn, x, timer, deadline))
        if "median_s" in row:
            history[(name, dtype_name)] = (numel, row["median_s"])
    del x
    if device.type == "cuda":
        torch.cuda.empty_cache()
    _derive(rows)
    return rows


def _derive(rows: list[dict]) -> None:
    """Add fraction of fill_, ratios and the bound to one case's rows."""
    by = {r["method"]: r for r in rows if "median_s" in r}
    fill = by.get("fill")
    for r in by.values():
        if fill:
            r["fill_fraction"] = fill["median_s"] / r["median_s"]
        for base in ("torch_trunc", "normal"):
            if base in by and r["method"].startswith("tinit") and r["method"] != "tinit_compute":
                r[f"vs_{base}"] = by[base]["median_s"] / r["median_s"]
    full, compute = by.get("tinit_cuda"), by.get("tinit_compute")
    if full and compute and fill:
        tc, tf = compute["median_s"], fill["median_s"]
        kind = "compute-bound" if tc >= tf else "memory-bound"
        full["bound"] = (f"{kind}: arithmetic alone {tc * 1e3:.2f} ms vs stores alone (fill_) "
                         f"{tf * 1e3:.2f} ms; both {full['median_s'] * 1e3:.2f} ms")


def environment(device: torch.device) -> dict:
    """GPU, versions, commit and date beside every figure."""
    build = info.build_info()
    commit, dirty = git_commit()
    env = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "git_commit": os.environ.get("TINIT_COMMIT") or commit,
        "git_dirty": dirty,
        "tinit": tinit.__version__, "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "triton": build["triton"], "nvcc": build["nvcc"], "python": build["python"],
        "native_cuda_kernels": build["native_cuda_kernels"], "device": str(device),
        "cpu": info.device_info()[0]["name"],
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update({"gpu": props.name, "gpu_memory_gib": round(props.total_memory / 2**30, 1),
                    "multiprocessors": props.multi_processor_count,
                    "capability": f"{props.major}.{props.minor}"})
    return env


def targets(rows: list[dict]) -> list[str]:
    """The issue's targets, checked for each tinit GPU method and case."""
    lines = []
    for r in rows:
        if r["method"] not in ("tinit_cuda", "tinit_triton") or "median_s" not in r:
            continue
        case = f"{r['method']} {r['dtype']} {r['size']}"
        if "vs_torch_trunc" in r:
            ok = r["vs_torch_trunc"] >= TARGETS["vs_torch_trunc"]
            lines.append(f"{case}: {r['vs_torch_trunc']:.1f}x torch.nn.init.trunc_normal_ "
                         f"(target >= {TARGETS['vs_torch_trunc']:.0f}x) {'PASS' if ok else 'FAIL'}")
        if "vs_normal" in r:
            ok = r["vs_normal"] >= TARGETS["vs_normal"]
            lines.append(f"{case}: {r['vs_normal']:.2f}x torch.Tensor.normal_ (target >= 1x) {'PASS' if ok else 'FAIL'}")
        if r["dtype"] == "f32" and "fill_fraction" in r:
            ok = r["fill_fraction"] >= TARGETS["fill_fraction_f32"]
            lines.append(f"{case}: {r['fill_fraction']:.0%} of fill_ write bandwidth (target >= 70%) "
                         f"{'PASS' if ok else 'FAIL'}")
    return lines


def _fmt(row: dict, key: str, spec: str) -> str:
    return format(row[key], spec) if key in row else "-"


def environment_lines(env: dict) -> list[str]:
    """The report's machine lines (GPU, versions, commit) as markdown list items."""
    return [(f"- GPU: {env.get('gpu', 'none')} ({env.get('multiprocessors', '-')} SMs, "
             f"{env.get('gpu_memory_gib', '-')} GiB, compute capability {env.get('capability', '-')})"),
            (f"- torch {env['torch']} (CUDA {env['torch_cuda']}), triton {env['triton']}, nvcc {env['nvcc']}, "
             f"tinit {env['tinit']}, python {env['python']}"),
            (f"- commit {env['git_commit']}{' (uncommitted changes)' if env['git_dirty'] else ''}; "
             f"device {env['device']}; CPU {env['cpu']}")]


def markdown(env: dict, rows: list[dict]) -> str:
    """The report: environment, one table row per (case, method), targets, bounds, skips."""
    head = [f"# tinit GPU benchmark, {env['date']}", "", *environment_lines(env),
            (f"- std {STD}, bounds [{A}, {B}] (+-2 sigma); "
             f"{'CUDA-event' if env['device'].startswith('cuda') else 'wall-clock'} medians; "
             "write GB/s = tensor bytes / time"),
            "", "| case | method | ms | G elem/s | write GB/s | of fill_ | vs torch trunc | vs normal_ |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    notes = []
    for r in rows:
        case = f"{r['dtype']} {r['size']}"
        if "median_s" not in r:
            notes.append(f"- {case} {r['method']}: {r.get('skipped') or r.get('error')}")
            continue
        head.append(f"| {case} | {r['method']} | {r['median_s'] * 1e3:.3f} | {r['g_elements_per_s']:.2f} | "
                    f"{r['write_gb_per_s']:.0f} | {_fmt(r, 'fill_fraction', '.0%')} | "
                    f"{_fmt(r, 'vs_torch_trunc', '.1f')} | {_fmt(r, 'vs_normal', '.2f')} |")
    bounds = [f"- {r['dtype']} {r['size']} tinit_cuda: {r['bound']}" for r in rows if "bound" in r]
    out = head + ["", "## Targets (issue 3)", ""] + [f"- {t}" for t in targets(rows) or ["(no GPU rows)"]]
    out += ["", "## Bound (from the store-removed kernel)", ""] + (bounds or ["- not measured"])
    if notes:
        out += ["", "## Skipped or failed", ""] + notes
    return "\n".join(out) + "\n"


def save(env: dict, payload: dict, text: str, out_dir: Path, suffix: str = "") -> list[Path]:
    """Write ``payload`` (JSON) and ``text`` (markdown) as ``gpu_<date>_<commit><suffix>`` under ``out_dir``
    (``gpu_dryrun_<date><suffix>`` off a GPU) and, when $OUT is set, as ``bench_gpu<suffix>`` under $OUT."""
    stamp = env["date"][:19].replace(":", "").replace("-", "")
    stem = f"gpu_{stamp}_{env['git_commit']}" if env["device"].startswith("cuda") else f"gpu_dryrun_{stamp}"
    dests = [(out_dir, stem + suffix)]
    if os.environ.get("OUT"):
        dests.append((Path(os.environ["OUT"]), "bench_gpu" + suffix))
    written = []
    for folder, name in dests:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
        (folder / f"{name}.md").write_text(text)
        written += [folder / f"{name}.json", folder / f"{name}.md"]
    return written


def write(env: dict, rows: list[dict], out_dir: Path) -> list[Path]:
    """JSON + markdown under ``out_dir`` and, when $OUT is set, under $OUT."""
    payload = {"environment": env, "results": rows, "targets": targets(rows)}
    return save(env, payload, markdown(env, rows), out_dir)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 1 when a tinit output failed validation, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="256M,1G,4G", help="comma-separated element counts (K/M/G = 2^10/20/30)")
    parser.add_argument("--dtypes", default="bf16,f32", help="comma-separated: bf16, f32")
    parser.add_argument("--budget-s", type=float, default=240.0, help="stop starting methods after this many seconds")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a dry run of the pipeline)")
    parser.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu: no CUDA device visible; use --device cpu for a dry run of the pipeline", file=sys.stderr)
        return 2
    deadline = time.perf_counter() + args.budget_s
    timer, rows, history = Timer(device), [], {}
    for numel in sorted(parse_size(s) for s in args.sizes.split(",")):
        for dtype_name in args.dtypes.split(","):
            case_rows = run_case(numel, dtype_name.strip(), device, deadline, timer, history)
            for r in case_rows:
                state = (f"{r['median_s'] * 1e3:9.3f} ms {r['write_gb_per_s']:8.0f} GB/s" if "median_s" in r
                         else r.get("error") or r.get("skipped"))
                print(f"{r['dtype']:>4} {r['size']:>5} {r['method']:<14} {state}", flush=True)
            rows += case_rows
    env = environment(device)
    for path in write(env, rows, args.out_dir):
        print(f"bench_gpu: wrote {path}")
    print(markdown(env, rows))
    failed = [r for r in rows if "error" in r and r["method"].startswith("tinit")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
