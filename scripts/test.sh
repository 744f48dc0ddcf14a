#!/usr/bin/env bash
# Runs the whole test suite: lint, then every test (unit, golden, property, integration
# against real servers, CLI end-to-end). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
