"""What a saved plan depends on, checked again before `apply FILE` calls any provider.

A plan made with `plan -out` records the spec digest, the digest of `trainform.lock`, the
environment, the state location, the code digests it resolved, the state lineage and
serial and the tool version. `check_bindings` reloads the spec folder the plan names (with
the plan's environment and the --var/--var-file given to apply), recomputes each of them,
and raises StalePlanError listing every difference. Lineage and serial are checked by
`planner.apply.check_fresh` against the state read under the lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainform.planner.desired import DesiredItem, build_desired, spec_digest
from trainform.planner.lockfile import LOCK_FILE, LockError, local_roots, resolve_code, resolve_pins
from trainform.planner.plan_model import Plan, StalePlanError
from trainform.planner.session import ProviderSet, config_as_data
from trainform.specs import load_specs
from trainform.specs.code_sources import UnsafeCode, parse_repo
from trainform.specs.secrets import JOB_KINDS, mask, sensitive_values


def lock_digest(root: Path) -> str:
    path = root / LOCK_FILE
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def comparable_location(location: str, spec_root: Path | None = None) -> str:
    """A state location as a plan records it: URLs as they are; a local path inside the
    spec folder relative to it (`./...`), so the plan binds to the folder it is applied in,
    not to the checkout it was made in; other local paths absolute."""
    if "://" in location:
        return location
    path = Path(location).resolve()
    if spec_root is not None:
        try:
            return "./" + path.relative_to(spec_root.resolve()).as_posix()
        except ValueError:
            pass
    return str(path)


def _code_from_key(key: str) -> dict[str, str]:
    repo, _, path = key.rpartition("#")
    return {"repo": repo, "path": "" if path == "." else path}


def binding_differences(
    saved: Plan,
    spec_root: Path,
    state_location: str,
    environment: str | None = None,
    variables: Sequence[str] = (),
    var_files: Sequence[str] = (),
) -> tuple[list[str], dict[str, DesiredItem]]:
    """One line per thing that differs between the saved plan and what holds now, and the
    desired resources as loaded now."""
    problems = []
    if environment is not None and environment != saved.environment:
        problems.append(
            f"environment: the plan was made for {saved.environment or '(none)'}, apply was "
            f"asked for {environment}"
        )
    bound = saved.state_binding or saved.state_location
    if bound and bound != comparable_location(
        state_location, spec_root if saved.state_binding else None
    ):
        problems.append(
            f"state location: the plan was made against {saved.state_location}, the spec "
            f"folder's state is now {state_location}"
        )
    now_lock = lock_digest(spec_root)
    if now_lock != saved.lock_digest:
        problems.append(
            f"{LOCK_FILE}: {saved.lock_digest or 'absent'} when planned, {now_lock or 'absent'} now"
        )
    specs = load_specs(
        spec_root,
        environment=saved.environment,
        variables=variables,
        var_files=var_files,
    )
    desired = build_desired(specs)
    now_specs = spec_digest(desired, config_as_data(specs.config))
    if now_specs != saved.spec_digest:
        problems.append(
            f"specs: digest {saved.spec_digest} when planned, {now_specs} now (a spec, "
            "trainform.yaml, or the --var/--var-file values changed)"
        )
    for key, pinned in sorted((saved.pins.get("code") or {}).items()):
        code = _code_from_key(key)
        try:
            remote = parse_repo(code["repo"]).remote
        except UnsafeCode as exc:
            problems.append(f"code {key}: {exc}")
            continue
        if remote and "ref" not in pinned:
            continue  # a remote pinned commit is named by the specs themselves
        try:
            current = resolve_code(
                code,
                spec_root,
                specs.config.security.code_hosts,
                local_roots(specs.config, spec_root),
            )
        except LockError as exc:
            problems.append(f"code {key}: cannot be resolved now ({exc})")
            continue
        if current != {k: v for k, v in pinned.items() if k != "ref"} and current != pinned:
            problems.append(f"code {key}: {_short(pinned)} when planned, {_short(current)} now")
    return problems, desired


def _short(entry: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(entry.items()))


def check_bindings(
    saved: Plan,
    spec_root: Path,
    state_location: str,
    location: str,
    environment: str | None = None,
    variables: Sequence[str] = (),
    var_files: Sequence[str] = (),
) -> tuple[Plan, dict[str, DesiredItem]]:
    """The saved plan, ready to apply, and the desired resources it was proven to come
    from; or StalePlanError naming every difference."""
    problems, desired = binding_differences(
        saved, spec_root, state_location, environment, variables, var_files
    )
    if problems:
        raise StalePlanError(
            f"cannot apply plan {location}: what it was made from changed, so it is not the "
            "plan that was reviewed. Nothing was changed. Create a new plan.\n  "
            + "\n  ".join(problems)
        )
    return with_secrets(saved, desired), desired


def with_secrets(saved: Plan, desired: dict[str, DesiredItem]) -> Plan:
    """The saved plan with each masked job value put back from the specs it was made from.

    A plan file holds `(sensitive:<digest>)` where a job value looks secret, as every
    output does. The specs were just proven to be the ones planned (same digest), so each
    mask maps back to exactly one value of theirs; only jobs apply will run see it."""
    raw = sensitive_values([item.document for item in desired.values() if item.kind in JOB_KINDS])
    if not raw:
        return saved
    values = {mask(value): value for value in raw}

    def restore(tree: Any) -> Any:
        if isinstance(tree, str):
            return values.get(tree, tree)
        if isinstance(tree, dict):
            return {key: restore(item) for key, item in tree.items()}
        if isinstance(tree, list):
            return [restore(item) for item in tree]
        return tree

    changes = [
        dataclasses.replace(
            change,
            before=restore(change.before),
            after=restore(change.after),
            job=restore(change.job),
            applied=restore(change.applied),
        )
        if change.kind in JOB_KINDS
        else change
        for change in saved.changes
    ]
    return dataclasses.replace(saved, changes=changes)


def check_datasets(
    saved: Plan,
    desired: dict[str, DesiredItem],
    spec_root: Path,
    providers: ProviderSet,
    location: str,
) -> None:
    """Re-resolve every dataset version the plan's jobs pinned; refuse on any difference.

    Resolution only reads (manifests, listings): it runs before any mutating call."""
    pinned = saved.pins.get("datasets") or {}
    if not pinned:
        return
    wanted = {key.partition("@")[0] for key in pinned}
    subset = {a: item for a, item in desired.items() if a in wanted}
    try:
        now = resolve_pins(subset, providers, spec_root).datasets
    except LockError as exc:
        raise StalePlanError(f"cannot apply plan {location}: {exc}") from None
    problems = [
        f"dataset {key}: manifest {entry.get('manifestDigest')} when planned, "
        f"{(now.get(key) or {}).get('manifestDigest', 'gone')} now"
        for key, entry in sorted(pinned.items())
        if now.get(key) != entry
    ]
    if problems:
        raise StalePlanError(
            f"cannot apply plan {location}: the data it pinned changed since it was made. "
            "Nothing was changed. Create a new plan.\n  " + "\n  ".join(problems)
        )
