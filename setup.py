"""Build tinit's C++ extension (the metadata and packages are in pyproject.toml).

    pip install --no-build-isolation -e .     # or: pip install --no-build-isolation .

torch must be installed first and the build must see it, hence
--no-build-isolation (it is in no requirement list, so that pip never
resolves an unpinned, multi-GB CUDA build of it): scripts/setup.sh pins the
CPU build; on a GPU machine use the torch already there. Without ninja on
PATH (or beside the running Python, as a venv's `pip install ninja` puts it)
torch falls back to compiling one file at a time.

Stable ABI: the extension uses only torch's stable C++ API (torch/csrc/stable,
torch/headeronly) and CPython's limited API, so one build loads into every
torch from TORCH_TARGET on (-DTORCH_TARGET_VERSION, the default and only
build: tests/test_stable_abi.py checks it) and every CPython from 3.10 (an
abi3 wheel, tagged cp310). It links libtorch_cpu (the stable C shim) and
never libtorch_python; the installed torch gives only the headers and that
library, whichever torch it is.

CUDA: the extension also gets the CUDA kernels (csrc/cuda/) when a CUDA toolkit
is found ($CUDA_HOME or $CUDA_PATH, else the nvcc on PATH, else /usr/local/cuda:
a folder with bin/nvcc and include/cuda_runtime.h). The installed torch may be
a CPU build: nvcc compiles the kernels, the bindings use the stable API, and
the extension links the toolkit's static CUDA runtime, not torch's CUDA
libraries (a CppExtension, not a CUDAExtension). No GPU needs to be visible.
TORCH_CUDA_ARCH_LIST picks the targets, e.g. "9.0" or "8.0;9.0"; without it
and without a GPU that torch sees, the build targets DEFAULT_CUDA_ARCHS.

Environment:
    DEBUG=1                 -O0 -g instead of -O3 (device code: -G)
    TINIT_NO_EXTENSION=1    pure-Python install (reference backend only)
    TINIT_NO_CUDA=1         CPU-only extension even where a CUDA toolkit is found
    TINIT_FORCE_CUDA=1      build the CUDA kernels or fail saying why (no
                            silent CPU-only build)
    TORCH_CUDA_ARCH_LIST    CUDA targets (read by torch.utils.cpp_extension)
    CUDA_HOME, CUDA_PATH    the CUDA toolkit (else the nvcc on PATH, else /usr/local/cuda)
    TINIT_EXTRA_CXXFLAGS    appended to the host compiler's flags (e.g. "-ffp-contract=fast":
                            the sources turn contraction off themselves, tests/test_isa.py)
The default build is portable: no host-specific -march flag. The CPU kernels carry
one set of entries per engine (scalar, AVX2, AVX-512: csrc/cpu/isa.h), one engine
chosen per process at the first op.

CPU_KERNEL_SOURCES, cxx_flags(target_machine) and stable_abi_flags() are module-level and
side-effect free (setup() runs only as __main__), so tests and the portability check import them.
"""

import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
DEBUG = os.environ.get("DEBUG", "0") == "1"
DEFAULT_CUDA_ARCHS = "8.0;9.0+PTX"


# The oldest torch the extension loads into: the stable-ABI version its headers target
# (TORCH_TARGET_VERSION; a stable API newer than it does not compile), read from
# tinit._torch_floor.TORCH_FLOOR, which also refuses an older torch at import (one constant).
# Every stable API the extension uses is there from 2.10 (torch::stable::parallel_for and
# get_num_threads, TORCH_BOX's list and str conversions, the accelerator DeviceGuard and
# aoti_torch_get_current_cuda_stream; tests/test_cuda_compile.py compiles the CUDA bindings for
# 2.10 too). The floor is 2.11 all the same: it is the oldest torch any tinit check runs on (the
# GPU machine's, where bench/gpu_check.sh loads this build), and the Triton grouped ops are
# graph-capturable only from 2.11 (their table in torch's caching host allocator); 2.10 would be a
# claim no run has made.
def _torch_floor() -> tuple[int, int]:
    text = (ROOT / "tinit" / "_torch_floor.py").read_text()
    major, minor = re.search(r'^TORCH_FLOOR = "(\d+)\.(\d+)"$', text, re.MULTILINE).groups()
    return int(major), int(minor)


