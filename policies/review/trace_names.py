"""A trace's queue and project names checked against the specs of both sides.

A job whose queue no side defines is never admitted under either, so base and head look
the same and the review would call the change harmless. `match_trace_names` therefore
refuses a trace naming queues or projects that neither the base nor the head declares,
listing each unknown name with its job count and the closest declared one, unless an
explicit mapping (`--map-queue TRACE=SPEC`, `--map-project TRACE=SPEC`) renames it. A name
the head removes (declared on the base only) is legitimate: the review shows its jobs as
never admitted under the head. Projects are checked only when the specs declare Projects
(a platform without them knows projects only from its Quotas and the trace).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from trainform.policies.review.errors import TraceError
from trainform.specs import SpecSet

if TYPE_CHECKING:
    from trainform.policies.queueing import TraceJob

SHOWN = 20


class UnknownTraceNamesError(TraceError):
    """The trace names queues or projects that no side of the review declares."""

    def __init__(self, trace: str, queues: Counter[str], projects: Counter[str],
                 known_queues: set[str], known_projects: set[str]) -> None:  # fmt: skip
        self.trace = trace
        self.queues = queues
        self.projects = projects
        lines = [f"cannot simulate {trace}: it names queues or projects the specs do not declare"]
        for what, unknown, known, option in (
            ("queue", queues, known_queues, "--map-queue"),
            ("project", projects, known_projects, "--map-project"),
        ):
            for name, count in sorted(unknown.items(), key=lambda item: (-item[1], item[0]))[
                :SHOWN
            ]:
                close = difflib.get_close_matches(name, sorted(known), n=1)
                hint = f"; did you mean `{close[0]}`? ({option} {name}={close[0]})" if close else ""
                lines.append(f"  unknown {what} `{name}` ({count} jobs){hint}")
            if len(unknown) > SHOWN:
                lines.append(f"  ... and {len(unknown) - SHOWN} more unknown {what}s")
        lines.append(
            "declared queues: "
            + (", ".join(sorted(known_queues)) or "none")
            + "; map trace names with --map-queue TRACE=SPEC and --map-project TRACE=SPEC"
        )
        super().__init__("\n".join(lines))


def parse_mapping(pairs: Sequence[str], option: str) -> dict[str, str]:
    """`["old=new", ...]` as a dict; a pair without `=` or with an empty side is an error."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise TraceError(f"cannot read {option} {pair!r}: expected TRACE_NAME=SPEC_NAME")
        mapping[old.strip()] = new.strip()
    return mapping


def _declared(specs: SpecSet, kind: str) -> set[str]:
    return {r.name for r in specs.resources.values() if r.kind == kind}


def match_trace_names(
    jobs: Sequence[TraceJob],
    base: SpecSet,
    head: SpecSet,
    trace: str,
    queue_map: Mapping[str, str] | None = None,
    project_map: Mapping[str, str] | None = None,
) -> list[TraceJob]:
    """`jobs` with mapped names; UnknownTraceNamesError if a name is declared on no side."""
    queue_map, project_map = queue_map or {}, project_map or {}
    queues = _declared(base, "Queue") | _declared(head, "Queue")
    projects = _declared(base, "Project") | _declared(head, "Project")
    check_projects = bool(projects)
    renamed = []
    unknown_queues: Counter[str] = Counter()
    unknown_projects: Counter[str] = Counter()
    for job in jobs:
        queue = queue_map.get(job.queue, job.queue)
        project = project_map.get(job.project, job.project)
        if queue not in queues:
            unknown_queues[job.queue] += 1
        if check_projects and project not in projects:
            unknown_projects[job.project] += 1
        if queue != job.queue or project != job.project:
            job = dataclasses.replace(job, queue=queue, project=project)
        renamed.append(job)
    if unknown_queues or unknown_projects:
        raise UnknownTraceNamesError(trace, unknown_queues, unknown_projects, queues, projects)
    return renamed
