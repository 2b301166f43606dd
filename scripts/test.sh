#!/usr/bin/env bash
# Set up ./.venv (scripts/setup.sh), lint (ruff check, ruff format --check,
# clang-format --dry-run --Werror over the tracked C++/CUDA files) and run the
# test suite; extra arguments go to pytest.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
.venv/bin/python -m ruff check .
.venv/bin/python -m ruff format --check .
# Tracked files only; .clang-format-ignore leaves out the generated ndtri table.
git ls-files -z '*.h' '*.hpp' '*.cpp' '*.cc' '*.cu' '*.cuh' | xargs -0 .venv/bin/clang-format --dry-run --Werror
exec .venv/bin/python -m pytest -q -rs tests "$@"
