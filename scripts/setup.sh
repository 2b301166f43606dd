#!/usr/bin/env bash
# Create or update ./.venv with pinned torch, the test/bench tools, and tinit
# itself (editable, native extension built). Safe to re-run; works from any cwd.
# The extension is rebuilt only when what it is built from changed (a stamp
# in .venv holds the hash); TINIT_REBUILD=1 forces the build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TORCH_VERSION="2.13.0"
# docs/coverage.md is generated for this transformers (its "Versions" line): a newer
# release adds causal-LM classes the table lacks and tests/test_coverage.py fails.
# Bumping it means re-running scripts/gen_coverage.py and committing its table.
TRANSFORMERS_VERSION="5.25.0"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

# torch first and pinned: an unpinned torch resolves to a multi-GB CUDA build.
# The pin alone gives the CPU build only where pip finds a local CPU wheel of
# it (as on this project's machines, for Python 3.11); elsewhere PyPI's
# Linux x86_64 torch is the CUDA build (README, "Installing").
"${PIP[@]}" install "torch==$TORCH_VERSION"
# Repeating the pin keeps any dependency from moving torch.
# triton: the Triton kernel runs in its interpreter on CPU-only machines (tests).
# matplotlib: the PNG of `tinit report`.
# transformers: pinned (TRANSFORMERS_VERSION above, the version of docs/coverage.md).
# ruff, clang-format: the lint of scripts/test.sh, pinned so that their rules and
# output do not move (.pre-commit-config.yaml pins the same versions).
# setuptools: the build backend (pyproject.toml), which --no-build-isolation
# takes from the venv; Python 3.11's venv brings an older one, 3.12's none.
"${PIP[@]}" install "torch==$TORCH_VERSION" numpy scipy pytest hypothesis pytest-benchmark tqdm ninja "transformers==$TRANSFORMERS_VERSION" triton matplotlib \
  "ruff==0.17.6" "clang-format==19.1.7" "setuptools>=70.1"

# Reference implementations the recipe tests initialise models with
# (tests/test_recipes_reference.py), pinned and without their dependencies, so
# that none of them moves torch or pulls in its training stack: torchtitan
# (depth_init) with the few pure-Python modules its model code imports
# (spmd_types, tyro and tyro's own), OLMo-core (olmo_*) with the two its
# config code imports (its remote-I/O imports are stood in for by the test),
# Megatron-Core (megatron; 0.16.1 is the newest wheel the index has for Python
# 3.11), Keras 3 with the modules it imports (lecun_normal, on its torch backend),
# microsoft/mup (mup, mup_param_groups; it imports PyYAML, which transformers
# brings), graphcore-research/unit-scaling (u_mup) with the two modules it imports
# beyond docstring-parser, torchscale (deepnorm's variant; the test stands in for
# fairscale) and timm (its LayerScale, loaded alone: importing timm needs torchvision).
"${PIP[@]}" install --no-deps "torchtitan==0.3.0" "spmd_types==0.2.3" "tyro==1.0.16" \
  "docstring-parser==0.18.0" "shtab==1.13.0" "typeguard==4.6.0" \
  "ai2-olmo-core==3.0.0" "dataclass-extensions==0.5.0" "bettermap==1.3.1" \
  "megatron-core==0.16.1" "keras==3.15.1" "namex==0.1.0" "absl-py==2.5.1" "optree==0.20.0" "ml-dtypes==0.6.0" \
  "mup==1.0.0" "unit-scaling==0.3.5" "einops==0.8.2" "tabulate==0.10.0" "torchscale==0.3.0" "timm==1.0.31"

installed="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"
if [[ "$installed" != "$TORCH_VERSION" ]]; then
  echo "setup: expected torch $TORCH_VERSION, found $installed" >&2
  exit 1
fi

# Everything the built extension depends on: its sources, the build files, the
# interpreter and torch it links against, the toolkit and the build switches.
build_hash() {
  {
    find csrc -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    sha256sum setup.py pyproject.toml
    "$PY" -c 'import sys, torch; print(sys.version, torch.__version__, torch.version.cuda)'
    echo "root=$ROOT nvcc=$(command -v nvcc || true)"
    for name in DEBUG TINIT_NO_EXTENSION TINIT_NO_CUDA TINIT_FORCE_CUDA TINIT_EXTRA_CXXFLAGS CXX TORCH_CUDA_ARCH_LIST CUDA_HOME CUDA_PATH; do
      echo "$name=${!name-}"
    done
  } | sha256sum | cut -d' ' -f1
}

# Fails unless tinit imports from this checkout with its native extension.
check_install() {
  "$PY" - "$ROOT" <<'PY'
import sys
from pathlib import Path

import torch
import tinit
from tinit import _C  # noqa: F401  fails here if the native build did not land

if Path(tinit.__file__).resolve().parent != Path(sys.argv[1], "tinit").resolve():
    sys.exit(f"setup: tinit imports from {tinit.__file__}, not from {sys.argv[1]}")
print(f"setup: tinit {tinit.__version__} with native extension, torch {torch.__version__}")
PY
}

# The built file itself too: a build from another venv writes the same path.
built_hash() {
  cat tinit/_C*.so 2>/dev/null | sha256sum | cut -d' ' -f1
}

STAMP="$VENV/.tinit-build-stamp"
want="$(build_hash)"
if [[ "${TINIT_REBUILD:-0}" != "1" && -f "$STAMP" && "$(cat "$STAMP")" == "$want $(built_hash)" ]] \
  && check_install 2>/dev/null; then
  echo "setup: extension up to date (sources unchanged since the last build; TINIT_REBUILD=1 rebuilds)"
  exit 0
fi
rm -f "$STAMP"
# A version-specific build left by an older checkout (tinit/_C.cpython-311-*.so, before the
# stable ABI) would shadow the abi3 one: Python tries that suffix first.
rm -f tinit/_C.cpython-*.so
# .venv/bin on PATH: the venv's ninja (setup.py also finds it beside the venv's Python).
PATH="$VENV/bin:$PATH" "${PIP[@]}" install --no-build-isolation --no-deps -e .
check_install
echo "$want $(built_hash)" > "$STAMP"
