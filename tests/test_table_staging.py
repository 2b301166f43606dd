"""The grouped table's pinned buffers (csrc/cuda/table_staging.h), without a GPU.

tests/table_staging_harness.cpp runs ``TableStaging`` and ``PinnedPool`` over the CUDA runtime stand-in of
tests/cuda_runtime_shim: an eager buffer is handed out again only once its copy's event completed; a buffer
captured in a CUDA graph stays the graph's until the graph is destroyed, whatever other calls take meanwhile;
a buffer whose copy failed after it was enqueued is never handed out again; one never copied comes back at
once; during a capture no event is queried, the calls a global-mode capture forbids run in relaxed mode and
the copies in the caller's mode. Built with the sanitizers where the compiler has them.

That the real runtime keeps these promises (the user object's destructor after the graph's last launch,
the copies captured as memcpy nodes) is tests/test_gpu.py's, on a GPU.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "table_staging_harness.cpp"
CXX = shutil.which("g++") or shutil.which("c++")
FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O1", "-pthread"]
SANITIZERS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]


def _build(exe: Path) -> None:
    includes = ["-I", str(ROOT / "tests" / "cuda_runtime_shim"), "-I", str(ROOT / "csrc" / "cuda")]
    base = [CXX, *FLAGS, *includes, str(HARNESS), "-o", str(exe)]
    proc = subprocess.run([*base, *SANITIZERS], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0 and "sanitize" in proc.stderr:
        proc = subprocess.run(base, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{' '.join(base)} failed:\n{proc.stderr}"


@pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH (g++ or c++) to build the staging harness")
def test_pinned_buffers_live_as_long_as_their_copies(tmp_path):
    exe = tmp_path / "table_staging_harness"
    _build(exe)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    assert proc.stdout.startswith("0 failures"), proc.stdout