TORCH_TARGET = _torch_floor()
# CPython's limited API of 3.10 (requires-python in pyproject.toml): one abi3 extension, and
# wheel, for 3.10 and every later CPython.
PY_LIMITED_API = "0x030A0000"
PY_LIMITED_API_TAG = "cp310"
# Every .cpp and .cu under csrc/cuda/ (test_setup_lists_every_cuda_source checks it): the stable-ABI
# bindings, compiled by the host compiler, and the torch-free kernels, compiled by nvcc.
CUDA_SOURCES = [
    "csrc/cuda/bindings.cpp",
    "csrc/cuda/trunc_normal_kernel.cu",
    "csrc/cuda/trunc_normal_grouped_kernel.cu",
]

# The torch-free CPU kernel sources (header-only torch at most: torch/headeronly, no torch
# library), which the cross-compile test and the portability check build for foreign targets; on a
# non-x86 target transform_avx2.cpp and transform_avx512.cpp compile to their fallbacks (no entries).
CPU_KERNEL_SOURCES = [
    "csrc/cpu/isa.cpp",
    "csrc/cpu/stream_words.cpp",
    "csrc/cpu/transform_kernels.cpp",
    "csrc/cpu/transform_avx2.cpp",
    "csrc/cpu/transform_avx512.cpp",
]
# The op sources (torch's stable ABI: STABLE_TORCH_LIBRARY, torch::stable::parallel_for).
CPU_OP_SOURCES = ["csrc/ops.cpp", "csrc/cpu/trunc_normal.cpp", "csrc/cpu/trunc_normal_grouped.cpp"]


def _is_x86(target_machine: str) -> bool:
    arch = target_machine.split("-", 1)[0].lower()
    return arch in ("x86_64", "amd64", "x86", "i386", "i486", "i586", "i686", "x64")


def cxx_flags(target_machine: str, debug: bool = False) -> list[str]:
    """The host compiler's flags for a compiler targeting `target_machine` (a GCC triplet as
    `g++ -dumpmachine` prints it, e.g. "x86_64-linux-gnu", "aarch64-linux-gnu", or an
    architecture as platform.machine() names it). x86-only options only for x86."""
    flags = (["-O0", "-g"] if debug else ["-O3"]) + [
        "-std=c++17",
        # Bit-identical results across engines and backends: no FMA fusion. The sources say
        # it too (fp_contract.h), so a build without this flag computes the same bits.
        "-ffp-contract=off",
        # Lets sqrt vectorise; tinit never relies on errno.
        "-fno-math-errno",
        # Lets the compiler if-convert the branch-free transform (no FP traps
        # are ever enabled or inspected).
        "-fno-trapping-math",
    ]
    if _is_x86(target_machine):
        # The avx512 engine's entries may use 512-bit vectors (no effect on the others).
        flags.append("-mprefer-vector-width=512")
    # No -fopenmp: torch::stable::parallel_for runs torch's own at::parallel_for inside
    # libtorch_cpu, so the extension has no OpenMP pragma of its own.
    return flags


def stable_abi_flags(target: tuple[int, int] = TORCH_TARGET) -> list[str]:
    """The defines of the stable-ABI build: torch's headers for the ``target`` (major, minor)
    torch (torch/csrc/stable/version.h's encoding) and CPython's limited API."""
    major, minor = target
    return [f"-DTORCH_TARGET_VERSION=0x{major:02x}{minor:02x}000000000000", f"-DPy_LIMITED_API={PY_LIMITED_API}"]


def target_machine() -> str:
    """What the host compiler ($CXX, else c++) targets: its -dumpmachine, else this machine."""
    cxx = shlex.split(os.environ.get("CXX") or "c++")
    try:
        out = subprocess.run(cxx + ["-dumpmachine"], capture_output=True, text=True, timeout=60, check=True)
        if out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.machine()


