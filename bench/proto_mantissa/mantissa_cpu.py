"""The CPU cost of the prototype's transform beside today's (bench_mantissa_cpu.cpp, one process).

Builds bench_mantissa_cpu.cpp with g++ and the flags of bench/bench_cpu_kernels.py (-O3
-ffp-contract=off), with the shipped engines (csrc/cpu/transform_avx512.cpp,
csrc/cpu/transform_avx2.cpp) and the prototype's (proto_avx512.cpp, proto_avx2.cpp), and feeds it
the windows of bench_cpu_kernels.WINDOWS. ``check`` proves the prototype's engines bit-identical
to its portable code and that code to mantissa_fp32's emulation; ``timings`` runs interleaved
rounds and returns, per case, the ratio prototype / today of each round (median, min, max).
"""

from __future__ import annotations

import functools
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_cpu_kernels import WINDOWS  # noqa: E402

SOURCES = (
    HERE / "bench_mantissa_cpu.cpp",
    HERE / "proto_avx512.cpp",
    HERE / "proto_avx2.cpp",
    ROOT / "csrc" / "cpu" / "transform_avx512.cpp",
    ROOT / "csrc" / "cpu" / "transform_avx2.cpp",
    ROOT / "csrc" / "cpu" / "isa.cpp",
)


def build(work: Path) -> Path:
    """The harness, compiled into work."""
    import torch.utils.cpp_extension as cpp

    compiler = shutil.which("g++")
    if compiler is None:
        raise RuntimeError("no g++ on PATH")
    exe = work / "bench_mantissa_cpu"
    includes = [f"-I{p}" for p in (ROOT / "csrc" / "include", ROOT / "csrc", HERE, *cpp.include_paths())]
    cmd = [compiler, "-O3", "-std=c++17", "-ffp-contract=off", "-w", *includes, *map(str, SOURCES), "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def _windows_text() -> str:
    import torch

    from tinit.params import transform_constants

    return "".join(
        " ".join(repr(float(c)) for c in transform_constants(*w, torch.float32)) + "\n" for w in WINDOWS.values()
    )


def check(exe: Path, n: int = 1 << 16, seed: int = 20240601) -> dict:
    """{"engines": mismatch lines of the harness, "emulation": mismatches of the prototype's portable
    fp32 values against mantissa_fp32 per window}; every count should be 0."""
    import mantissa_accuracy
    import mantissa_fp32 as fp
    import torch

    from tinit.ops import philox_words
    from tinit.params import transform_constants

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "values.bin"
        out = subprocess.run(
            [str(exe), "check", str(n), str(seed), str(path)],
            check=False,
            input=_windows_text(),
            capture_output=True,
            text=True,
        )
        out.check_returncode()
        got = np.fromfile(path, dtype=np.float32).reshape(len(WINDOWS), n)
    single, pair = mantissa_accuracy.inverses()["mantissa"]
    words = philox_words(n, seed, 3).numpy()
    emulation = {}
    for k, (name, window) in enumerate(WINDOWS.items()):
        want = fp.two_sided(words, fp.Record.of(transform_constants(*window, torch.float32)), single, pair)
        emulation[name] = int(np.sum(want.view(np.uint32) != got[k].view(np.uint32)))
    return {"engines": out.stdout.splitlines(), "emulation": emulation}


def _summary(pairs: list[tuple[float, float]]) -> dict:
    ratios = [p / t for t, p in pairs]
    return {
        "today_ns": statistics.median(t for t, _ in pairs),
        "mantissa_ns": statistics.median(p for _, p in pairs),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "rounds": len(ratios),
    }


def timings(exe: Path, rounds: int = 10) -> dict:
    """{"chunk": {(window, dtype, isa): summary}, "fill": {(window, dtype, isa): summary with the
    memset and Philox ns an element}}, from ``rounds`` interleaved rounds."""
    out = subprocess.run(
        [str(exe), "time", str(rounds)], check=False, input=_windows_text(), capture_output=True, text=True
    )
    out.check_returncode()
    names = list(WINDOWS)
    chunk, fill, extra = {}, {}, {}
    for line in out.stdout.splitlines():
        kind, k, dtype, isa, _, *fig = line.split()
        key = (names[int(k)], dtype, isa)
        (chunk if kind == "chunk" else fill).setdefault(key, []).append((float(fig[0]), float(fig[1])))
        if kind == "fill":
            extra.setdefault(key, []).append((float(fig[2]), float(fig[3])))
    result = {"chunk": {k: _summary(v) for k, v in chunk.items()}, "fill": {}}
    for key, pairs in fill.items():
        memset, philox = zip(*extra[key], strict=True)
        result["fill"][key] = {
            **_summary(pairs),
            "memset_ns": statistics.median(memset),
            "philox_ns": statistics.median(philox),
        }
    return result


@functools.cache
def harness() -> Path:
    """The harness, built once per process (in a folder that lives as long as it)."""
    return build(Path(tempfile.mkdtemp(prefix="mantissa_cpu_")))
