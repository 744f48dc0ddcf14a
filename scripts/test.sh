#!/usr/bin/env bash
# Runs the whole test suite: lint, then every test (unit, golden, property, CLI end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
