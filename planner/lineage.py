"""Lineage: where a run (and so a checkpoint or a model) came from.

At apply, every submitted run gets a provenance record in the job's state outputs
(`lineage[<run id>]`): its reproducibility inputs (image digest, dataset versions with
manifest digests, code identity, command, parameters, resources, initFrom), the run of
the `initFrom` job it started from, the spec commit and the lock and spec digests of the
plan that submitted it. `trainform lineage` joins that record with what the provider
knows of the run now (checkpoints, output folder, evaluations and their gates) and
follows `initFrom` to the parent run's own lineage. A checkpoint path or a model folder
is traced back to its run through the runs the providers report. The run's process group
(nodes, processes per node, world size) is read from its recorded resources, else from
what the provider reports of its latest attempt, and each node's host from that attempt.
Read-only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.gates import evaluate_gates, overall
from trainform.planner.lockfile import git_output
from trainform.planner.state import State
from trainform.planner.status import matching_jobs, observe_jobs
from trainform.planner.timeline import world_size
from trainform.planner.workspace import Workspace
from trainform.providers.launch import processes_per_node
from trainform.specs.secrets import mask_tree

MAX_DEPTH = 16
_RUN_ID = re.compile(r"\br-[0-9a-f]{12}\b")


def spec_commit(root: Path) -> str:
    """The spec folder's Git commit, marked `+dirty` with uncommitted changes; "" outside Git."""
    head = git_output(["rev-parse", "--verify", "--quiet", "HEAD"], root)
    if not head:
        return ""
    dirty = git_output(["status", "--porcelain", "--", "."], root)
    return head.strip() + ("+dirty" if dirty else "")


def provenance(
    job: dict[str, Any], state: State, spec: dict[str, Any], commit: str, plan: Any
) -> dict[str, Any]:
    """The record kept for a run that an apply submits (see the module docstring)."""
    record: dict[str, Any] = {
        "inputs": job.get("inputs", {}),
        "specCommit": commit or None,
        "specDigest": plan.spec_digest,
        "lockDigest": plan.lock_digest or None,
        "environment": plan.environment,
    }
    init = spec.get("initFrom")
    if init:
        parent = _parent_address(job, init["job"], state)
        parent_run = None
        if parent is not None:
            for outputs in state.resources[parent].outputs.values():
                parent_run = outputs.get("runId") or parent_run
        record["initFrom"] = {
            "job": parent or init["job"],
            "checkpoint": init.get("checkpoint", "latest"),
            "runId": parent_run,
        }
    return record


def record_evaluation_inputs(lineage: dict[str, Any], evaluations: list[dict[str, Any]]) -> None:
    """Keep, in the evaluated run's record, the dataset versions (and manifest digests) each
    evaluation launch reads: a ModelRelease checks them against what its suite declares."""
    for launch in evaluations:
        run_id = launch.get("model_run") or launch.get("run_id")
        entry = lineage.get(run_id or "")
        if entry is None or not launch.get("suite"):
            continue
        read = sorted(
            (
                {
                    "dataset": f"{dataset['address']}@{dataset['version']}",
                    "manifestDigest": dataset.get("manifest_digest") or "unpinned",
                }
                for dataset in launch.get("datasets") or []
            ),
            key=lambda d: d["dataset"],
        )
        inputs = dict(entry.get("evaluationInputs") or {})
        inputs[launch["suite"]] = read
        lineage[str(run_id)] = {**entry, "evaluationInputs": inputs}


def _parent_address(job: dict[str, Any], name: str, state: State) -> str | None:
    launch = job.get("launch") or {}
    address = str(launch.get("address", ""))
    parts = address.split("/")
    candidates = [f"TrainingJob/{parts[1]}/{name}"] if len(parts) == 3 else []
    candidates.append(name)
    return next((c for c in candidates if c in state.resources), None)


@dataclass
class Lineage:
    address: str
    run_id: str
    recorded: dict[str, Any]
    run: dict[str, Any] | None
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    parent: Lineage | None = None
    current: bool = True

    def to_json(self) -> dict[str, Any]:
        inputs = self.recorded.get("inputs") or {}
        run = self.run or {}
        attempts = run.get("attempts") or []
        return {
            "address": self.address,
            "runId": self.run_id,
            "current": self.current,
            "phase": attempts[-1]["phase"] if attempts else "unknown",
            "attempts": len(attempts),
            "image": inputs.get("image"),
            "datasets": inputs.get("datasets", []),
            "code": inputs.get("code"),
            "command": inputs.get("command"),
            "parameters": inputs.get("parameters", {}),
            "resources": inputs.get("resources", {}),
            "specCommit": self.recorded.get("specCommit"),
            "specDigest": self.recorded.get("specDigest"),
            "lockDigest": self.recorded.get("lockDigest"),
            "environment": self.recorded.get("environment"),
            "outputDir": run.get("output_dir") or None,
            "checkpoints": [
                {"id": c["id"], "step": c["step"], "valid": c["valid"], "path": c.get("path")}
                for c in run.get("checkpoints", [])
            ],
            "evaluations": self.evaluations,
            "initFrom": self.recorded.get("initFrom"),
            "parent": self.parent.to_json() if self.parent else None,
            **self.group(),
        }

    def group(self) -> dict[str, Any]:
        """nodes, procsPerNode, worldSize and each node's hosts of the run."""
        resources = (self.recorded.get("inputs") or {}).get("resources") or {}
        attempts = (self.run or {}).get("attempts") or []
        latest = attempts[-1] if attempts else {}
        if resources.get("nodes"):
            nodes, procs = resources["nodes"], processes_per_node(resources)
        else:
            nodes, procs = latest.get("nodes"), latest.get("procs_per_node")
        return {
            "nodes": nodes,
            "procsPerNode": procs,
            "worldSize": world_size(nodes, procs),
            "hosts": list(latest.get("hosts") or []),
        }


