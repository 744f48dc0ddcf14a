"""Character-bigram language model: a real (tiny) training loop for the quickstart.

Reads text files from the dataset folder, counts character bigrams in steps, writes a
checkpoint (model + manifest with sizes and sha256) every few steps, and
resumes from the checkpoint trainform names. Standard library only.

Environment (set by trainform's local provider):
  TRAINFORM_DATASET_TINY_CORPUS  folder of the pinned dataset version
  TRAINFORM_CHECKPOINT_DIR       where to write checkpoints (one folder per step)
  TRAINFORM_RESUME_FROM          checkpoint folder to resume from (may be empty)
  TRAINFORM_PARAM_STEPS          number of training steps
  TRAINFORM_PARAM_CHECKPOINTEVERY  steps between checkpoints (default 5)
  TRAINFORM_PARAM_STEPSECONDS    seconds each step takes (default 0: as fast as possible);
                                 the example sets it so a run lasts long enough to watch
  TRAINFORM_OUTPUT_DIR           where the final model goes
  TRAINFORM_PROGRESS_FILE        where to report the current step

Deterministic: the same data and parameters give the same model, whether the run went
through in one attempt or resumed from a checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path


def read_corpus(folder: Path) -> str:
    return "".join(path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.txt")))


def write_checkpoint(root: Path, step: int, counts: dict[str, int]) -> Path:
    folder = root / f"step-{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "model.json"
    model.write_text(json.dumps({"step": step, "counts": counts}, sort_keys=True))
    data = model.read_bytes()
    manifest = {
        "step": step,
        "files": [
            {"path": "model.json", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        ],
    }
    # The manifest is written last: a checkpoint without one is incomplete by definition.
    (folder / "manifest.json").write_text(json.dumps(manifest, sort_keys=True))
    return folder


def load_checkpoint(folder: Path) -> tuple[int, dict[str, int]]:
    state = json.loads((folder / "model.json").read_text())
    return int(state["step"]), dict(state["counts"])


def main() -> int:
    corpus = read_corpus(Path(os.environ["TRAINFORM_DATASET_TINY_CORPUS"]))
    checkpoints = Path(os.environ["TRAINFORM_CHECKPOINT_DIR"])
    output = Path(os.environ.get("TRAINFORM_OUTPUT_DIR", checkpoints.parent / "output"))
    steps = int(os.environ.get("TRAINFORM_PARAM_STEPS", "40"))
    every = int(os.environ.get("TRAINFORM_PARAM_CHECKPOINTEVERY", "5"))
    pause = float(os.environ.get("TRAINFORM_PARAM_STEPSECONDS", "0"))
    progress = os.environ.get("TRAINFORM_PROGRESS_FILE", "")
    resume = os.environ.get("TRAINFORM_RESUME_FROM", "")

    step, counts = (0, {})
    if resume:
        step, counts = load_checkpoint(Path(resume))
        print(f"resumed from {resume} at step {step}", flush=True)
    chunk = max(1, len(corpus) // steps)
    while step < steps:
        text = corpus[step * chunk : (step + 1) * chunk + 1]
        for left, right in zip(text, text[1:], strict=False):
            counts[left + right] = counts.get(left + right, 0) + 1
        step += 1
        time.sleep(pause)
        print(f"step {step}/{steps} bigrams={len(counts)}", flush=True)
        if progress:
            Path(progress).write_text(json.dumps({"step": step}))
        if step % every == 0 or step == steps:
            write_checkpoint(checkpoints, step, counts)
    output.mkdir(parents=True, exist_ok=True)
    (output / "model.json").write_text(json.dumps({"step": step, "counts": counts}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
