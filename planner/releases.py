"""ModelRelease planning: which run a release publishes, whether its gates let it, and what
exactly it publishes.

The plan is the gate. For each ModelRelease the planner resolves a `release` section that
joins the spec's document (state keeps it; providers publish exactly it):

- the run: `spec.run`, else the run recorded in state for this release, else the job's
  current run (recorded in state by the apply that submitted it). So a newer run of the job
  never moves an existing release; releasing another run is a change in Git (`spec.run`).
- for a run not yet released under this spec (first plan, another run, another source or
  other suites), the checks, each refused at its field with file:line: the run is known to
  its provider and succeeded; its output folder (or the named checkpoint, valid) exists;
  every suite in `spec.evaluations` evaluated that run, succeeded, and passed its gates;
  and evaluated it on exactly the dataset versions (and manifest digests) the suite
  declares now. Then the files are read (path, size, sha256) and the provenance is taken
  from the run's lineage record (planner/lineage.py).
- for a release already published under the same run, source and suites, the recorded
  section is kept as it is: no file is read again, no gate re-judged.
- `digest`: the OCI artifact's manifest digest (providers/oci/release_manifest.py), which
  apply verifies after the push.

Read-only. make_plan (planner/plan.py) calls `resolve_releases`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from trainform.planner.desired import DesiredItem
from trainform.planner.gates import evaluate_gates, overall
from trainform.planner.jobs import JobContext, baseline_lookup
from trainform.planner.normalize import spec_hash
from trainform.planner.release_promotion import PromotionRefusal, promotion_section
from trainform.planner.release_reference import released_lookup
from trainform.planner.state import ResourceState
from trainform.providers.errors import ProviderError
from trainform.providers.oci.release_manifest import release_manifest
from trainform.providers.releases import FILES_MANIFEST, list_model_files


class Refusal(Exception):
    """A release the plan refuses: the field it is refused at and why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass
class ReleaseContext:
    jobs: JobContext
    recorded: dict[str, ResourceState]
    object_store: dict[str, Any] | None
    locate: Callable[[str, str, str], str]
    """file:line:column of (address, field path, fallback location)."""


@dataclass
class ResolvedReleases:
    items: dict[str, DesiredItem]
    """Each ModelRelease with its `release` section joined to its document."""
    notes: dict[str, list[str]]
    """What the plan shows for each (run, gates, digest), as reasons of its change."""
    problems: list[str]


def resolve_releases(desired: dict[str, DesiredItem], ctx: ReleaseContext) -> ResolvedReleases:
    resolved = ResolvedReleases({}, {}, [])
    for address, item in desired.items():
        if item.kind != "ModelRelease":
            continue
        try:
            if item.document["spec"].get("promoteFrom"):
                section, notes = promotion_section(item, ctx.recorded, desired)
            else:
                section, notes = release_section(item, ctx.recorded.get(address), ctx)
        except (Refusal, PromotionRefusal) as refusal:
            where = ctx.locate(address, refusal.field, item.location)
            resolved.problems.append(f"{address} ({where}): {refusal.field}: {refusal.message}")
            continue
        document = {**item.document, "release": section}
        resolved.items[address] = replace(item, document=document, spec_hash=spec_hash(document))
        resolved.notes[address] = notes
    return resolved


def _refs(item: DesiredItem, prefix: str) -> list[tuple[str, str, str | None]]:
    return [r for r in item.references if r[0] == prefix or r[0].startswith(prefix + ".")]


def job_outputs(recorded: ResourceState | None) -> dict[str, Any]:
    """A job's outputs in state (of its one provider instance)."""
    found: dict[str, Any] = {}
    for values in (recorded.outputs if recorded else {}).values():
        found = values or found
    return found


