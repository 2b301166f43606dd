"""Timing, validation and provenance shared by the benchmarks, CPU and GPU alike.

Provenance: the machine, version and commit facts printed beside every figure
(``environment``; ``gpu_environment`` adds the CUDA toolchain and the device;
``write_report`` and, for the GPU benchmarks, ``save`` write them beside the
results); timing: the median of wall-clock samples (``median_s``) and, on a
CUDA device, CUDA events (``Timer``); validation: a benchmarked output is
finite, inside its bounds and of the expected spread before its time counts
(``check_values``); sizes as ``256M`` (``parse_size``, ``label``). Used by
bench/conftest.py, bench/report*.py, bench/peak_memory.py and the bench_*.py
scripts (bench_gpu and bench_gpu_grouped included), which import it as
``_env``: a script's own folder is first on ``sys.path`` when it runs, and
the tests put bench/ there.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tinit.tools.info import cpu_flags, cpu_model

REPO = Path(__file__).resolve().parent.parent


def simd_summary() -> str:
    """The widest x86 SIMD extensions the CPU reports, e.g. "avx512f avx2"."""
    flags = cpu_flags()
    wanted = ("avx512f", "avx512_bf16", "avx512_fp16", "avx2", "fma")
    return " ".join(f for f in wanted if f in flags) or "n/a"


def git_commit() -> tuple[str, bool]:
    """(short commit id or "unknown", whether the work tree has uncommitted changes)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False
    return commit, dirty


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none): a busy machine slows every figure."""
    try:
        return os.getloadavg()
    except OSError:
        return None


def median_s(fn: Callable[[], object], repeats: int) -> float:
    """The median wall-clock time of ``repeats`` calls of ``fn``, in seconds (``time.perf_counter``).

    The caller warms up and synchronises: ``fn`` must return only when its work is done
    (GPU timing uses CUDA events instead: ``Timer``).
    """
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def best_us(fn: Callable[[], object], iters: int, rounds: int) -> float:
    """The best of ``rounds`` rounds of ``iters`` back-to-back calls of ``fn``, in microseconds a call
    (``time.perf_counter``): for per-call overheads of a few microseconds, where one call is below
    the clock's resolution."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - start) / iters * 1e6)
    return min(times)


def check_values(
    x, low: float, high: float, what: str, *, std: float | None = None, rel: float = 0.01, round_bounds: bool = True
) -> None:
    """Refuse a benchmarked output that is not finite, leaves [low, high] or (given ``std``) has a sample
    standard deviation off by more than ``rel``.

    With ``round_bounds`` the bounds are widened to their rounding in ``x``'s dtype (torch rounds
    them: bf16 -0.04 is -0.0400390625); without, they are exact (tinit's own outputs stay inside).

    Raises:
        AssertionError: naming ``what`` and the failed check.
    """
    import torch

    v = x.double()
    if not bool(torch.isfinite(v).all()):
        raise AssertionError(f"{what}: non-finite values")
    if round_bounds:
        low = min(low, float(torch.tensor(low, dtype=x.dtype))) if low > -float("inf") else low
        high = max(high, float(torch.tensor(high, dtype=x.dtype))) if high < float("inf") else high
    if float(v.min()) < low or float(v.max()) > high:
        raise AssertionError(f"{what}: values outside [{low}, {high}]")
    if std is not None:
        got = float(v.std())
        if abs(got / std - 1.0) > rel:
            raise AssertionError(f"{what}: sample std {got:.6g}, expected {std:.6g}")


