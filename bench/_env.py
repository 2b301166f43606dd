"""Machine, version and commit facts printed beside every benchmark figure.

Shared by bench/conftest.py, bench/report.py and bench/peak_memory.py.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

from tinit.info import cpu_flags, cpu_model

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


def environment() -> dict:
    """Everything a result needs beside it: machine, versions, commit, date."""
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
        "git_commit": commit,
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
    stem.with_suffix(".md").write_text(report)
    stem.with_suffix(".json").write_text(json.dumps({"environment": env, **payload}, indent=1))
    print(f"\nwrote {stem}.md and .json")
    return stem
