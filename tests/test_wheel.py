"""The wheels of scripts/build_wheels.sh work without the checkout, a compiler or a build.

The suite itself runs against the editable install, which reads the checkout, so a file left out
of the wheel (the extension, tinit.triton_kernels) or a build that only works in place would pass
there and fail for a user.

Unmarked, and quick: the script's argument handling, which refuses a bad argument before building.
Marked ``wheel`` (a build of the CPU wheel, about a minute on 2 cores, and a fresh venv with torch
in it; ``-m 'not wheel'`` skips them): the wheel's tags and contents, then the wheel installed
into a fresh venv (the newest pip, the torch this suite runs on, a PATH that holds no compiler),
imported from outside the checkout, and the known-answer and stream-contract tests run against
the installed package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

import tinit

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "build_wheels.sh"
# The tests run against the installed wheel: the Philox known answers, the stream digests of every
# mode and dtype, and the stream contract (chunking, views, seeds) on the native CPU backend. The
# files they read travel with them.
INSTALLED_TESTS = ("test_philox.py", "test_stream_version.py", "test_stream_contract.py")
TEST_SUPPORT = ("conftest.py", "numpy_philox.py", "helpers", "data")


def _script(*args: str, out: Path | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    command = ["bash", str(SCRIPT), *args] + (["--out", str(out)] if out else [])
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def test_help_names_every_option():
    done = _script("--help")
    assert done.returncode == 0, done.stderr
    for option in ("--cpu", "--cuda 12|13", "--arch", "--out"):
        assert option in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--cuda", "11"), "--cuda takes 12 or 13, not '11'", id="cuda11"),
        pytest.param(("--cuda",), "--cuda needs a CUDA major version", id="cuda_without_value"),
        pytest.param(("--arch", "riscv64"), "--arch takes x86_64 or aarch64, not 'riscv64'", id="arch"),
        pytest.param(("--arch", "aarch64", "--cuda", "13"), "CPU wheel only", id="aarch64_cuda"),
        pytest.param(("--wheel",), "unknown argument '--wheel'", id="unknown"),
    ],
)
def test_bad_arguments_are_refused_before_building(tmp_path, args, message):
    done = _script(*args, out=tmp_path / "out", timeout=30)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert not (tmp_path / "out").exists(), "the script created its output before refusing"


# ------------------------------------------------------------------------------ the built CPU wheel


@pytest.fixture(scope="module")
def cpu_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    done = _script("--cpu", out=out, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (wheel,) = (out / "cpu").glob("tinit-*.whl")
    return wheel


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def _read(wheel: Path, suffix: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return next(archive.read(n).decode() for n in archive.namelist() if n.endswith(suffix))


@pytest.mark.wheel
def test_cpu_wheel_name_and_tags(cpu_wheel):
    """tinit-<version>-<python>-<abi>-manylinux_2_<glibc>_<machine>.whl, the version without a local label."""
    pattern = r"tinit-([^-]+)-(cp3\d+)-(abi3|cp3\d+)-manylinux_2_(\d+)_(x86_64|aarch64)\.whl"
    found = re.fullmatch(pattern, cpu_wheel.name)
    assert found, cpu_wheel.name
    assert found.group(1) == tinit.__version__
    assert "Root-Is-Purelib: false" in _read(cpu_wheel, ".dist-info/WHEEL")


@pytest.mark.wheel
def test_cpu_wheel_is_abi3(cpu_wheel):
    """One wheel for every Python from 3.10 on, once the extension is built on the limited API."""
    (extension,) = [n for n in _names(cpu_wheel) if re.fullmatch(r"tinit/_C\.[\w.-]*so", n)]
    if not extension.endswith(".abi3.so"):
        pytest.xfail(f"the extension is not yet built on the limited API ({extension}): one wheel per Python")
    assert "-cp310-abi3-" in cpu_wheel.name, cpu_wheel.name


@pytest.mark.wheel
def test_cpu_wheel_contents(cpu_wheel):
    """The extension, every Triton kernel as plain Python, the build record; no tests or sources."""
    names = set(_names(cpu_wheel))
    assert any(re.fullmatch(r"tinit/_C\.[\w.-]*so", n) for n in names), sorted(names)
    kernels = {f"tinit/triton_kernels/{p.name}" for p in (ROOT / "triton_kernels").glob("*.py")}
    assert kernels <= names, sorted(kernels - names)
    assert not [n for n in names if n.startswith(("tests/", "bench/", "csrc/", "scripts/")) or "/tests/" in n]
    record = _read(cpu_wheel, "tinit/_build.py")
    assert "VARIANT = 'cpu'" in record and f"TORCH: str | None = {torch.__version__!r}" in record, record
    assert "tinit = tinit.tools.cli:main" in _read(cpu_wheel, ".dist-info/entry_points.txt")


@pytest.mark.wheel
def test_cpu_wheel_requires_no_torch(cpu_wheel):
    """torch stays out of the requirements, so installing the wheel never makes pip pick one."""
    metadata = _read(cpu_wheel, ".dist-info/METADATA")
    assert not re.search(r"^Requires-Dist: torch\b", metadata, re.MULTILINE), metadata


# ------------------------------------------------------------------- a fresh venv without a compiler

PROBE = """
import json, torch, tinit, tinit.triton_kernels
from tinit import ops
from tinit.tools.info import build_info
w = torch.empty(64)
tinit.trunc_normal_at_(w, 0.0, 1.0, -2.0, 2.0, seed=7, backend="cpu")
info = build_info()
print(json.dumps({"file": tinit.__file__, "native": ops.native_available(), "error": ops.native_load_error(),
                  "variant": info["variant"], "isa": info["cpu_isa"]["chosen"], "finite": bool(w.isfinite().all()),
                  "hint": ops.BUILD_HINT}))