def environment() -> dict:
    """Everything a result needs beside it: machine, versions, commit, date (``$TINIT_COMMIT`` names the
    commit where the checkout has no .git, as on the GPU machine)."""
    import torch

    import tinit
    from tinit import ops

    commit, dirty = git_commit()
    return {
        "cpu_model": cpu_model(),
        "cpu_simd": simd_summary(),
        "cpu_isa": ops.cpu_isa(),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "tinit": tinit.__version__,
        "git_commit": os.environ.get("TINIT_COMMIT") or commit,
        "git_dirty": dirty,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def write_report(out_dir: str | Path, env: dict, suffix: str, report: str, payload: dict) -> Path:
    """Write ``report`` (markdown) and ``payload`` (JSON, with ``env`` added) as
    ``<out_dir>/<date>_<commit>[_dirty]<suffix>[_<n>].md`` and ``.json``; returns the path stem. A second
    run of the same commit on the same day gets ``_2``, ``_3``, ...: a result the docs quote is never
    overwritten by a later run."""
    day = datetime.date.fromisoformat(env["date"][:10]).isoformat()
    base = Path(out_dir) / f"{day}_{env['git_commit']}{'_dirty' if env.get('git_dirty') else ''}{suffix}"
    stem, n = base, 1
    while stem.parent.joinpath(stem.name + ".json").exists() or stem.parent.joinpath(stem.name + ".md").exists():
        n += 1
        stem = base.parent / f"{base.name}_{n}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    # Not with_suffix: a suffix such as "_tinit_0.2.0" holds dots.
    stem.parent.joinpath(stem.name + ".md").write_text(report)
    stem.parent.joinpath(stem.name + ".json").write_text(
        json.dumps({"environment": env, **payload}, indent=1, default=str)
    )
    print(f"\nwrote {stem}.md and .json")
    return stem


# ---- the GPU benchmarks (bench_gpu, bench_gpu_grouped): sizes, CUDA-event timing, GPU provenance


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
    """Times calls with CUDA events on a CUDA device (GPU time, no host round trip inside a sample) and
    ``time.perf_counter`` elsewhere; the one timer of the GPU benchmarks.

    Args:
        device: the device the timed calls run on (``torch.device`` or a string).
    """

    def __init__(self, device):
        self.cuda = str(device).startswith("cuda")

    def time(self, fn: Callable[[], object], reps: int, inner: int = 1) -> list[float]:
        """Seconds per call of ``fn()`` in each of ``reps`` samples of ``inner`` back-to-back calls."""
        return [event for event, _ in self.samples(fn, reps, inner)]

    def samples(self, fn: Callable[[], object], reps: int, inner: int = 1) -> list[tuple[float, float]]:
        """(event seconds, wall seconds) per call in each of ``reps`` samples of ``inner`` calls; on CUDA
        the device is synchronised before each sample, so the wall time includes the launch overhead
        the events hide; off CUDA both are the wall time."""
        import torch

        out = []
        for _ in range(reps):
            if self.cuda:
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                start.record()
                for _ in range(inner):
                    fn()
                end.record()
                end.synchronize()
                wall = (time.perf_counter() - t0) / inner
                out.append((start.elapsed_time(end) / 1e3 / inner, wall))
            else:
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn()
                wall = (time.perf_counter() - t0) / inner
                out.append((wall, wall))
        return out


def gpu_environment(device) -> dict:
    """GPU, versions, commit and date beside every figure: ``_env.environment`` (machine, versions,
    commit, date) and the CUDA toolchain, the device and the CPU tinit.tools.info names."""
    import torch

    from tinit.tools import info

    device = torch.device(device)
    build = info.build_info()
    env = {
        **environment(),
        "torch_cuda": torch.version.cuda,
        "triton": build["triton"],
        "nvcc": build["nvcc"],
        "native_cuda_kernels": build["native_cuda_kernels"],
        "device": str(device),
        "cpu": info.device_info()[0]["name"],
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            {
                "gpu": props.name,
                "gpu_memory_gib": round(props.total_memory / 2**30, 1),
                "multiprocessors": props.multi_processor_count,
                "capability": f"{props.major}.{props.minor}",
            }
        )
    return env


def environment_lines(env: dict) -> list[str]:
    """The report's machine lines (GPU, versions, commit) as markdown list items."""
    return [
        (
            f"- GPU: {env.get('gpu', 'none')} ({env.get('multiprocessors', '-')} SMs, "
            f"{env.get('gpu_memory_gib', '-')} GiB, compute capability {env.get('capability', '-')})"
        ),
        (
            f"- torch {env['torch']} (CUDA {env['torch_cuda']}), triton {env['triton']}, nvcc {env['nvcc']}, "
            f"tinit {env['tinit']}, python {env['python']}"
        ),
        (
            f"- commit {env['git_commit']}{' (uncommitted changes)' if env['git_dirty'] else ''}; "
            f"device {env['device']}; CPU {env['cpu']}"
        ),
    ]


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


def load_sass_estimates(path: str | Path | None, arch: str = "sm_90") -> tuple[dict, str | None]:
    """bench/sass_budget.py's JSON report as (backend, kernel, sass dtype, mode) -> its case, and a note
    when there are none (no path, unreadable, no kernel cases): the static estimate the GPU benchmarks
    print beside each measurement.

    Args:
        path: the report's JSON file, or None.
        arch: the target whose cases to keep (a report holds sm_90 and sm_80; a case without an
            arch field, from an older report, counts as the report's arch).

    Returns:
        (mapping, note), the note None when the mapping has cases.
    """
    if path is None:
        return {}, "no SASS report given (--sass-json or $TINIT_SASS_JSON)"
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        return {}, f"SASS report {path} unreadable: {exc}"
    cases = {
        (c["backend"], c["kernel"], c["dtype"], c["mode"]): c
        for c in report.get("cases", [])
        if "est_gelem_s" in c and c.get("mode") is not None and c.get("arch", report.get("arch", arch)) == arch
    }
    return cases, None if cases else f"SASS report {path} has no kernel cases"


def sass_estimate(estimates: dict, backend: str, kernel: str, sass_dtype: str, mode: int) -> dict:
    """The row fields of one estimate (``est_gelem_s``, ``est_bound``, ``est_sass_per_elem`` and, where the
    report names the mode otherwise, ``est_mode_name``), or {} when the report has no such case.

    Args:
        estimates: ``load_sass_estimates``'s mapping.
        backend, kernel: as bench/sass_budget.py names them (``cuda``, ``grouped_kernel``).
        sass_dtype: ``fp32``, ``bf16``, ...; mode: a ``tinit.params.Mode`` value.
    """
    from tinit.params import Mode

    case = estimates.get((backend, kernel, sass_dtype, mode))
    if case is None:
        return {}
    est = {
        "est_gelem_s": case["est_gelem_s"],
        "est_bound": case.get("bound"),
        "est_sass_per_elem": case.get("sass_per_elem"),
    }
    if case.get("mode_name") != Mode(mode).name.lower():
        est["est_mode_name"] = case.get("mode_name")  # the SASS report names this mode differently
    return est
