"""Data-parallel training of the tiny character transformer (model.py) with PyTorch DDP.

Started by `torchrun train.py` on every node: torchrun reads the group (nodes, node rank,
processes per node, rendezvous on node 0) from the PET_* variables trainform sets, and
starts one process per rank. The process group is `nccl` where GPUs exist, else `gloo`.

Each step every rank draws its own batch from a generator seeded by (seed, step, rank),
so the data order follows from the step number alone; DDP averages the gradients. Rank 0
writes a checkpoint every `checkpointEvery` steps: `step-<N>/state.pt` (model, optimizer,
step) and then `manifest.json` with its size and sha256, the layout trainform validates.
A retry resumes every rank from the checkpoint trainform names; with the same seed the
resumed run ends with the loss an uninterrupted run ends with.

Environment (set by trainform; see the README):
  TRAINFORM_DATASET_CORPUS     folder of the pinned corpus version
  TRAINFORM_CHECKPOINT_DIR     where checkpoints go
  TRAINFORM_RESUME_FROM        checkpoint to resume from ("" to start fresh)
  TRAINFORM_OUTPUT_DIR         where the final model and final.json go
  TRAINFORM_PROGRESS_FILE      where rank 0 reports the step
  TRAINFORM_PARAM_STEPS, _CHECKPOINTEVERY, _SEED, _BATCH, _CONTEXT, _LEARNINGRATE,
  _STEPSECONDS (a pause per step, so a run lasts long enough to watch; default 0),
  _DATADELAY (seconds the data loader takes per batch, to show a data-bound run; default 0)
  TRAINFORM_EVENTS_FILE        where every rank reports its phases (trainform.runtime):
                               set-up, data wait, compute, checkpoint writes
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
import types
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from model import build_model, encode, parameter_count, read_text, vocabulary
from torch.nn.parallel import DistributedDataParallel

try:
    from trainform import runtime
except ImportError:  # an interpreter without trainform: train all the same, report nothing
    runtime = None

STATE = "state.pt"


def phase(name: str, step: int | None = None) -> Any:
    """Time one phase of this rank (a no-op without trainform or TRAINFORM_EVENTS_FILE)."""
    if runtime is None:
        return contextlib.nullcontext(types.SimpleNamespace())
    return runtime.phase(name, step=step)


def say(line: str) -> None:
    """One line in one write: the ranks of a node share torchrun's output, and a line
    written in parts (as `print` writes it) can be cut by another rank's."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parameter(name: str, default: str) -> str:
    return os.environ.get(f"TRAINFORM_PARAM_{name.upper()}", default)


def batch_at(
    data: torch.Tensor, seed: int, step: int, rank: int, size: int, context: int, delay: float = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of `rank` at `step`: random windows of the corpus, from (seed, step, rank).
    `delay` seconds stand for a slow loader (remote storage, decoding); the batch is the same."""
    time.sleep(delay)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step * 1_009 + rank)
    starts = torch.randint(0, len(data) - context - 1, (size,), generator=generator)
    windows = torch.stack([data[start : start + context + 1] for start in starts.tolist()])
    return windows[:, :-1], windows[:, 1:]


def write_checkpoint(root: Path, step: int, state: dict) -> int:
    """Write checkpoint `step`; the bytes written."""
    folder = root / f"step-{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(state, folder / STATE)
    data = (folder / STATE).read_bytes()
    manifest = {
        "step": step,
        "files": [{"path": STATE, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}],
    }
    # Written last: a checkpoint without its manifest is incomplete, and never resumed from.
    text = json.dumps(manifest, sort_keys=True)
    (folder / "manifest.json").write_text(text)
    return len(data) + len(text)


def main() -> int:
    setup = phase("setup")
    setup.__enter__()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    node = os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", "0"))
    device = torch.device(f"cuda:{local}") if backend == "nccl" else torch.device("cpu")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    steps = int(parameter("steps", "40"))
    every = int(parameter("checkpointEvery", "10"))
    seed = int(parameter("seed", "1234"))
    size = int(parameter("batch", "8"))
    context = int(parameter("context", "32"))
    pause = float(parameter("stepSeconds", "0"))
    delay = float(parameter("dataDelay", "0"))
    checkpoints = Path(os.environ["TRAINFORM_CHECKPOINT_DIR"])
    output = Path(os.environ.get("TRAINFORM_OUTPUT_DIR", checkpoints.parent / "output"))
    progress = os.environ.get("TRAINFORM_PROGRESS_FILE", "")
    resume = os.environ.get("TRAINFORM_RESUME_FROM", "")

    text = read_text(Path(os.environ["TRAINFORM_DATASET_CORPUS"]))
    vocab = vocabulary(text)
    data = encode(text, vocab)
    model = build_model(vocab, context, seed).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(parameter("learningRate", "0.01")))
    step = 0
    mean = torch.zeros((), dtype=torch.float64, device=device)
    if resume:
        state = torch.load(Path(resume) / STATE, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])
        mean = torch.tensor(float(state["loss"]), dtype=torch.float64, device=device)
        say(f"rank {rank}: resumed from {Path(resume).name} at step {step}")
    ddp = DistributedDataParallel(model, device_ids=[local] if backend == "nccl" else None)
    say(
        f"rank {rank}/{world} (node {node}, local rank {local}) joined the {backend} group: "
        f"{parameter_count(model)} parameters"
    )
    setup.__exit__(None, None, None)

    while step < steps:
        with phase("data_wait", step=step + 1):
            batch = batch_at(data, seed, step, rank, size, context, delay)
            inputs, targets = (t.to(device) for t in batch)
        with phase("compute", step=step + 1):
            logits = ddp(inputs)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            mean /= world
            time.sleep(pause)
        step += 1
        if rank == 0:
            say(f"step {step}/{steps} loss {mean.item():.6f}")
            if progress:  # replaced whole, so a reader never sees it half written
                Path(progress + ".tmp").write_text(json.dumps({"step": step}))
                os.replace(progress + ".tmp", progress)
            if step % every == 0 or step == steps:
                with phase("checkpoint", step=step) as span:
                    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "step": step, "loss": mean.item(), "vocab": vocab,
                             "context": context, "seed": seed}  # fmt: skip
                    span.bytes = write_checkpoint(checkpoints, step, state)

    if rank == 0:
        with phase("export", step=step):
            output.mkdir(parents=True, exist_ok=True)
            torch.save({"model": model.state_dict(), "vocab": vocab, "context": context,
                        "seed": seed}, output / "model.pt")  # fmt: skip
            final = {"step": step, "loss": mean.item(), "worldSize": world}
            (output / "final.json").write_text(json.dumps(final, sort_keys=True))
        say(f"final loss {mean.item():.12f} after {step} steps on {world} ranks")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