def release_section(
    item: DesiredItem, previous: ResourceState | None, ctx: ReleaseContext
) -> tuple[dict[str, Any], list[str]]:
    """The `release` section of `item` and the lines the plan shows for it."""
    spec = item.document["spec"]
    job = next(address for _, address, _ in _refs(item, "spec.job"))
    suites = [address for _, address, _ in _refs(item, "spec.evaluations")]
    recorded = ((previous.spec if previous else None) or {}).get("release") or {}
    current = job_outputs(ctx.recorded.get(job)).get("runId")
    if spec.get("run"):
        run_id, how = spec["run"], "pinned by spec.run"
    elif recorded.get("runId"):
        run_id, how = recorded["runId"], "pinned in state when first released"
    elif current:
        run_id = current
        how = "resolved now: the job's current run, kept in state from now on (or pin spec.run)"
    else:
        raise Refusal("spec.job", f"{job} has no run yet: apply it first (--target {job})")
    source = {"checkpoint": spec.get("checkpoint")} if spec.get("checkpoint") else {}
    unchanged = (
        recorded.get("runId") == run_id
        and recorded.get("source", {}).get("checkpoint") == source.get("checkpoint")
        and sorted(e["suite"] for e in recorded.get("evaluations", [])) == sorted(suites)
    )
    if unchanged:
        section = {key: recorded[key] for key in ("job", "runId", "source", "files")}
        section |= {key: recorded[key] for key in ("provenance", "evaluations")}
    else:
        section = _fresh_section(item, job, run_id, suites, ctx)
    manifest = release_manifest(item.address, spec["version"], section)
    section["digest"] = manifest.digest
    size = sum(f["size"] for f in section["files"])
    notes = [f"run {run_id} of {job} ({how})"]
    notes += [f"gate {e['suite']}: {g['text']}" for e in section["evaluations"] for g in e["gates"]]
    notes.append(
        f"artifact {manifest.digest}: {len(section['files'])} "
        f"file{'' if len(section['files']) == 1 else 's'}, {size} bytes, "
        f"from {section['source'].get('location') or 'the recorded release'}"
    )
    if unchanged:
        notes = [note for note in notes if not note.startswith("gate ")] + [
            "gates were judged when this run was first released"
        ]
    return section, notes


def _fresh_section(
    item: DesiredItem, job: str, run_id: str, suites: list[str], ctx: ReleaseContext
) -> dict[str, Any]:
    """Check the run and its gates, read its files: the section of a new release."""
    spec = item.document["spec"]
    run_field = "spec.run" if spec.get("run") else "spec.job"
    runs = ctx.jobs.runs_of(job)
    if runs is None:
        raise Refusal(run_field, f"the runs of {job} were not read: plan with refresh")
    run = next((r for r in runs if r.get("run_id") == run_id), None)
    if run is None:
        raise Refusal(run_field, f"run {run_id} of {job} is not known to its provider")
    attempts = run.get("attempts") or []
    phase = attempts[-1].get("phase") if attempts else "not started"
    if phase != "succeeded":
        raise Refusal(
            run_field,
            f"run {run_id} of {job} is not finished ({phase}): only a succeeded run is released",
        )
    location, source = _source(spec, run, run_id)
    try:
        files = list_model_files(location, ctx.object_store)
    except ProviderError as exc:
        raise Refusal(run_field, f"cannot read the files of run {run_id}: {exc}") from None
    clash = [f["path"] for f in files if f["path"] in (FILES_MANIFEST,)]
    if clash or not files:
        raise Refusal(
            run_field,
            f"{location} holds no files"
            if not files
            else f"{location} holds {clash[0]}, a name the release manifest takes",
        )
    record = _run_record(job, run_id, ctx)
    evaluations = [
        _judged(item, job, index, suite, run, record, ctx) for index, suite in enumerate(suites)
    ]
    inputs = record.get("inputs") or {}
    provenance = {
        "specCommit": record.get("specCommit"),
        "specDigest": record.get("specDigest"),
        "lockDigest": record.get("lockDigest"),
        "environment": record.get("environment"),
        "image": inputs.get("image"),
        "datasets": inputs.get("datasets", []),
        "code": inputs.get("code"),
        "parameters": inputs.get("parameters", {}),
        "endedAt": attempts[-1].get("ended_at") or None,
    }
    if record.get("initFrom"):
        provenance["initFrom"] = record["initFrom"]
    return {
        "job": job,
        "runId": run_id,
        "source": {**source, "location": location},
        "files": files,
        "provenance": provenance,
        "evaluations": evaluations,
    }