"""


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _fresh_venv(where: Path) -> Path:
    """A venv with the newest pip, pytest and this suite's torch (pinned to its exact build, so
    that pip finds it where scripts/setup.sh's pin does or fails: it never resolves another)."""
    _run([sys.executable, "-m", "venv", str(where)], timeout=300)
    python = where / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    _run([*pip, "--upgrade", "pip"], timeout=600)
    torch_pin = f"torch=={torch.__version__}"
    done = subprocess.run(
        [*pip, "--only-binary=:all:", torch_pin, "pytest"], capture_output=True, text=True, timeout=1200, check=False
    )
    if done.returncode != 0 and "No matching distribution found for torch" in done.stderr:
        pytest.skip(f"pip finds no {torch_pin} wheel here (scripts/setup.sh's torch comes from a local wheel)")
    assert done.returncode == 0, done.stderr[-3000:]
    return python


def _no_compiler_env(venv_bin: Path) -> dict[str, str]:
    """The environment without a compiler: PATH is the venv's bin alone, no CC or CXX; pip's
    settings (its index and local wheels) stay."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in keep}
    env["PATH"] = str(venv_bin)
    assert not any(shutil.which(c, path=env["PATH"]) for c in ("cc", "c++", "gcc", "g++", "nvcc"))
    return env


def _copy_installed_tests(dest: Path) -> None:
    """The installed-package tests and what they read, laid out as in the checkout, no tinit beside them."""
    (dest / "tests").mkdir(parents=True)
    for name in INSTALLED_TESTS + TEST_SUPPORT:
        source = ROOT / "tests" / name
        copy = shutil.copytree if source.is_dir() else shutil.copy2
        copy(source, dest / "tests" / name)
    (dest / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "gen_stream_digests.py", dest / "scripts")
    (dest / "pytest.ini").write_text("[pytest]\npythonpath = tests\n")


@pytest.mark.wheel
def test_fresh_venv_installs_and_passes_the_known_answers(cpu_wheel, tmp_path, capsys):
    python = _fresh_venv(tmp_path / "venv")
    env = _no_compiler_env(python.parent)
    suite = tmp_path / "suite"
    _copy_installed_tests(suite)

    start = time.perf_counter()
    _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(cpu_wheel)], env=env, cwd=suite)
    probe = json.loads(_run([str(python), "-c", PROBE], env=env, cwd=suite).stdout.strip().splitlines()[-1])
    tests = _run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *(f"tests/{t}" for t in INSTALLED_TESTS)],
        env=env,
        cwd=suite,
        timeout=1200,
    )
    seconds = time.perf_counter() - start

    site = Path(probe["file"]).resolve().parent.parent
    assert site.name == "site-packages" and (tmp_path / "venv").resolve() in site.parents, probe["file"]
    assert probe["native"], f"the installed wheel's extension does not load: {probe['error']}"
    assert probe["variant"] == "cpu" and probe["isa"] and probe["finite"], probe
    assert "prebuilt cpu wheel" in probe["hint"], probe["hint"]  # not the checkout's build command
    summary = tests.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, tests.stdout[-3000:]
    with capsys.disabled():
        print(f"\nfresh venv: wheel install + import + {len(INSTALLED_TESTS)} test files: {seconds:.1f} s ({summary})")


# ------------------------------------------------------------------------- the other variants' builds


def _elf_header(wheel: Path) -> tuple[str, bytes]:
    """The extension's name in the wheel and its first 20 bytes (e_machine is at offset 18)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if re.fullmatch(r"tinit/_C\.[\w.-]*so", n)]
        with archive.open(name) as extension:
            return name, extension.read(20)


