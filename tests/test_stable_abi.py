"""The native extension is built on torch's stable ABI and CPython's limited API only.

- The extension Python loads (``tinit._C``) imports no symbol of torch's C++ namespaces (``at::``,
  ``c10::``, ``torch::``: mangled ``_ZN2at``, ``_ZN3c10``, ``_ZN5torch``, in any position), only
  the stable C shim (``aoti_torch_*``, ``torch_*``); it needs no libtorch_python (DT_NEEDED), and
  it is the abi3 file of the limited API (``_C.abi3.so``).
- The floor: setup.py's ``stable_abi_flags()`` define ``TORCH_TARGET_VERSION`` for
  ``TORCH_TARGET`` in torch's encoding (torch/csrc/stable/version.h) and ``Py_LIMITED_API`` for
  CPython 3.10, and ``tinit._torch_floor.TORCH_FLOOR`` (the same version) refuses the extension
  under an older torch.
- The floor build is the default build (setup.py's ``_extensions`` passes ``stable_abi_flags()``
  to every compile, host and nvcc); here the op sources also compile with exactly the floor's
  flags, so a stable API newer than the floor (hidden by torch's ``TORCH_FEATURE_VERSION``
  guards) fails this check, in CI too, whatever torch the machine has.

Skipped, saying why, where the extension is not built or binutils' ``nm`` (``readelf``) is absent.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tinit import _torch_floor, ops

ROOT = Path(__file__).resolve().parent.parent
# A name in torch's C++ namespaces, demangled (also inside a template or a signature) or mangled
# (a nested name, K/V/R-qualified, or a typeinfo/vtable of one).
DEMANGLED_TORCH = re.compile(r"(?<![\w:])(at|c10|torch)::")
MANGLED_TORCH = re.compile(r"N[KVRO]*(2at|3c10|5torch)\d")


def _setup_module():
    spec = importlib.util.spec_from_file_location("tinit_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = _setup_module()


@pytest.fixture(scope="module")
def extension() -> Path:
    """The tinit._C file this interpreter loads."""
    if not ops.native_available():
        pytest.skip(f"native extension not built: {ops.native_load_error()}")
    from tinit import _C

    return Path(_C.__file__)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"no {name} on PATH (binutils): cannot list the extension's imports")
    return path


def _undefined(extension: Path, *demangle: str) -> list[str]:
    out = subprocess.run(
        [_tool("nm"), "-D", "--undefined-only", *demangle, str(extension)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    # "                 U name" (nm's format for an undefined symbol, a version after @).
    return [line.split(None, 1)[1] for line in out.splitlines() if line.strip().startswith(("U ", "w ", "v "))]


def test_imports_no_torch_cpp_symbol(extension):
    mangled = _undefined(extension)
    demangled = _undefined(extension, "--demangle")
    assert mangled, f"nm lists no undefined symbol of {extension}"
    torch_cpp = sorted({*(m for m in mangled if MANGLED_TORCH.search(m))})
    torch_cpp += sorted({*(d for d in demangled if DEMANGLED_TORCH.search(d))})
    assert not torch_cpp, f"{extension.name} imports torch's unstable C++ API:\n" + "\n".join(torch_cpp)
    shim = [m for m in mangled if m.startswith(("aoti_torch_", "torch_"))]
    assert any(m.startswith("torch_library_impl") for m in shim), shim  # STABLE_TORCH_LIBRARY_IMPL's


def test_needs_no_libtorch_python(extension):
    dynamic = subprocess.run(
        [_tool("readelf"), "-d", str(extension)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    assert needed, dynamic
    assert not [n for n in needed if n.startswith("libtorch_python")], needed
    # The stable shim is in libtorch_cpu; libc10 and libtorch (CppExtension's defaults) go unused.
    assert not [n for n in needed if n.startswith(("libc10", "libtorch.so", "libtorch_cuda"))], needed


def test_is_the_limited_api_file(extension):
    assert extension.name.endswith(".abi3.so"), extension.name


def test_floor_is_one_version_everywhere():
    assert tuple(SETUP.TORCH_TARGET) == _torch_floor._release(_torch_floor.TORCH_FLOOR)
    flags = SETUP.stable_abi_flags()
    (target,) = [f.split("=", 1)[1] for f in flags if f.startswith("-DTORCH_TARGET_VERSION=")]
    major, minor = SETUP.TORCH_TARGET
    assert int(target, 16) == (major << 56) | (minor << 48)  # TORCH_VERSION_<major>_<minor>_0
    assert f"-DPy_LIMITED_API={SETUP.PY_LIMITED_API}" in flags and SETUP.PY_LIMITED_API == "0x030A0000"
    assert SETUP.PY_LIMITED_API_TAG == "cp310"


def test_default_build_is_the_floor_build():
    """setup.py's _extensions gives stable_abi_flags() to the host compiler and to nvcc: no other
    build of the extension exists."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    (build,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_extensions"]
    source = ast.unparse(build)
    assert "stable = stable_abi_flags()" in source, source
    assert source.count("*stable") + source.count("+ stable +") >= 2, source
    assert "py_limited_api=True" in source, source


@pytest.mark.parametrize("source", SETUP.CPU_OP_SOURCES)
def test_op_sources_compile_at_the_floor(source):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH (c++ or g++)")
    from torch.utils import cpp_extension

    includes = ["-I", str(ROOT / "csrc" / "include")]
    for folder in [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]:
        includes += ["-isystem", folder]
    flags = SETUP.cxx_flags(SETUP.target_machine()) + SETUP.stable_abi_flags()
    done = subprocess.run(
        [cxx, *flags, "-fsyntax-only", *includes, str(ROOT / source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{source} at torch {SETUP.TORCH_TARGET}:\n{done.stderr[-4000:]}"


@pytest.mark.parametrize(
    "version,refused",
    [("2.10.0+cu128", True), ("1.13.1", True), ("2.11.0", False), ("2.13.0+cpu", False), ("3.0.0a0", False)],
)
def test_torch_below_the_floor_is_refused(version, refused):
    problem = _torch_floor.torch_problem(version, "_C.abi3.so", None)
    assert (problem is not None) is refused, problem
    if refused:
        assert version in problem and f">= {_torch_floor.TORCH_FLOOR}" in problem