def _source(spec: dict[str, Any], run: dict[str, Any], run_id: str) -> tuple[str, dict[str, Any]]:
    name = spec.get("checkpoint")
    if not name:
        if not run.get("output_dir"):
            raise Refusal("spec.job", f"run {run_id} reports no output folder")
        return str(run["output_dir"]), {}
    found = next((c for c in run.get("checkpoints", []) if c.get("id") == name), None)
    if found is None:
        known = ", ".join(c["id"] for c in run.get("checkpoints", [])) or "none"
        raise Refusal("spec.checkpoint", f"run {run_id} has no checkpoint {name} (has: {known})")
    if not found.get("valid"):
        raise Refusal(
            "spec.checkpoint",
            f"checkpoint {name} of run {run_id} is not valid: "
            f"{found.get('problem') or 'incomplete'}",
        )
    return str(found.get("path") or ""), {"checkpoint": name}


def _run_record(job: str, run_id: str, ctx: ReleaseContext) -> dict[str, Any]:
    """The run's lineage record in the job's state (planner/lineage.py)."""
    outputs = job_outputs(ctx.recorded.get(job))
    record = (outputs.get("lineage") or {}).get(run_id)
    if record is None and outputs.get("runId") == run_id:
        record = {"inputs": outputs.get("inputs", {}), "lockDigest": outputs.get("lockDigest")}
    if record is None:
        raise Refusal("spec.run", f"state holds no record of run {run_id} of {job}")
    return dict(record)


def _judged(
    item: DesiredItem,
    job: str,
    index: int,
    suite_address: str,
    run: dict[str, Any],
    record: dict[str, Any],
    ctx: ReleaseContext,
) -> dict[str, Any]:
    """The suite's verdict on the run, or a Refusal at `spec.evaluations[index]`."""
    field = f"spec.evaluations[{index}]"
    run_id = run["run_id"]
    suite = ctx.jobs.desired[suite_address]
    tried = [e for e in run.get("evaluations", []) if e.get("suite") == suite_address]
    if not tried:
        raise Refusal(field, f"{suite_address} has not evaluated run {run_id} yet")
    last = tried[-1]
    if last.get("phase") != "succeeded":
        raise Refusal(
            field,
            f"{suite_address} on run {run_id} is {last.get('phase')}: "
            f"{last.get('reason') or 'no verdict'}",
        )
    job_item = ctx.jobs.desired.get(job, item)
    declared = _declared_datasets(suite, ctx.jobs)
    results = evaluate_gates(
        suite.document["spec"].get("gates", []),
        last.get("metrics") or {},
        baseline_lookup(job_item, ctx.jobs, suite),
        released_lookup(item.project, suite_address, declared, ctx.recorded),
    )
    verdict = overall(results)
    if verdict != "pass":
        failing = "; ".join(r.describe() for r in results if r.status != "pass")
        raise Refusal(field, f"{suite_address} on run {run_id}: gate {verdict}: {failing}")
    read = (record.get("evaluationInputs") or {}).get(suite_address)
    if read is None:
        raise Refusal(
            field, f"no record of the dataset versions {suite_address} read on run {run_id}"
        )
    if read != declared:
        raise Refusal(
            field,
            f"{suite_address} evaluated run {run_id} on {_datasets_text(read)}, but the "
            f"suite declares {_datasets_text(declared)}: evaluate the run on the declared "
            "data before releasing it",
        )
    return {
        "suite": suite_address,
        "verdict": verdict,
        "metrics": dict(last.get("metrics") or {}),
        "datasets": read,
        "gates": [r.to_json() | {"text": r.describe()} for r in results],
    }


def _declared_datasets(suite: DesiredItem, jobs: JobContext) -> list[dict[str, str]]:
    declared = []
    for _, address, version in _refs(suite, "spec.datasets"):
        dataset = jobs.desired[address]
        chosen = version or dataset.document["spec"]["versions"][-1]["name"]
        key = f"{address}@{chosen}"
        digest = jobs.pins.datasets.get(key, {}).get("manifestDigest") or "unpinned"
        declared.append({"dataset": key, "manifestDigest": digest})
    return sorted(declared, key=lambda d: d["dataset"])


def _datasets_text(datasets: list[dict[str, str]]) -> str:
    if not datasets:
        return "no dataset"
    return ", ".join(f"{d['dataset']} ({d['manifestDigest'][:19]})" for d in datasets)
