"""Backend dispatch: declared capabilities, the auto order, explicit choices,
$TINIT_BACKEND, and errors that give every backend's reason.

Written for any machine: on a CPU-only one the GPU backends must refuse with
a reason naming the build or the device.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings

import pytest
import torch

import tinit
from tinit import dispatch, ops
from tinit.params import transform_constants

NAMES = ("cuda", "triton", "cpu", "torch")
CUDA_REFUSAL = re.compile(r"built without its CUDA kernels|runs on CUDA tensors|native extension not built")


@pytest.fixture(autouse=True)
def _no_backend_env(monkeypatch):
    monkeypatch.delenv("TINIT_BACKEND", raising=False)


def _disable(monkeypatch, *names: str) -> None:
    """Make the named backends report themselves not installed."""
    for name in names:
        backend = dispatch.BACKENDS[name]
        fake = dispatch.Backend(
            name, backend.fill, backend.devices, backend.dtypes, lambda name=name: f"{name} disabled by the test"
        )
        monkeypatch.setitem(dispatch.BACKENDS, name, fake)


def test_every_backend_declares_its_capability():
    assert set(dispatch.BACKENDS) == set(NAMES)
    probe = torch.empty(3)
    for name, backend in dispatch.BACKENDS.items():
        assert backend.name == name
        assert backend.dtypes and set(backend.dtypes) <= {torch.float32, torch.float64, torch.bfloat16, torch.float16}
        reason = backend.install_reason()
        assert reason is None or (isinstance(reason, str) and reason), name
        why = backend.why_not(probe)
        assert why is None or (isinstance(why, str) and why), name
    assert dispatch.BACKENDS["cuda"].devices == ("cuda",)
    assert dispatch.BACKENDS["cpu"].devices == ("cpu",)
    assert torch.float64 not in dispatch.BACKENDS["triton"].dtypes


def test_auto_order_per_device():
    assert dispatch.auto_order("cuda") == ("cuda", "triton", "torch")
    assert dispatch.auto_order("cpu") == ("cpu", "torch")
    assert dispatch.auto_order("meta") == ("torch",)


@pytest.mark.skipif(not ops.native_available(), reason="native extension not built")
def test_auto_picks_cpu_for_cpu_tensors():
    assert dispatch.select(torch.empty(10)).name == "cpu"
    assert dispatch.select(torch.empty(10, dtype=torch.bfloat16), "auto").name == "cpu"


def test_auto_never_picks_triton_for_cpu_tensors(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    _disable(monkeypatch, "cpu")
    monkeypatch.setattr(dispatch, "_warned_fallback", True)
    assert dispatch.select(torch.empty(10)).name == "torch"


def test_explicit_cuda_on_cpu_tensor_raises_with_reason():
    with pytest.raises(RuntimeError, match="tinit backend 'cuda' cannot fill") as info:
        dispatch.select(torch.empty(10), "cuda")
    assert CUDA_REFUSAL.search(str(info.value)), str(info.value)


def test_explicit_cuda_through_the_api_raises_before_writing():
    tensor = torch.zeros(16)
    with pytest.raises(RuntimeError, match=CUDA_REFUSAL):
        tinit.trunc_normal_at_(tensor, seed=1, backend="cuda")
    assert not tensor.any(), "the tensor changed before the error"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_cuda_reason_on_a_cpu_only_machine_names_the_build():
    """Without a GPU the reason is the build when the kernels are missing, else the tensor's device
    (a toolkit builds them against a CPU torch too)."""
    reason = dispatch.BACKENDS["cuda"].why_not(torch.empty(1))
    assert reason is not None
    if ops.has_kernel("trunc_normal_", "CUDA"):
        assert "runs on CUDA tensors, got device cpu" in reason, reason
    else:
        assert re.search(r"built without its CUDA kernels|native extension not built", reason), reason


def test_explicit_error_lists_every_backend():
    with pytest.raises(RuntimeError) as info:
        dispatch.select(torch.empty(10), "cuda")
    message = str(info.value)
    for name in NAMES:
        assert f"{name}:" in message or f"'{name}'" in message, f"{name} missing from: {message}"


def test_no_backend_lists_every_reason(monkeypatch):
    _disable(monkeypatch, *NAMES)
    with pytest.raises(RuntimeError, match="no tinit backend can fill") as info:
        dispatch.select(torch.empty(10))
    for name in NAMES:
        assert f"{name}: {name} disabled by the test" in str(info.value)


def test_unknown_name_raises():
    with pytest.raises(ValueError, match=r"unknown tinit backend 'nope'.*cpu"):
        dispatch.select(torch.empty(1), "nope")


def test_env_backend_replaces_auto(monkeypatch):
    monkeypatch.setenv("TINIT_BACKEND", "torch")
    assert dispatch.select(torch.empty(10)).name == "torch"
    values = tinit.trunc_normal_at_(torch.empty(64), seed=5)
    expected = torch.empty(64)
    dispatch.BACKENDS["torch"].fill(expected, 5, 0, 0, transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32))
    torch.testing.assert_close(values, expected, rtol=0, atol=0)


def test_explicit_argument_wins_over_env(monkeypatch):
    monkeypatch.setenv("TINIT_BACKEND", "cuda")
    assert dispatch.select(torch.empty(10), "torch").name == "torch"


def test_env_backend_that_cannot_run_raises(monkeypatch):
    monkeypatch.setenv("TINIT_BACKEND", "cuda")
    with pytest.raises(RuntimeError, match=CUDA_REFUSAL):
        dispatch.select(torch.empty(10))


def test_env_backend_unknown_raises(monkeypatch):
    monkeypatch.setenv("TINIT_BACKEND", "fastest")
    with pytest.raises(ValueError, match="unknown tinit backend 'fastest'"):
        dispatch.select(torch.empty(10))


def test_triton_refuses_cpu_tensors_outside_the_interpreter():
    """In a process without TRITON_INTERPRET (this session may run the interpreter), Triton refuses CPU tensors."""
    pytest.importorskip("triton")
    code = "import torch; from tinit import dispatch; print(dispatch.BACKENDS['triton'].why_not(torch.empty(4)))"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "TRITON_INTERPRET=1" in result.stdout, result.stdout


def test_triton_refuses_float64():
    reason = dispatch.BACKENDS["triton"].why_not(torch.empty(4, dtype=torch.float64))
    assert reason is not None


def test_fallback_warns_once(monkeypatch):
    _disable(monkeypatch, "cpu")
    monkeypatch.setattr(dispatch, "_warned_fallback", False)
    with pytest.warns(RuntimeWarning, match="slow pure-torch reference backend.*cpu disabled"):
        assert dispatch.select(torch.empty(4)).name == "torch"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dispatch.select(torch.empty(4)).name == "torch"