@pytest.mark.wheel
@pytest.mark.skipif(not shutil.which("aarch64-linux-gnu-g++"), reason="no aarch64-linux-gnu-g++ (.ci/run installs it)")
def test_aarch64_cpu_wheel_cross_builds(tmp_path):
    """The CPU wheel for aarch64 Linux, cross-compiled here: an aarch64 extension, the manylinux
    aarch64 tag, and the same NEEDED torch libraries as a native build."""
    done = _script("--cpu", "--arch", "aarch64", out=tmp_path, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (wheel,) = (tmp_path / "cpu").glob("tinit-*.whl")
    assert re.search(r"-manylinux_2_\d+_aarch64\.whl$", wheel.name), wheel.name
    name, header = _elf_header(wheel)
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 183, f"{name} is not aarch64"
    assert name.endswith((".abi3.so", "-aarch64-linux-gnu.so")), name
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(name, tmp_path / "x")
    dynamic = _run(["readelf", "-d", str(tmp_path / "x" / name)]).stdout
    # As the native stable-ABI build: torch's C shim library only, never libtorch_python.
    assert "[libtorch_cpu.so]" in dynamic and "libtorch_python" not in dynamic, dynamic


@pytest.mark.wheel
def test_cu13_wheel_builds_against_this_torch(tmp_path):
    """The CUDA 13 wheel (sm_80, sm_90 and PTX): built with nvcc 13 and the (CPU) torch installed here;
    its version and build record name the variant; it installs and imports on this machine, which has
    no GPU, with its CUDA kernels registered."""
    done = _script("--cuda", "13", out=tmp_path, timeout=1800)
    skipped = re.search(r"cu13: (skipped: .*|no CUDA 13 toolkit found.*)", done.stderr)
    if skipped:
        pytest.skip(skipped.group(1))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (wheel,) = (tmp_path / "cu13").glob("tinit-*.whl")
    assert wheel.name.startswith(f"tinit-{tinit.__version__}+cu13-"), wheel.name
    record = _read(wheel, "tinit/_build.py")
    assert "VARIANT = 'cu13'" in record and "CUDA: str | None = '13." in record, record
    name, _ = _elf_header(wheel)
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(name, tmp_path / "x")
    assert ".nv_fatbin" in _run(["readelf", "-S", str(tmp_path / "x" / name)]).stdout, "no device code"
    dynamic = _run(["readelf", "-d", str(tmp_path / "x" / name)]).stdout
    # The CUDA runtime is static and torch's CUDA libraries are not linked: the wheel loads into a
    # CPU torch as into a CUDA one, with or without a GPU.
    assert not re.search(r"\[lib(cudart|torch_cuda|c10_cuda)", dynamic), dynamic

    # Installed into a fresh venv beside this (CPU) torch, no GPU, no compiler: it imports, its CUDA
    # kernels register, and the CPU ops fill.
    python = _fresh_venv(tmp_path / "venv")
    env = _no_compiler_env(python.parent)
    _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheel)], env=env, cwd=tmp_path)
    probe = json.loads(_run([str(python), "-c", PROBE], env=env, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert probe["native"] and probe["variant"] == "cu13" and probe["finite"], probe
    cuda = _run(
        [str(python), "-c", "import torch, tinit.ops; print(tinit.ops.has_kernel('trunc_normal_grouped_', 'CUDA'))"],
        env=env,
        cwd=tmp_path,
    )
    assert cuda.stdout.strip().splitlines()[-1] == "True", cuda.stdout + cuda.stderr
