"""The run-event protocol, version 1: the names and bounds both sides of it share.

A training process reports where its time goes by appending JSON lines to one file, the
*events file*, whose path the provider gives it in `TRAINFORM_EVENTS_FILE` (unset: report
nothing). trainform's helper (trainform.runtime.events) writes it; code that cannot import
trainform (a container image without it) may write the same lines itself. The reader is
trainform.providers.run_events; docs/run-events.md is the specification for users.

One object per line, UTF-8, each line written whole by one `write` to a file opened for
appending (several processes of one attempt may share the file: each writes its `rank`):

    {"v": 1, "t": 1733312345.25, "event": "start", "phase": "checkpoint", "rank": 0, "step": 40}
    {"v": 1, "t": 1733312346.5, "event": "span", "phase": "checkpoint", "rank": 0,
     "seconds": 1.25, "step": 40, "bytes": 5242880}
    {"v": 1, "t": 1733312350.0, "event": "span", "phase": "compute", "rank": 0,
     "seconds": 3.5, "count": 40, "since": 1733312346.5, "step": 80}

- `start`: a phase began (optional; a phase still open when the attempt ends counts until
  its end).
- `span`: a phase ended: `seconds` spent in it, excluding phases nested in it; `count`
  spans summed into one line (default 1), the first of them began at `since` (default
  `t - seconds`); `bytes` written (checkpoints); `step` the training step it ended at.
- `truncated`: the writer stopped because the file reached `MAX_FILE_BYTES`.

Phases: `setup`, `data_wait` (blocked on the next batch), `compute`, `checkpoint`, `eval`;
other names (lowercase, digits, `_`, up to 32 characters) are kept as "other" time. Lines
of another version, unknown events and lines that do not parse are skipped, never fatal.

Standard library only, importable by any Python 3.8 or newer.
"""

from __future__ import annotations

import re

FORMAT_VERSION = 1
EVENTS_VARIABLE = "TRAINFORM_EVENTS_FILE"
"""The environment variable naming the attempt's events file."""
EVENTS_SUFFIX = ".events.jsonl"
"""Providers keep the events file beside the attempt's log: `attempt-<n>.events.jsonl`."""

SETUP, DATA_WAIT, COMPUTE, CHECKPOINT, EVAL = "setup", "data_wait", "compute", "checkpoint", "eval"
PHASES = (SETUP, DATA_WAIT, COMPUTE, CHECKPOINT, EVAL)
"""The phases a breakdown names; any other valid name is "other" time."""
AGGREGATED = frozenset({DATA_WAIT, COMPUTE})
"""Phases that repeat every step: the helper sums them and writes one line now and then."""

START, SPAN, TRUNCATED = "start", "span", "truncated"

MAX_FILE_BYTES = 8 * 1024 * 1024
"""A writer stops before the file passes this; a reader reads no more than this."""
MAX_LINE_BYTES = 1024
"""A longer line is not a record (the helper's lines are about 150 bytes)."""
PHASE_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
