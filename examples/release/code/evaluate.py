"""Held-out perplexity of the bigram model; writes metrics JSON for trainform's gates.

Environment (set by trainform's local provider):
  TRAINFORM_DATASET_HELDOUT  folder of the held-out text
  TRAINFORM_MODEL_DIR        checkpoint or output folder holding model.json
  TRAINFORM_METRICS_FILE     where to write {"perplexity": ...}
  TRAINFORM_PARAM_SMOOTHING  additive smoothing (default 0.1)
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path


def main() -> int:
    text = "".join(
        p.read_text(encoding="utf-8")
        for p in sorted(Path(os.environ["TRAINFORM_DATASET_HELDOUT"]).glob("*.txt"))
    )
    counts: dict[str, int] = json.loads(
        (Path(os.environ["TRAINFORM_MODEL_DIR"]) / "model.json").read_text()
    )["counts"]
    smoothing = float(os.environ.get("TRAINFORM_PARAM_SMOOTHING", "0.1"))
    alphabet = sorted({ch for pair in counts for ch in pair} | set(text))
    totals: dict[str, int] = {}
    for pair, count in counts.items():
        totals[pair[0]] = totals.get(pair[0], 0) + count
    log_likelihood = 0.0
    for left, right in zip(text, text[1:], strict=False):
        numerator = counts.get(left + right, 0) + smoothing
        denominator = totals.get(left, 0) + smoothing * len(alphabet)
        log_likelihood += math.log(numerator / denominator)
    perplexity = math.exp(-log_likelihood / max(1, len(text) - 1))
    Path(os.environ["TRAINFORM_METRICS_FILE"]).write_text(json.dumps({"perplexity": perplexity}))
    print(f"perplexity={perplexity:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
