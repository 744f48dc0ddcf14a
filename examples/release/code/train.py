"""Character-bigram language model: a real (tiny) training loop for the quickstart.

Reads text files from the dataset folder, counts character bigrams in steps, writes a
checkpoint (model + manifest with sizes and sha256) every few steps, and
resumes from the checkpoint trainform names. Standard library only; where trainform is
installed in the interpreter that runs it, it reports where its time goes (set-up, data
wait, compute, checkpoint writes) through trainform.runtime (docs/run-events.md).

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
  TRAINFORM_EVENTS_FILE          where trainform.runtime appends the run's events

Deterministic: the same data and parameters give the same model, whether the run went
through in one attempt or resumed from a checkpoint.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

try:
    from trainform import runtime
except ImportError:  # an interpreter without trainform: train all the same, report nothing
    runtime = None


def phase(name: str, step: int | None = None) -> Any:
    """Time one phase of the run (a no-op without trainform or TRAINFORM_EVENTS_FILE)."""
    if runtime is None:
        return contextlib.nullcontext(types.SimpleNamespace())
    return runtime.phase(name, step=step)


def read_corpus(folder: Path) -> str:
    return "".join(path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.txt")))


def write_checkpoint(root: Path, step: int, counts: dict[str, int]) -> int:
    """Write checkpoint `step`; the bytes written."""
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
    text = json.dumps(manifest, sort_keys=True)
    (folder / "manifest.json").write_text(text)
    return len(data) + len(text)


def load_checkpoint(folder: Path) -> tuple[int, dict[str, int]]:
    state = json.loads((folder / "model.json").read_text())
    return int(state["step"]), dict(state["counts"])


def main() -> int:
    with phase("setup"):
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
        with phase("data_wait", step=step + 1):
            text = corpus[step * chunk : (step + 1) * chunk + 1]
        with phase("compute", step=step + 1):
            for left, right in zip(text, text[1:], strict=False):
                counts[left + right] = counts.get(left + right, 0) + 1
            time.sleep(pause)
        step += 1
        print(f"step {step}/{steps} bigrams={len(counts)}", flush=True)
        if progress:
            Path(progress).write_text(json.dumps({"step": step}))
        if step % every == 0 or step == steps:
            with phase("checkpoint", step=step) as span:
                span.bytes = write_checkpoint(checkpoints, step, counts)
    output.mkdir(parents=True, exist_ok=True)
    (output / "model.json").write_text(json.dumps({"step": step, "counts": counts}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
