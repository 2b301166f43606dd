#!/usr/bin/env bash
# Create or update ./.venv with pinned torch, the test/bench tools, and tinit
# itself (editable, native extension built). Safe to re-run; works from any cwd.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TORCH_VERSION="2.13.0"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

# torch first and pinned: an unpinned torch resolves to a multi-GB CUDA build.
"${PIP[@]}" install "torch==$TORCH_VERSION"
# Repeating the pin keeps any dependency from moving torch.
# triton: the Triton kernel runs in its interpreter on CPU-only machines (tests).
# matplotlib: the PNG of `tinit report`.
# ruff: the lint of scripts/test.sh, pinned so that its default rules do not move.
"${PIP[@]}" install "torch==$TORCH_VERSION" numpy scipy pytest hypothesis pytest-benchmark tqdm ninja transformers triton matplotlib \
  "ruff==0.17.6"

installed="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"
if [[ "$installed" != "$TORCH_VERSION" ]]; then
  echo "setup: expected torch $TORCH_VERSION, found $installed" >&2
  exit 1
fi

# ninja must be on PATH for torch's BuildExtension.
PATH="$VENV/bin:$PATH" "${PIP[@]}" install --no-build-isolation --no-deps -e .

"$PY" - <<'PY'
import torch
import tinit
from tinit import _C  # noqa: F401  fails here if the native build did not land
print(f"setup: tinit {tinit.__version__} with native extension, torch {torch.__version__}")
PY