class LineageError(Exception):
    """The address, checkpoint or folder names no run trainform knows."""


def find_lineage(workspace: Workspace, target: str, run_id: str | None = None) -> Lineage:
    """The lineage of a job address (its current run, or `run_id`), a checkpoint or a
    model folder (path or URI), with its parents."""
    desired = build_desired(workspace.specs)
    jobs = [d for d in desired.values() if d.kind == "TrainingJob"]
    state = workspace.backend.read() or State.new()
    runs = observe_jobs(workspace, jobs)
    address = _resolve_address(target, jobs, state)
    if address is None:
        address, run_id = _find_by_path(target, runs)
    return _lineage(address, run_id, desired, state, runs, 0)


def _resolve_address(target: str, jobs: list[DesiredItem], state: State) -> str | None:
    known = {j.address for j in jobs} | {
        a for a, r in state.resources.items() if r.kind == "TrainingJob"
    }
    short = matching_jobs(known, target)
    if len(short) > 1:
        raise LineageError(f"{target} is ambiguous: {', '.join(short)}")
    return short[0] if short else None


def _find_by_path(target: str, runs: dict[str, list[dict[str, Any]]]) -> tuple[str, str]:
    wanted = _normal(target)
    for address, job_runs in runs.items():
        for run in job_runs:
            places = [run.get("output_dir") or ""] + [
                c.get("path") or "" for c in run.get("checkpoints", [])
            ]
            for place in places:
                if place and (_normal(place) == wanted or wanted.startswith(_normal(place) + "/")):
                    return address, run["run_id"]
    found = _RUN_ID.search(target)
    if found:
        for address, job_runs in runs.items():
            if any(r["run_id"] == found.group(0) for r in job_runs):
                return address, found.group(0)
    raise LineageError(
        f"cannot find the run of {target}: it is no TrainingJob address, and no run the "
        "providers report has it as a checkpoint or output folder"
    )


def _normal(place: str) -> str:
    if "://" in place:
        return place.rstrip("/")
    try:
        return str(Path(place).resolve()).rstrip("/")
    except OSError:
        return place.rstrip("/")


def _lineage(
    address: str,
    run_id: str | None,
    desired: dict[str, DesiredItem],
    state: State,
    runs: dict[str, list[dict[str, Any]]],
    depth: int,
) -> Lineage:
    resource = state.resources.get(address)
    outputs: dict[str, Any] = {}
    if resource is not None:
        for values in resource.outputs.values():
            outputs = values or outputs
    current = outputs.get("runId")
    chosen = run_id or current
    job_runs = runs.get(address, [])
    if chosen is None and job_runs:
        chosen = job_runs[-1]["run_id"]
    if chosen is None:
        raise LineageError(f"{address} has no run yet: run `trainform apply`")
    recorded = dict((outputs.get("lineage") or {}).get(chosen) or {})
    if not recorded and chosen == current:
        recorded = {"inputs": outputs.get("inputs", {}), "lockDigest": outputs.get("lockDigest")}
    recorded["inputs"] = mask_tree(recorded.get("inputs") or {})
    run = next((r for r in job_runs if r["run_id"] == chosen), None)
    lineage = Lineage(address, chosen, recorded, run, current=chosen == current)
    lineage.evaluations = _evaluations(run, desired, recorded.get("evaluationInputs") or {})
    parent = recorded.get("initFrom") or {}
    if parent.get("job") and depth < MAX_DEPTH:
        try:
            lineage.parent = _lineage(
                parent["job"], parent.get("runId"), desired, state, runs, depth + 1
            )
        except LineageError:
            lineage.parent = None
    return lineage


def _evaluations(
    run: dict[str, Any] | None,
    desired: dict[str, DesiredItem],
    read: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Each evaluation of the run with its gates, and the dataset versions it read where the
    apply that launched it recorded them."""
    found = []
    for evaluation in (run or {}).get("evaluations", []):
        suite = desired.get(evaluation["suite"])
        metrics = evaluation.get("metrics") if evaluation["phase"] == "succeeded" else None
        entry: dict[str, Any] = {
            "suite": evaluation["suite"],
            "phase": evaluation["phase"],
            "metrics": metrics or {},
        }
        if read and evaluation["suite"] in read:
            entry["datasets"] = list(read[evaluation["suite"]])
        if suite is not None:
            results = evaluate_gates(suite.document["spec"]["gates"], metrics)
            entry["gate"] = overall(results) if metrics is not None else "pending"
            entry["gates"] = [r.to_json() | {"text": r.describe()} for r in results]
        found.append(entry)
    return found
