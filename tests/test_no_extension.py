"""Without the native extension: the install fails in one line naming the cause and
``TINIT_NO_EXTENSION=1``; an install without it says so in ``tinit info`` and warns at the user's
call, and its pure-torch values are the native ones within the reference backend's documented ulp."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import assert_within_ulp

import tinit

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("cxx", "cause"), [("/nonexistent/g++", "is not on PATH"), ("false", "cannot compile C++17")])
def test_a_missing_or_broken_compiler_fails_in_one_line(tmp_path, cxx, cause):
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "csrc", tmp_path / "csrc")
    (tmp_path / "tinit").mkdir()  # setup.py reads the torch floor from tinit._torch_floor
    for name in ("__init__.py", "_torch_floor.py"):  # and pyproject reads tinit.__version__
        shutil.copy(ROOT / "tinit" / name, tmp_path / "tinit")
    env = {"PATH": "/usr/bin:/bin", "CXX": cxx, "TINIT_NO_CUDA": "1", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tinit setup: cannot build the native extension: ") and cause in last, done.stderr
    assert "TINIT_NO_EXTENSION=1 pip install --no-build-isolation ." in last
    assert not list(tmp_path.rglob("*.o"))  # refused before compiling anything


PROBE = """
import sys, warnings
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]  # this copy, not the checkout
import torch, tinit
from tinit.tools import info
print(tinit.__file__)
print(info.report())
w = torch.empty(4099)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tinit.trunc_normal_at_(w, 0.0, 0.02, -0.04, 0.04, seed=5, stream=7, offset=3)  # the user's line
print("WARNING", caught[0].filename, caught[0].lineno, caught[0].category.__name__)
torch.save(w, sys.argv[1])
"""


def test_an_install_without_the_extension_says_so_and_points_at_the_call(tmp_path):
    shutil.copytree(ROOT / "tinit", tmp_path / "tinit", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out = subprocess.run(
        [sys.executable, str(probe), str(tmp_path / "w.pt")], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[0] == str(tmp_path / "tinit" / "__init__.py")
    assert "native extension: missing: tinit was installed without its native extension (TINIT_NO_EXTENSION=1" in out
    assert "circular import" not in out
    line = next(i for i, text in enumerate(PROBE.splitlines()) if text.endswith("# the user's line")) + 1
    assert f"WARNING {probe} {line} RuntimeWarning" in out
    mine = torch.load(tmp_path / "w.pt")
    if not tinit.ops.native_available():
        pytest.skip("the native extension is not built here: nothing to compare the fallback's values with")
    native = torch.empty(4099)
    tinit.trunc_normal_at_(native, 0.0, 0.02, -0.04, 0.04, seed=5, stream=7, offset=3)
    # the torch backend's documented accuracy (docs/stream.md): within 2 fp32 ulp of max(|x|, std)
    assert_within_ulp(
        mine,
        native.double().numpy(),
        scale=0.02,
        dtype=torch.float32,
        max_ulp=2.0,
        what="fallback vs native",
    )
