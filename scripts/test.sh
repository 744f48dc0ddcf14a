#!/usr/bin/env bash
# Runs the whole test suite: lint, then every test (unit, golden, property, integration
# against real servers, CLI end-to-end). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh
.venv/bin/ruff check .
# Three pytest-xdist workers on the machine's two cores: the tests of the one real Slurm
# cluster share a worker (tests/conftest.py), which mostly waits on the cluster's jobs (the
# calibrations alone are minutes of sleeping jobs), so two more keep both cores busy meanwhile.
# Arguments given here come last, so `-n 0` runs everything in this process. The 30 slowest
# tests are listed at the end, so a CI log shows where the time goes.
.venv/bin/python -m pytest -n 3 --dist loadgroup --durations=30 "$@"
