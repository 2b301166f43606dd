"""``python -m tinit.tools.info`` runs anywhere and accounts for every backend."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tinit import dispatch
from tinit.tools import info


@pytest.fixture(scope="module")
def printed() -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "tinit.tools.info"], check=False, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"python -m tinit.tools.info failed:\n{proc.stderr}"
    return proc.stdout


def test_mentions_every_backend_and_state(printed):
    for name in dispatch.BACKENDS:
        assert f"  {name} " in printed, f"backend {name} missing from:\n{printed}"
    assert "available" in printed


def test_reports_the_build(printed):
    for key in ("tinit ", "torch ", "torch CUDA", "native extension", "triton:", "nvcc:", "CPU SIMD"):
        assert key in printed, f"{key!r} missing from:\n{printed}"
    assert torch.__version__ in printed


def test_reports_devices(printed):
    assert "devices" in printed and "cpu:" in printed
    if not torch.cuda.is_available():
        assert "cuda: none visible" in printed


def test_unavailable_backends_say_why():
    for name, entry in info.backend_info().items():
        assert entry["available"] == (entry["reason"] is None), name
        if not entry["available"]:
            assert entry["reason"], f"{name} is unavailable without a reason"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_cpu_only_machine_explains_cuda(printed):
    cuda_lines = printed.split("  cuda ", 1)[1].split("\n  triton", 1)[0]
    assert "why not" in cuda_lines or "cuda tensors: no" in cuda_lines, cuda_lines


_V3 = {"avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave", "abm"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}


@pytest.mark.parametrize(
    "flags,philox,transform,two_sided",
    [
        pytest.param(_V4, "AVX-512", "x86-64-v4", "AVX-512", id="v4"),
        pytest.param(_V3, "AVX2", "x86-64-v3", "AVX2", id="v3"),
        pytest.param({"avx2", "fma", "f16c"}, "AVX2", "default", "AVX2", id="avx2-fma-f16c-only"),
        pytest.param({"avx2", "fma"}, "AVX2", "default", "portable", id="avx2-without-f16c"),
        pytest.param({"avx512f", "avx2"}, "AVX-512", "default", "portable", id="avx512f-only"),
        pytest.param({"sse4_2"}, "scalar", "default", "portable", id="sse"),
        pytest.param(set(), "scalar", "default", "portable", id="none"),
    ],
)
def test_cpu_simd_level(flags, philox, transform, two_sided):
    want = {"philox": philox, "transform": transform, "two_sided": two_sided}
    assert info.cpu_simd_level(flags, portable=False) == want
    assert info.cpu_simd_level(flags, portable=True) == {**want, "two_sided": "portable"}


def test_cpu_simd_level_reads_tinit_cpu_portable(monkeypatch):
    monkeypatch.setenv("TINIT_CPU_PORTABLE", "1")
    assert info.cpu_simd_level(_V3)["two_sided"] == "portable"
    monkeypatch.setenv("TINIT_CPU_PORTABLE", "0")
    assert info.cpu_simd_level(_V3)["two_sided"] == "AVX2"


def test_cli_subcommand_prints_the_same_report(printed, capsys):
    from tinit.tools import cli

    assert cli.main(["info"]) == 0
    assert capsys.readouterr().out == printed
