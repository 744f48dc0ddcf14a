"""The released model a `compareTo.release` gate compares a run with.

The reference is what state recorded when the named ModelRelease (in the project of the
release being planned) was published: the `metrics` of its evaluation by the same suite,
on the same dataset versions and manifest digests (the same task set). Nothing is re-run.
No release of that name yet: nothing to regress from, the gate passes and says so. A
release evaluated by another suite, without that metric, or on other data: not comparable,
the gate fails and says why.
"""

from __future__ import annotations

from typing import Any

from trainform.planner.gates import ReleasedLookup, ReleasedMetric
from trainform.planner.state import ResourceState


def released_lookup(
    project: str | None,
    suite: str,
    datasets: list[dict[str, str]],
    recorded: dict[str, ResourceState],
) -> ReleasedLookup:
    def lookup(name: str, metric: str) -> ReleasedMetric:
        address = f"ModelRelease/{project}/{name}" if project else f"ModelRelease/{name}"
        state = recorded.get(address)
        section: dict[str, Any] = ((state.spec if state else None) or {}).get("release") or {}
        label = f"released {address}"
        if not section:
            return ReleasedMetric(None, label, True, f"{address} not released yet")
        version = (state.spec.get("spec") or {}).get("version") if state else None
        label = f"released {address} {version} (run {section.get('runId')})"
        found = next((e for e in section.get("evaluations", []) if e.get("suite") == suite), None)
        if found is None:
            return ReleasedMetric(None, label, False, f"{address} was not evaluated by {suite}")
        if metric not in (found.get("metrics") or {}):
            return ReleasedMetric(None, label, False, f"{address} recorded no {metric}")
        if sorted(found.get("datasets") or [], key=lambda d: d["dataset"]) != datasets:
            return ReleasedMetric(
                None,
                label,
                False,
                f"{address} was evaluated on {_text(found.get('datasets') or [])}, this run "
                f"on {_text(datasets)}: not the same task set",
            )
        return ReleasedMetric(float(found["metrics"][metric]), label)

    return lookup


def _text(datasets: list[dict[str, str]]) -> str:
    return ", ".join(d["dataset"] for d in datasets) or "no dataset"
