"""``python -m tinit.tools.info`` runs anywhere and accounts for every backend."""

from __future__ import annotations

import os
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
    for key in ("tinit ", "torch ", "torch CUDA", "native extension", "triton:", "nvcc:", "CPU engine"):
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
    # Kernels built (a toolkit builds them against a CPU torch too): the reason is the tensors' device.
    assert (
        "why not" in cuda_lines
        or "cuda tensors: no" in cuda_lines
        or "runs on CUDA tensors, got device cpu" in cuda_lines
    ), cuda_lines


def _flags() -> set[str]:
    return info.cpu_flags()


@pytest.mark.skipif(not info.ops.native_available(), reason="native extension not built")
def test_cpu_engine_is_the_best_this_cpu_runs(printed):
    """The engines the extension reports, against /proc/cpuinfo's flags (an independent reading)."""
    flags = _flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo flags here")
    v3 = {"avx2", "bmi1", "bmi2", "f16c", "fma", "movbe"} <= flags and ("abm" in flags or "lzcnt" in flags)
    v4 = v3 and {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= flags
    expected = ["scalar"] + (["avx2"] if v3 else []) + (["avx512"] if v4 else [])
    engine = info.cpu_engine()
    assert engine["available"] == expected
    if "TINIT_CPU_ISA" not in os.environ:
        assert engine["chosen"] == expected[-1]
    line = next(line for line in printed.splitlines() if "CPU engine:" in line)
    assert line.strip().startswith(f"CPU engine: {engine['chosen']}")
    assert f"(available: {', '.join(expected)};" in line
    hand = engine["chosen"] in ("avx2", "avx512") and os.environ.get("TINIT_CPU_PORTABLE") != "1"
    assert ("two-sided entries hand-vectorised" in line) == hand


def test_cli_subcommand_prints_the_same_report(printed, capsys):
    from tinit.tools import cli

    assert cli.main(["info"]) == 0
    assert capsys.readouterr().out == printed
