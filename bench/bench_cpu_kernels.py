"""Per-kernel cost of the CPU's AVX-512 and AVX2 paths, without torch or threads in the way.

    python bench/bench_cpu_kernels.py

Compiles ``bench/bench_cpu_kernels.cpp`` with the kernels' sources
(``philox_blocks_avx512`` / ``philox_blocks_avx2``, ``two_sided_avx512`` /
``two_sided_avx2``; each ISA the CPU has is measured) with g++ and the
extension's flags that matter here (-O3 -ffp-contract=off), feeds it the
packed constants of a few windows (``tinit.params.transform_constants``) and
prints ns per word / element on one thread, a 1024-element chunk in L1. The
end-to-end figures, side by side with torch, are bench/bench_cpu_modes.py's.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.utils.cpp_extension as cpp

from tinit.params import transform_constants

ROOT = Path(__file__).resolve().parent.parent
WINDOWS = {
    "N(0,1) on [-2, 2]": (0.0, 1.0, -2.0, 2.0),
    "default window (std 0.02, a=-2, b=2)": (0.0, 0.02, -2.0, 2.0),
    "untruncated": (0.0, 1.0, -math.inf, math.inf),
    "precise (std 1e-35 on +-2 sigma)": (0.0, 1e-35, -2e-35, 2e-35),
    "precise, 7 sigma below the mean: every lane's row gathered": (1.0, 1 / 7, -math.inf, 0.0),
}


def main() -> int:
    compiler = shutil.which("g++")
    if compiler is None:
        print("no g++ on PATH", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "bench_cpu_kernels"
        includes = [f"-I{p}" for p in (ROOT / "csrc" / "include", ROOT / "csrc", *cpp.include_paths())]
        subprocess.run(
            [
                compiler,
                "-O3",
                "-std=c++17",
                "-ffp-contract=off",
                "-w",
                *includes,
                str(ROOT / "bench" / "bench_cpu_kernels.cpp"),
                str(ROOT / "csrc" / "cpu" / "transform_avx512.cpp"),
                str(ROOT / "csrc" / "cpu" / "transform_avx2.cpp"),
                str(ROOT / "csrc" / "cpu" / "isa.cpp"),
                "-o",
                str(exe),
            ],
            check=True,
        )
        lines = "".join(
            " ".join(repr(float(c)) for c in transform_constants(*w, torch.float32)) + "\n" for w in WINDOWS.values()
        )
        result = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True)
    names = list(WINDOWS)
    for line in result.stdout.splitlines():
        if line.startswith("window "):
            head, figures = line.split(":", 1)
            index, entry = head.split(" ", 2)[1:]
            line = f"{names[int(index)]}, {entry}: {figures.strip()}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
