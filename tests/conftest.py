"""Session-wide fixtures and hooks of the tinit tests; the helpers live in tests/helpers
(``from helpers import ...``).

The Triton interpreter is chosen once per pytest session, here, before any of tinit's Triton
kernels is created (triton decides at ``@triton.jit`` time): ``TRITON_INTERPRET`` as the caller
set it, else ``1`` when no CUDA GPU is visible (Triton then runs only interpreted, on CPU
tensors) and compiled kernels when one is. No module is reloaded to switch it; a test that
needs the other mode runs it in a subprocess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest

from tinit import dispatch

# As triton reads the variable (triton.knobs env_bool).
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on", "y")


def pytest_addoption(parser):
    parser.addoption(
        "--run-slow", action="store_true", default=False, help="also run tests marked slow (tensors of several GiB)"
    )
    parser.addoption(
        "--run-coverage-full",
        action="store_true",
        default=False,
        help="also run tests marked coverage_full (every causal-LM class of transformers, a few minutes)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a tensor of several GiB; runs only with --run-slow")
    config.addinivalue_line(
        "markers",
        "gpu: needs a CUDA GPU (test_gpu, the cuda and triton cases of the backend fixture); skipped without one",
    )
    config.addinivalue_line(
        "markers", "own_process: runs its Triton in a subprocess, so it suits either interpreter choice of the session"
    )


def pytest_collection_modifyitems(config, items):
    skips = {
        "slow": (config.getoption("--run-slow"), "needs --run-slow (allocates several GiB)"),
        "coverage_full": (
            config.getoption("--run-coverage-full"),
            "needs --run-coverage-full (measures every causal-LM class, a few minutes)",
        ),
    }
    for marker, (enabled, reason) in skips.items():
        if enabled:
            continue
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


@dataclass(frozen=True)
class BackendCase:
    """One backend of the ``backend`` fixture: the ``backend=`` name tinit takes and the device it fills.

    Attributes:
        id: the test id (``cpu``, ``torch``, ``triton-interpreter``, ``cuda``, ``triton``).
        name: the ``tinit.dispatch.BACKENDS`` key.
        device: the device its tensors live on (``"cpu"`` or ``"cuda"``).
        small: True where the backend is slow (the interpreter, the fp64 reference): tests keep sizes tiny.
    """

    id: str
    name: str
    device: str
    small: bool = False

    def __str__(self) -> str:
        return self.id

    def supports(self, dtype: torch.dtype) -> bool:
        """Whether this backend fills ``dtype`` (e.g. Triton has no float64)."""
        return dtype in dispatch.BACKENDS[self.name].dtypes

    def skip_unless(self, dtype: torch.dtype) -> None:
        """Skip the test, naming the backend's reason, when it cannot fill ``dtype``."""
        reason = dispatch.BACKENDS[self.name].why_not(torch.empty(1, dtype=dtype, device=self.device))
        if reason is not None:
            pytest.skip(f"{self.id} cannot fill {str(dtype).removeprefix('torch.')}: {reason}")


BACKEND_CASES = (
    BackendCase("cpu", "cpu", "cpu"),
    BackendCase("torch", "torch", "cpu", small=True),
    BackendCase("triton-interpreter", "triton", "cpu", small=True),
    BackendCase("cuda", "cuda", "cuda"),
    BackendCase("triton", "triton", "cuda"),
)


def backend_skip_reason(case: BackendCase) -> str | None:
    """Why ``case`` cannot run in this session (its device, the session's interpreter choice, or the
    backend's own ``why_not``), or None."""
    if case.device == "cuda" and not torch.cuda.is_available():
        return "no CUDA GPU visible"
    if case.id == "triton-interpreter" and not INTERPRETED:
        why = (
            "a GPU is visible"
            if "TRITON_INTERPRET" not in os.environ
            else f"TRITON_INTERPRET={os.environ['TRITON_INTERPRET']}"
        )
        return f"this session compiles Triton ({why}); run pytest with TRITON_INTERPRET=1 for the interpreter"
    if case.id == "triton" and INTERPRETED:
        return "this session runs Triton interpreted (TRITON_INTERPRET=1); compiled kernels need a session without it"
    return dispatch.BACKENDS[case.name].why_not(torch.empty(1, device=case.device))


# bench/gpu_check.sh sets TINIT_GPU_REQUIRE=1: there a GPU backend that cannot run is a failure, not a skip.
REQUIRE_GPU = os.environ.get("TINIT_GPU_REQUIRE", "0") == "1"


@pytest.fixture(
    params=[
        pytest.param(case, id=case.id, marks=[pytest.mark.gpu] if case.device == "cuda" else [])
        for case in BACKEND_CASES
    ]
)
def backend(request) -> BackendCase:
    """Every backend in turn (the CUDA ones marked ``gpu``); one this session cannot run skips with the
    backend's reason, or fails under ``TINIT_GPU_REQUIRE=1`` when it is a GPU backend on a GPU machine."""
    case = request.param
    reason = backend_skip_reason(case)
    if reason is not None:
        fail = REQUIRE_GPU and case.device == "cuda" and torch.cuda.is_available()
        (pytest.fail if fail else pytest.skip)(f"backend {case.id!r} unavailable: {reason}")
    return case


@pytest.fixture
def triton_interpreter() -> None:
    """Skip unless this session runs tinit's Triton kernels in the interpreter (see the module docstring)."""
    reason = backend_skip_reason(BACKEND_CASES[2])
    if reason is not None:
        pytest.skip(f"the Triton interpreter is unavailable: {reason}")
