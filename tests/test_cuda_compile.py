"""The CUDA kernels build with the nvcc on PATH, without a GPU or a CUDA torch.

- csrc/cuda/trunc_normal_kernel.cu compiles for sm_90 and sm_80 (one nvcc call,
  the flags of the extension build: --fmad=false, -O3, torch's defines).
- The launcher header is plain C.
- The kernel's per-thread code (fill_blocks / philox_fill_blocks), run on the
  host by tests/cuda_host_harness.cu as an emulated grid-stride launch, writes
  exactly what the CPU op writes: every offset % 4, edge blocks, misaligned
  outputs (scalar stores), the raw words past a 2^32-block boundary, and
  nothing outside the tensor. The device arithmetic itself needs a GPU
  (tests/test_gpu.py).

Skipped, saying so, only where no nvcc exists.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tinit import ops
from tinit.params import transform_constants

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "csrc" / "cuda" / "trunc_normal_kernel.cu"
HEADER = ROOT / "csrc" / "cuda" / "trunc_normal_kernel.h"
HARNESS = ROOT / "tests" / "cuda_host_harness.cu"
NVCC = shutil.which("nvcc")
# The defines torch.utils.cpp_extension adds to every nvcc call of the extension.
TORCH_NVCC_DEFINES = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                      "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                      "--expt-relaxed-constexpr"]
COMMON = ["-I", str(ROOT / "csrc" / "include"), "--fmad=false", "-O3", "-std=c++17"]
TIMEOUT_S = 300

pytestmark = pytest.mark.skipif(
    NVCC is None, reason="no nvcc on PATH: the CUDA compile checks need the CUDA toolkit (nvcc)")


def _run(cmd: list[str], what: str) -> subprocess.CompletedProcess:
    """Run a compiler; fail with its command line and stderr when it fails."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=TIMEOUT_S)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, (
        f"{what} failed (exit {proc.returncode}, {elapsed:.1f} s):\n  {' '.join(cmd)}\n"
        f"--- stderr ---\n{proc.stderr}\n--- stdout ---\n{proc.stdout}"
    )
    return proc


def _cuda_include() -> Path:
    """The include folder of the toolkit that the nvcc on PATH belongs to."""
    for root in (Path(NVCC).parent.parent, Path(os.path.realpath(NVCC)).parent.parent,
                 Path("/usr/local/cuda")):
        if (root / "include" / "cuda_runtime_api.h").exists():
            return root / "include"
    pytest.skip(f"no include/cuda_runtime_api.h beside {NVCC}")


def test_kernel_compiles_for_sm90_and_sm80(tmp_path):
    obj = tmp_path / "trunc_normal_kernel.o"
    _run([NVCC, "-c", str(KERNEL), "-o", str(obj), *COMMON, *TORCH_NVCC_DEFINES,
          "-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_80,code=sm_80"],
         "nvcc -c trunc_normal_kernel.cu for sm_90 and sm_80")
    assert obj.stat().st_size > 0


def test_launcher_header_is_plain_c(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler on PATH")
    source = tmp_path / "use_header.c"
    source.write_text('#include "trunc_normal_kernel.h"\n'
                      "int main(void) { TinitTransformParams p = {{0}}; (void)p;"
                      " return TINIT_FLOAT32 + (int)TINIT_FLAG_COMPUTE_ONLY - 1; }\n")
    _run([cc, "-std=c99", "-Wall", "-Werror", "-fsyntax-only", "-I", str(HEADER.parent),
          "-I", str(_cuda_include()), str(source)], "cc -std=c99 on trunc_normal_kernel.h")


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("harness") / "cuda_host_harness"
    _run([NVCC, str(HARNESS), "-o", str(exe), *COMMON, "-I", str(KERNEL.parent),
          "-arch=sm_90", "-Xcompiler", "-ffp-contract=off"], "nvcc cuda_host_harness.cu")
    return exe


DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.bfloat16: 2, torch.float16: 3}
WINDOWS = {
    "central": (0.0, 1.0, -2.0, 2.0),
    "two_sided": (0.0, 1.0, -4.0, 4.0),
    "far": (0.0, 1.0, -math.inf, math.inf),
    "tail": (0.0, 1.0, -math.inf, -15.0),
    "gpt2": (0.0, 0.02, -0.04, 0.04),
}
# (window, dtype, numel, offset, shift): shift misaligns the output by elements.
CASES = [
    pytest.param("central", torch.float32, 1000, 0, 0, id="f32-central-aligned"),
    pytest.param("central", torch.float32, 1001, 1, 0, id="f32-central-offset1"),
    pytest.param("central", torch.float32, 1002, 2, 1, id="f32-central-offset2-shift1"),
    pytest.param("central", torch.float32, 1003, 3, 3, id="f32-central-offset3-shift3"),
    pytest.param("central", torch.float32, 5, 1, 0, id="f32-central-offset1-shift1-n5"),
    pytest.param("central", torch.float32, 3, 2, 0, id="f32-one-block-inside"),
    pytest.param("central", torch.float32, 1, 3, 0, id="f32-n1-offset3"),
    pytest.param("two_sided", torch.float32, 517, 2**40 + 2, 0, id="f32-two-sided-offset2^40+2"),
    pytest.param("far", torch.float32, 257, 7, 2, id="f32-far-offset7"),
    pytest.param("tail", torch.float32, 129, 0, 0, id="f32-tail"),
    pytest.param("gpt2", torch.bfloat16, 1000, 0, 0, id="bf16-gpt2-aligned"),
    pytest.param("gpt2", torch.bfloat16, 1001, 2, 0, id="bf16-gpt2-offset2"),
    pytest.param("gpt2", torch.bfloat16, 1003, 3, 1, id="bf16-gpt2-offset3-shift1"),
    pytest.param("central", torch.float16, 999, 1, 2, id="f16-central-offset1-shift2"),
    pytest.param("far", torch.float16, 64, 0, 0, id="f16-far"),
    pytest.param("two_sided", torch.float64, 513, 3, 0, id="f64-two-sided-offset3"),
    pytest.param("tail", torch.float64, 100, 0, 1, id="f64-tail-shift1"),
]


