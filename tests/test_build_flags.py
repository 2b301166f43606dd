"""setup.py's build flags per target, and every torch-free CPU kernel source cross-compiled.

setup.py's ``cxx_flags(target_machine)`` gives x86-only options (``-mprefer-vector-width=512``)
to x86 compilers only: GCC for aarch64, s390x and ppc64le rejects them, and the same list
reaches the CUDA bindings of a GH200 build. Each foreign target is built with Debian's cross
g++ (``g++-aarch64-linux-gnu``, ``g++-s390x-linux-gnu``, ``g++-powerpc64le-linux-gnu``; .ci/run
installs them), skipped with the reason where that compiler is absent.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOREIGN = ["aarch64-linux-gnu", "s390x-linux-gnu", "powerpc64le-linux-gnu"]


def _setup_module():
    """setup.py imported as a module: its lists and cxx_flags, without running setup()."""
    spec = importlib.util.spec_from_file_location("tinit_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = _setup_module()


def _cross_cxx(target: str) -> str:
    cxx = shutil.which(f"{target}-g++")
    if cxx is None:
        pytest.skip(f"no {target}-g++ on PATH (apt-get install g++-{target})")
    return cxx


def test_import_builds_nothing():
    assert not hasattr(SETUP, "ext_modules"), "importing setup.py ran _extensions()"
    assert set(SETUP.CPU_KERNEL_SOURCES) == {
        "csrc/cpu/isa.cpp",
        "csrc/cpu/stream_words.cpp",
        "csrc/cpu/transform_kernels.cpp",
        "csrc/cpu/transform_avx2.cpp",
        "csrc/cpu/transform_avx512.cpp",
    }
    for source in SETUP.CPU_KERNEL_SOURCES + SETUP.CPU_OP_SOURCES:
        assert (ROOT / source).is_file(), source


def test_every_cpu_source_is_built():
    """Every .cpp of csrc/ outside csrc/cuda/ is in one of the two lists, once."""
    listed = SETUP.CPU_KERNEL_SOURCES + SETUP.CPU_OP_SOURCES
    found = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "csrc").rglob("*.cpp") if "cuda" not in p.parts)
    assert sorted(listed) == found


@pytest.mark.parametrize(
    "machine,x86",
    [
        ("x86_64-linux-gnu", True),
        ("x86_64-pc-linux-gnu", True),
        ("x86_64", True),
        ("AMD64", True),
        ("aarch64-linux-gnu", False),
        ("arm64", False),
        ("s390x-linux-gnu", False),
        ("powerpc64le-linux-gnu", False),
        ("ppc64le", False),
    ],
)
def test_x86_options_only_for_x86(machine, x86):
    flags = SETUP.cxx_flags(machine)
    assert ("-mprefer-vector-width=512" in flags) is x86
    assert not [f for f in flags if f.startswith("-m")] or x86, flags
    # The flags every target keeps: contraction off, C++17; no OpenMP (torch::stable::parallel_for
    # runs torch's own threads).
    for flag in ("-ffp-contract=off", "-std=c++17", "-O3"):
        assert flag in flags, (machine, flag)
    assert "-fopenmp" not in flags


def test_host_target_is_the_compilers():
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    dumped = subprocess.run([cxx, "-dumpmachine"], capture_output=True, text=True, check=True).stdout.strip()
    assert SETUP.target_machine() == dumped


def _torch_includes() -> list[str]:
    from torch.utils import cpp_extension

    out = []
    for folder in cpp_extension.include_paths():
        out += ["-isystem", folder]
    return out


@pytest.mark.parametrize("target", FOREIGN)
def test_flags_are_accepted(target, tmp_path):
    """The flag list alone (what failed before for -mprefer-vector-width on non-x86)."""
    cxx = _cross_cxx(target)
    src = tmp_path / "empty.cpp"
    src.write_text("int f() { return 0; }\n")
    proc = subprocess.run(
        [cxx, *SETUP.cxx_flags(target), "-c", str(src), "-o", str(tmp_path / "empty.o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("target", FOREIGN)
@pytest.mark.parametrize("source", SETUP.CPU_KERNEL_SOURCES)
def test_cpu_kernel_source_cross_compiles(target, source, tmp_path):
    cxx = _cross_cxx(target)
    cmd = [cxx, *SETUP.cxx_flags(target), "-Werror=unknown-pragmas", "-I", str(ROOT / "csrc" / "include")]
    cmd += _torch_includes() + ["-c", str(ROOT / source), "-o", str(tmp_path / "out.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"{target}: {source}\n{proc.stderr[-4000:]}"
    nm = shutil.which(f"{target}-nm") or shutil.which("nm")
    if nm and source.endswith("isa.cpp"):
        symbols = subprocess.run(
            [nm, "-C", str(tmp_path / "out.o")], capture_output=True, text=True, check=False
        ).stdout
        assert "tinit::cpu::chosen_isa()" in symbols, symbols[:2000]
