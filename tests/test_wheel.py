"""The checkout builds a wheel that works without the checkout.

The suite itself runs against the editable install, which reads the checkout,
so a file left out of the wheel (the extension, tinit.triton_kernels) or a
build that only works in place would pass there and fail for a user. Built as
the README says (the installed torch, no build isolation), unpacked outside
the checkout and imported from there.

Compiles the extension (about a minute on 2 cores): ``-m 'not wheel'`` skips it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import tinit

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parent.parent

# Run from outside the checkout; the wheel's tinit must give the checkout's values.
PROBE = """
import json, sys, torch, tinit
from tinit import _C  # noqa: F401
import tinit.triton_kernels
w = torch.empty(64)
tinit.trunc_normal_at_(w, 0.0, 1.0, -2.0, 2.0, seed=7, backend="cpu")
print(json.dumps({"file": tinit.__file__, "version": tinit.__version__, "values": w.tolist()}))
"""


def _source_version() -> str:
    return re.search(r'^__version__ = "([^"]+)"', (ROOT / "tinit" / "__init__.py").read_text(), re.MULTILINE).group(1)


def test_wheel_builds_and_imports_outside_the_checkout(tmp_path):
    src = tmp_path / "src"
    # A copy: a build in the checkout would write build/ and tinit.egg-info there
    # and could pick up its stale objects or its in-place _C.
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "*.egg-info", "*.so", "__pycache__", ".*_cache", ".hypothesis", ".benchmarks"
        ),
    )
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "--wheel-dir",
            str(wheels),
            str(src),
        ],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]

    (wheel,) = wheels.glob("tinit-*.whl")
    assert wheel.name.startswith(f"tinit-{_source_version()}-"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
        archive.extractall(tmp_path / "site")
    assert any(re.fullmatch(r"tinit/_C\..*\.so", n) for n in names), names
    assert "tinit/triton_kernels/trunc_normal.py" in names, names
    assert "tinit/tools/cli.py" in names and "tinit/tools/__init__.py" in names, names
    assert not any(n.startswith(("csrc/", "tests/", "bench/")) for n in names), names
    assert "tinit = tinit.tools.cli:main" in entry_points
    # torch stays out of the requirements, so installing the wheel never makes pip pick one.
    assert not re.search(r"^Requires-Dist: torch\b", metadata, re.MULTILINE), metadata

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], check=False, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
    )
    assert probe.returncode == 0, probe.stderr[-4000:]
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert Path(result["file"]).resolve().parent == (tmp_path / "site" / "tinit").resolve(), result["file"]
    assert result["version"] == tinit.__version__

    expected = torch.empty(64)
    tinit.trunc_normal_at_(expected, 0.0, 1.0, -2.0, 2.0, seed=7, backend="cpu")
    assert result["values"] == expected.tolist()
