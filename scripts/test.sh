#!/usr/bin/env bash
# Set up ./.venv (scripts/setup.sh), lint (ruff check, ruff format --check) and
# run the test suite;
# extra arguments go to pytest.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
.venv/bin/python -m ruff check .
.venv/bin/python -m ruff format --check .
exec .venv/bin/python -m pytest -q -rs tests "$@"
