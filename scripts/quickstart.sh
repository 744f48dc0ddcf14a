#!/usr/bin/env bash
# Runs the quickstart example end to end on the local provider.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
set -x
trainform validate examples/quickstart
trainform graph examples/quickstart