def _flag(name: str) -> bool:
    return os.environ.get(name, "0") not in ("", "0", "false", "False")


def _find_toolkit() -> str | None:
    """The CUDA toolkit root: $CUDA_HOME / $CUDA_PATH, else the nvcc on PATH
    (through symlinks), else /usr/local/cuda; one that has include/cuda_runtime.h."""
    explicit = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if explicit:
        return explicit
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates += [Path(nvcc).parent.parent, Path(os.path.realpath(nvcc)).parent.parent]
    candidates.append(Path("/usr/local/cuda"))
    for root in candidates:
        if (root / "include" / "cuda_runtime.h").exists() and (root / "bin" / "nvcc").exists():
            return str(root)
    return None


def _unstable_bindings() -> list[str]:
    """The CUDA binding sources that include torch's unstable C++ API (ATen, c10, torch/library.h):
    under TORCH_TARGET_VERSION those headers refuse to compile."""
    unstable = re.compile(r"#include\s*<(ATen/|c10/|torch/(library|extension|all)\.h)")
    return [s for s in CUDA_SOURCES if s.endswith(".cpp") and unstable.search((ROOT / s).read_text())]


def _cuda_build() -> str | None:
    """The CUDA toolkit to build the CUDA kernels with, or None: by toolkit, not by the torch
    build (a CPU torch will do) or a visible GPU."""
    if _flag("TINIT_NO_CUDA"):
        return None
    toolkit = _find_toolkit()
    missing = []
    if toolkit is None:
        missing.append("no CUDA toolkit found (set CUDA_HOME or put nvcc on PATH)")
    unstable = _unstable_bindings()
    if unstable:
        missing.append(f"{', '.join(unstable)} use torch's unstable C++ API, which the stable-ABI build cannot compile")
    if missing and _flag("TINIT_FORCE_CUDA"):
        raise RuntimeError("TINIT_FORCE_CUDA=1 but the CUDA kernels cannot be built: " + "; ".join(missing))
    if missing:
        print("tinit setup: building the CPU-only extension: " + "; ".join(missing))
        return None
    import torch

    # A CPU torch sees no GPU (and has no arch list of its own): the default targets.
    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and torch.cuda.device_count() == 0:
        os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_CUDA_ARCHS
        print(f"tinit setup: no GPU visible and TORCH_CUDA_ARCH_LIST unset; targeting {DEFAULT_CUDA_ARCHS}")
    return toolkit


def _require_torch() -> None:
    """Fail with the remedy: an isolated build sees none of the installed packages."""
    try:
        import torch  # noqa: F401
    except ImportError as err:
        raise SystemExit(
            f"tinit setup: torch is not importable in the build environment ({err}). Install torch first, "
            "then build with `pip install --no-build-isolation -e .` (or `.`): an isolated build cannot see "
            "the installed torch, and tinit never lets pip pick one (an unpinned torch resolves to a "
            "multi-GB CUDA build)."
        ) from err


def _ninja_beside_python() -> None:
    """Put a venv's ninja on PATH: pip runs the build with the venv's Python but not its bin/ on
    PATH, and without ninja torch compiles the sources one at a time."""
    beside = Path(sys.executable).parent / "ninja"
    if shutil.which("ninja") is None and beside.exists():
        os.environ["PATH"] = f"{beside.parent}{os.pathsep}{os.environ.get('PATH', '')}"


