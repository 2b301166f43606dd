"""Timing, validation and provenance shared by the benchmarks (CPU and GPU).

Provenance: the machine, version and commit facts printed beside every figure
(``environment``, ``write_report``); timing: the median of wall-clock samples
(``median_s``); validation: a benchmarked output is finite, inside its bounds
and of the expected spread before its time counts (``check_values``). Used by
bench/conftest.py, bench/report.py, bench/peak_memory.py and the bench_*.py
scripts, which import it as ``_env``: a script's own folder is first on
``sys.path`` when it runs, and the tests put bench/ there.
"""

from __future__ import annotations

import datetime
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
    (GPU timing uses CUDA events instead, in bench_gpu's ``Timer``).
    """
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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

    commit, dirty = git_commit()
    return {
        "cpu_model": cpu_model(),
        "cpu_simd": simd_summary(),
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
    ``<out_dir>/<date>_<commit>[_dirty]<suffix>.md`` and ``.json``; returns the path stem."""
    import json

    day = datetime.date.fromisoformat(env["date"][:10]).isoformat()
    stem = Path(out_dir) / f"{day}_{env['git_commit']}{'_dirty' if env.get('git_dirty') else ''}{suffix}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    # Not with_suffix: a suffix such as "_tinit_0.2.0" holds dots.
    stem.parent.joinpath(stem.name + ".md").write_text(report)
    stem.parent.joinpath(stem.name + ".json").write_text(
        json.dumps({"environment": env, **payload}, indent=1, default=str)
    )
    print(f"\nwrote {stem}.md and .json")
    return stem
