#!/usr/bin/env bash
# Runs the quickstart example end to end on the local provider, in a scratch copy so the
# checkout stays clean: validate, lock, plan, apply (the training run starts), wait for it,
# apply again (the evaluation), wait, status with the gate, a plan with no changes, drift.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
work=$(mktemp -d "${TMPDIR:-/tmp}/trainform-quickstart.XXXXXX")
cp -r examples/quickstart/. "$work/"
rm -rf "$work/.trainform" "$work/trainform.lock"
cd "$work"
echo "== quickstart in $work"
set -x
trainform validate .
trainform graph .
trainform lock .
trainform plan . --locked -out quickstart.plan
trainform apply quickstart.plan
trainform status --wait
trainform plan . --locked
trainform apply . --locked --auto-approve
trainform status --wait
trainform status --describe
trainform plan . --locked --detailed-exitcode
trainform drift .