def _extensions():
    if os.environ.get("TINIT_NO_EXTENSION", "0") == "1":
        return [], {}
    _require_torch()
    _ninja_beside_python()
    toolkit = _cuda_build()
    from torch.utils import cpp_extension

    stable = stable_abi_flags()
    cxx = cxx_flags(target_machine(), debug=DEBUG) + stable + shlex.split(os.environ.get("TINIT_EXTRA_CXXFLAGS", ""))
    sources = CPU_OP_SOURCES + CPU_KERNEL_SOURCES
    compile_args = {"cxx": cxx}
    include_dirs = [str(ROOT / "csrc" / "include")]
    library_dirs, libraries, link_args = [], [], []
    if toolkit is not None:
        # torch.utils.cpp_extension looks for a toolkit only under a CUDA torch; it compiles the
        # .cu sources of any extension with the nvcc of its CUDA_HOME.
        cpp_extension.CUDA_HOME = toolkit
        sources += CUDA_SOURCES
        compile_args["nvcc"] = (["-O0", "-g", "-G"] if DEBUG else ["-O3"]) + [
            "-std=c++17",
            # Bit-identical to the CPU kernel: no FMA contraction (the shared
            # headers spell each fused step as an explicit fma_rn).
            "--fmad=false",
            *stable,
        ]
        include_dirs.append(str(Path(toolkit) / "include"))
        lib = next((d for d in ("lib64", "lib") if (Path(toolkit) / d / "libcudart_static.a").exists()), "lib64")
        library_dirs.append(str(Path(toolkit) / lib))
        # The static runtime: no libcudart.so.<major> of one toolkit among the extension's
        # dependencies, whatever CUDA the user's torch was built with (the kernels run on the
        # streams torch gives, through the driver both runtimes share).
        libraries += ["cudart_static"]
        link_args += ["-ldl", "-lpthread", "-lrt"]
    ext = cpp_extension.CppExtension(
        name="tinit._C",
        sources=sources,
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        py_limited_api=True,
    )
    # The stable C shim (aoti_torch_*, torch_*) is in libtorch_cpu; CppExtension would also link
    # libc10 and libtorch, which the extension does not use.
    ext.libraries = ["torch_cpu", *libraries]
    return [ext], {"build_ext": _one_line_failure(cpp_extension.BuildExtension.with_options(use_ninja=True))}


NO_EXTENSION_HINT = (
    "install a C++17 compiler (e.g. `apt-get install g++`, or set CXX), or install tinit without its "
    "native extension: `TINIT_NO_EXTENSION=1 pip install --no-build-isolation .` (the pure-torch "
    "backend only: slower, same stream)"
)


def _compiler_problem() -> str | None:
    """Why the C++ compiler cannot build the extension, in a few words; None when it can."""
    import subprocess
    import tempfile

    compiler = os.environ.get("CXX") or "c++"
    path = shutil.which(compiler.split()[0])
    if path is None:
        return f"no C++ compiler: {compiler!r} is not on PATH"
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text("#include <cstdint>\nint main() { return static_cast<int>(sizeof(std::int64_t)) - 8; }\n")
        try:
            done = subprocess.run(
                [*compiler.split(), "-std=c++17", "-c", str(source), "-o", str(Path(tmp) / "probe.o")],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as err:
            return f"the C++ compiler {path} does not run ({err})"
    if done.returncode != 0:
        first = next((line for line in done.stderr.splitlines() if line.strip()), "no message")
        return f"the C++ compiler {path} cannot compile C++17 ({first.strip()})"
    return None


def _one_line_failure(build_ext):
    """``build_ext`` that first checks the compiler and ends a failed build with one line naming the
    cause and ``TINIT_NO_EXTENSION=1``, not only torch's and setuptools' tracebacks."""

    class Build(build_ext):
        def run(self):
            problem = _compiler_problem()
            if problem is not None:
                raise SystemExit(f"tinit setup: cannot build the native extension: {problem}; {NO_EXTENSION_HINT}")
            try:
                super().run()
            except Exception as err:  # any build failure gets the same remedy line
                raise SystemExit(
                    f"tinit setup: the native extension failed to build ({type(err).__name__}: {err}); "
                    f"{NO_EXTENSION_HINT}"
                ) from err

    Build.__name__ = build_ext.__name__
    return Build


if __name__ == "__main__":  # setuptools runs setup.py as __main__; importing it builds nothing
    ext_modules, cmdclass = _extensions()
    # Name, version (tinit.__version__), packages, dependencies and entry points: pyproject.toml.
    # An abi3 wheel (tagged cp310-abi3) when the extension is built; a pure one without it.
    options = {"bdist_wheel": {"py_limited_api": PY_LIMITED_API_TAG}} if ext_modules else {}
    setup(ext_modules=ext_modules, cmdclass=cmdclass, options=options)