def _harness_run(exe: Path, kind: str, dtype_code: int, numel: int, seed: int, stream: int,
                 offset: int, shift: int, threads: int, constants=()) -> bytes:
    cmd = [str(exe), kind, str(dtype_code), str(numel), str(seed), str(stream), str(offset),
           str(shift), str(threads), *(repr(float(c)) for c in constants)]
    proc = subprocess.run(cmd, check=False, capture_output=True, timeout=120)
    assert proc.returncode != 2, f"{' '.join(cmd)}: wrote outside the output tensor"
    assert proc.returncode == 0, f"{' '.join(cmd)}: exit {proc.returncode}"
    return proc.stdout


def _assert_same_bits(got: bytes, want: torch.Tensor, what: str) -> None:
    want_bytes = want.contiguous().view(torch.uint8).numpy().tobytes()
    assert len(got) == len(want_bytes), f"{what}: {len(got)} bytes, expected {len(want_bytes)}"
    if got != want_bytes:
        size = want.element_size()
        a = np.frombuffer(got, dtype=np.uint8).reshape(-1, size)
        b = np.frombuffer(want_bytes, dtype=np.uint8).reshape(-1, size)
        bad = np.nonzero((a != b).any(axis=1))[0]
        got_t = torch.frombuffer(bytearray(got), dtype=want.dtype)
        raise AssertionError(f"{what}: {bad.size} of {want.numel()} elements differ; first at {bad[0]}: "
                             f"got {got_t[bad[0]].item()!r}, CPU op {want[bad[0]].item()!r}")


needs_native = pytest.mark.skipif(not ops.native_available(),
                                  reason=f"native extension not built: {ops.native_load_error()}")


@needs_native
@pytest.mark.parametrize("window,dtype,numel,offset,shift", CASES)
def test_host_run_of_kernel_matches_cpu_op(harness, window, dtype, numel, offset, shift):
    constants = transform_constants(*WINDOWS[window], dtype)
    seed, stream = 2**63 + 12345, 2**33 + 7
    got = _harness_run(harness, "values", DTYPE_CODES[dtype], numel, seed, stream, offset, shift,
                       threads=5, constants=constants)
    want = torch.empty(numel, dtype=dtype)
    ops.trunc_normal_native(want, seed, stream, offset, constants)
    _assert_same_bits(got, want, f"host run of the CUDA kernel code, {window} {dtype}, offset {offset}")


@needs_native
@pytest.mark.parametrize("numel,offset,shift", [
    pytest.param(1030, 0, 0, id="aligned"),
    pytest.param(1031, 3, 1, id="offset3-shift1"),
    pytest.param(40, 2**34 - 17, 0, id="across-2^32-blocks"),
])
def test_host_run_of_words_kernel_matches_cpu_op(harness, numel, offset, shift):
    got = _harness_run(harness, "words", 0, numel, 99, 2**62 + 5, offset, shift, threads=3)
    want = torch.empty(numel, dtype=torch.int32)
    torch.ops.tinit.philox_(want, 99, ops.as_int64(2**62 + 5), offset)
    _assert_same_bits(got, want, f"host run of the words kernel code, offset {offset}")


def test_host_run_compute_only_stores_nothing(harness):
    constants = transform_constants(*WINDOWS["central"], torch.float32)
    got = _harness_run(harness, "compute", 0, 1000, 1, 2, 3, 0, threads=4, constants=constants)
    assert got == bytes([0xA5]) * 4000, "compute-only changed the output"
