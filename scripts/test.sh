#!/usr/bin/env bash
# Runs the whole test suite: lint, then every test (unit, golden, property, integration
# against real servers, CLI end-to-end). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh
.venv/bin/ruff check .
# Two pytest-xdist workers, one per core; the tests of the one real Slurm cluster share a
# worker (tests/conftest.py). A third worker was faster (pytest 1012 s against 1308 s), but
# the Slurm calibrations, which compare the cluster's start order with the model's, then ran
# beside two busy workers and missed their bound.
# Arguments given here come last, so `-n 0` runs everything in this process. The 30 slowest
# tests are listed at the end, so a CI log shows where the time goes.
.venv/bin/python -m pytest -n 2 --dist loadgroup --durations=30 "$@"
