#!/usr/bin/env bash
# Runs the quickstart example end to end on the local provider, in a scratch copy so the
# checkout stays clean: validate, graph, plan, apply, a second plan with no changes, drift.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
work=$(mktemp -d "${TMPDIR:-/tmp}/trainform-quickstart.XXXXXX")
cp -r examples/quickstart/. "$work/"
rm -rf "$work/.trainform"
cd "$work"
echo "== quickstart in $work"
set -x
trainform validate .
trainform graph .
trainform plan . -out quickstart.plan
trainform apply quickstart.plan
trainform plan . --detailed-exitcode
trainform drift .
