"""Held-out perplexity of the bigram model; writes metrics JSON for trainform's gates.

Environment (set by trainform's local provider):
  TRAINFORM_DATASET_HELDOUT  folder of the held-out text
  TRAINFORM_MODEL_DIR        checkpoint or output folder holding model.json
  TRAINFORM_METRICS_FILE     where to write {"perplexity": ...}
  TRAINFORM_PARAM_SMOOTHING  additive smoothing (default 0.1)
  TRAINFORM_EVENTS_FILE      where trainform.runtime appends its set-up and eval phases
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

try:
    from trainform import runtime
except ImportError:  # an interpreter without trainform: evaluate all the same, report nothing
    runtime = None


def phase(name: str) -> Any:
    """Time one phase (a no-op without trainform or TRAINFORM_EVENTS_FILE)."""
    return runtime.phase(name) if runtime is not None else contextlib.nullcontext()


def main() -> int:
    with phase("setup"):
        text = "".join(
            p.read_text(encoding="utf-8")
            for p in sorted(Path(os.environ["TRAINFORM_DATASET_HELDOUT"]).glob("*.txt"))
        )
        counts: dict[str, int] = json.loads(
            (Path(os.environ["TRAINFORM_MODEL_DIR"]) / "model.json").read_text()
        )["counts"]
        smoothing = float(os.environ.get("TRAINFORM_PARAM_SMOOTHING", "0.1"))
    with phase("eval"):
        perplexity = held_out_perplexity(text, counts, smoothing)
    Path(os.environ["TRAINFORM_METRICS_FILE"]).write_text(json.dumps({"perplexity": perplexity}))
    print(f"perplexity={perplexity:.3f}")
    return 0


def held_out_perplexity(text: str, counts: dict[str, int], smoothing: float) -> float:
    alphabet = sorted({ch for pair in counts for ch in pair} | set(text))
    totals: dict[str, int] = {}
    for pair, count in counts.items():
        totals[pair[0]] = totals.get(pair[0], 0) + count
    log_likelihood = 0.0
    for left, right in zip(text, text[1:], strict=False):
        numerator = counts.get(left + right, 0) + smoothing
        denominator = totals.get(left, 0) + smoothing * len(alphabet)
        log_likelihood += math.log(numerator / denominator)
    return math.exp(-log_likelihood / max(1, len(text) - 1))


if __name__ == "__main__":
    sys.exit(main())
