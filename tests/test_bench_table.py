"""The pytest-benchmark run of bench/bench_trunc_normal.py ends with the throughput table on
screen (bench/conftest.py's terminal summary), from the same medians pytest-benchmark reports.

Runs the quick cases (1 M elements) in a subprocess; nothing here judges a speed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinit import ops

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("pytest_benchmark")


@pytest.mark.skipif(not ops.native_available(), reason="the benchmark refuses to time the fallback backend")
def test_quick_run_prints_the_throughput_table():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "bench/bench_trunc_normal.py",
            "--benchmark-only",
            "--quick",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    section = out[out.index("tinit throughput") :]
    assert "- machine: " in section and "- torch " in section and "tinit " in section
    # one row per case: four methods' G elements/s (write GB/s) and the three ratios
    number = r"[0-9.e+-]+"
    for case in ("f32 1 M", "bf16 1 M"):
        cells = (
            rf"\| {case} \| "
            + r" \| ".join([rf"{number} \({number}\)"] * 4)
            + rf" \| {number}x \| {number}x \| \d+% \|"
        )
        assert re.search(cells, section), f"no row for {case} in:\n{section}"
    # the table comes after pytest-benchmark's own tables (it is the last thing printed)
    assert out.rindex("tinit throughput") > out.rindex("benchmark 'f32-1M'")
