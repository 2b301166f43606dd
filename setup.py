"""Build tinit: the Python package, tinit.triton_kernels, and the C++ extension.

    pip install --no-build-isolation -e .

Environment:
    DEBUG=1                 -O0 -g instead of -O3
    TINIT_NO_EXTENSION=1    pure-Python install (reference backend only)
The default build is portable: no -march=native. The CPU kernels carry
per-ISA clones (GCC target_clones) chosen at load time.
"""

import os
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
DEBUG = os.environ.get("DEBUG", "0") == "1"


def _extensions():
    if os.environ.get("TINIT_NO_EXTENSION", "0") == "1":
        return [], {}
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    opt = ["-O0", "-g"] if DEBUG else ["-O3"]
    cxx = opt + [
        "-std=c++17",
        # Bit-identical results across ISA clones and backends: no FMA fusion.
        "-ffp-contract=off",
        # Lets sqrt vectorise; tinit never relies on errno.
        "-fno-math-errno",
        # Lets the compiler if-convert the branch-free transform (no FP traps
        # are ever enabled or inspected).
        "-fno-trapping-math",
        # The AVX-512 clone may use 512-bit vectors (no effect on other clones).
        "-mprefer-vector-width=512",
        # at::parallel_for is OpenMP in torch's CPU builds; without this flag
        # its pragmas compile away and the op runs on one thread.
        "-fopenmp",
    ]
    sources = ["csrc/ops.cpp", "csrc/cpu/trunc_normal.cpp"]
    ext = CppExtension(
        name="tinit._C",
        sources=sources,
        include_dirs=[str(ROOT / "csrc" / "include")],
        extra_compile_args={"cxx": cxx},
        extra_link_args=["-fopenmp"],
        py_limited_api=False,
    )
    return [ext], {"build_ext": BuildExtension.with_options(use_ninja=True)}


ext_modules, cmdclass = _extensions()

setup(
    name="tinit",
    version="0.1.0",
    description="Fast, exact, reproducible truncated-normal weight initialisation",
    packages=["tinit", "tinit.triton_kernels"],
    package_dir={"tinit": "tinit", "tinit.triton_kernels": "triton_kernels"},
    python_requires=">=3.10",
    install_requires=["torch>=2.4", "numpy", "tqdm"],
    extras_require={
        "test": ["pytest", "scipy", "pytest-benchmark", "transformers"],
        "triton": ["triton"],
    },
    entry_points={"console_scripts": ["tinit=tinit.cli:main"]},
    ext_modules=ext_modules,
    cmdclass=cmdclass,
)
