"""The installed torch against what the build loads on (``tinit._torch_floor``), before ``tinit._C`` loads.

A stable-ABI extension (``_C.abi3.so``) loads on torch ``TORCH_FLOOR`` and later; one built against
torch's full C++ API only on the torch release a wheel records; a source build is not checked. A
refused torch leaves tinit importable, with the native backends unavailable and the reason, naming
both versions, where a missing extension's would be (``tinit.ops.native_load_error``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinit import _torch_floor, ops
from tinit._torch_floor import TORCH_FLOOR, torch_problem

ROOT = Path(__file__).resolve().parent.parent
ABI3 = "_C.abi3.so"
FULL_API = "_C.cpython-311-x86_64-linux-gnu.so"


@pytest.mark.parametrize(
    ("torch_version", "extension", "built_with", "named"),
    [
        pytest.param("2.9.1+cpu", ABI3, "2.13.0+cpu", ("2.9.1+cpu", TORCH_FLOOR), id="abi3_below_floor"),
        pytest.param("1.13.1", ABI3, None, ("1.13.1", TORCH_FLOOR), id="abi3_major_below"),
        pytest.param("2.12.1+cu126", FULL_API, "2.13.0+cpu", ("2.12.1+cu126", "2.13.0+cpu"), id="wheel_older_torch"),
        pytest.param("2.14.0", FULL_API, "2.13.0+cpu", ("2.14.0", "2.13.0+cpu"), id="wheel_newer_torch"),
    ],
)
def test_refused_torch_names_both_versions(torch_version, extension, built_with, named):
    problem = torch_problem(torch_version, extension, built_with)
    assert problem is not None
    for version in named:
        assert version in problem, problem


@pytest.mark.parametrize(
    ("torch_version", "extension", "built_with"),
    [
        pytest.param(f"{TORCH_FLOOR}.0", ABI3, "2.13.0+cpu", id="abi3_at_floor"),
        pytest.param(f"{TORCH_FLOOR}.0a0+git1234", ABI3, None, id="abi3_floor_prerelease"),
        pytest.param("3.0.0", ABI3, "2.13.0+cpu", id="abi3_later_major"),
        pytest.param("2.13.1+cu130", FULL_API, "2.13.0+cpu", id="wheel_same_release"),
        pytest.param("2.9.0", FULL_API, None, id="source_build"),
        pytest.param("2.9.0", None, "2.13.0+cpu", id="no_extension"),
    ],
)
def test_loadable_torch_passes(torch_version, extension, built_with):
    assert torch_problem(torch_version, extension, built_with) is None


def test_the_floor_is_a_release():
    assert re.fullmatch(r"\d+\.\d+", TORCH_FLOOR), TORCH_FLOOR
    assert _torch_floor._release(TORCH_FLOOR) <= (2, 13)


def test_setup_targets_the_floor():
    """setup.py's TORCH_TARGET_VERSION (the stable ABI it compiles against) is TORCH_FLOOR, one constant."""
    text = (ROOT / "setup.py").read_text()
    if "TORCH_TARGET_VERSION" not in text:
        pytest.skip("setup.py does not build on the stable ABI yet (no TORCH_TARGET_VERSION)")
    literal = re.search(r"TORCH_TARGET_VERSION=?\W*(0x[0-9a-fA-F]{16})", text)
    if literal is None:
        assert "TORCH_FLOOR" in text, "setup.py's TORCH_TARGET_VERSION neither is a literal nor comes from TORCH_FLOOR"
        return
    value = int(literal.group(1), 16)
    assert (value >> 56, (value >> 48) & 0xFF) == _torch_floor._release(TORCH_FLOOR), literal.group(0)


# A stable-ABI wheel built against torch 2.13.0 (its build record), loaded by a torch that says it is
# 2.10.1, below the floor.
REFUSED = """
import json, sys, types
import torch
torch.__version__ = "2.10.1"
sys.modules["tinit._build"] = types.SimpleNamespace(VARIANT="cpu", CUDA=None, TORCH="2.13.0+cpu")
import tinit
from tinit import ops
from tinit.tools.info import report
w = torch.empty(8)
tinit.trunc_normal_at_(w, 0.0, 1.0, -2.0, 2.0, seed=1)
print(json.dumps({"native": ops.native_available(), "error": ops.native_load_error(), "report": report(),
                  "hint": ops.BUILD_HINT}))
"""


@pytest.mark.skipif(not ops.native_available(), reason=f"native extension not built: {ops.native_load_error()}")
def test_a_refused_torch_leaves_the_torch_backend():
    """The extension is not loaded, the reason names both versions, and a fill still works (with the
    pure-torch backend's warning)."""
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", REFUSED], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert not result["native"]
    assert "2.10.1" in result["error"] and f">= {TORCH_FLOOR}" in result["error"], result["error"]
    assert result["error"] in result["report"]
    assert result["hint"].startswith("upgrade torch"), result["hint"]  # rebuilding would not help
    assert "torch" in done.stderr.lower(), "the fallback to the torch backend was silent"
