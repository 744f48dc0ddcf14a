"""Held-out loss of the tiny character transformer; writes metrics JSON for trainform's gates.

One process (no process group): reads the model a run wrote (`model.pt` in its output
folder, or `state.pt` in a checkpoint), scores every window of the held-out text and
writes {"loss": mean cross-entropy in nats per character, "perplexity": exp(loss)}.

Environment (set by trainform):
  TRAINFORM_DATASET_HELDOUT  folder of the held-out text
  TRAINFORM_MODEL_DIR        the run's output folder, or a checkpoint folder
  TRAINFORM_METRICS_FILE     where the metrics go
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from model import build_model, encode, read_text


def main() -> int:
    torch.set_num_threads(1)
    folder = Path(os.environ["TRAINFORM_MODEL_DIR"])
    path = folder / "model.pt" if (folder / "model.pt").is_file() else folder / "state.pt"
    saved = torch.load(path, map_location="cpu", weights_only=True)
    vocab, context = list(saved["vocab"]), int(saved["context"])
    model = build_model(vocab, context, int(saved["seed"]))
    model.load_state_dict(saved["model"])
    model.eval()
    data = encode(read_text(Path(os.environ["TRAINFORM_DATASET_HELDOUT"])), vocab)
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(data) - 1, context):
            window = data[start : start + context + 1]
            if len(window) < 2:
                break
            logits = model(window[:-1].unsqueeze(0))
            total += F.cross_entropy(logits[0], window[1:], reduction="sum").item()
            count += len(window) - 1
    loss = total / count
    metrics = {"loss": loss, "perplexity": math.exp(loss)}
    Path(os.environ["TRAINFORM_METRICS_FILE"]).write_text(json.dumps(metrics, sort_keys=True))
    print(f"held-out loss {loss:.6f} (perplexity {math.exp(loss):.3f}) on {count} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
