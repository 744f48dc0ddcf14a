"""Trusted policies: settings of built-ins, disabled ids, user rules and waivers.

They are read from a trusted folder given on the command line (`--policies PATH`; in CI the
base branch checkout), never from the change under review. The folder holds
`policies.yaml` (see docs/policies.md):

    apiVersion: trainform/v1
    kind: PolicyConfig
    settings:                      # per built-in id: its parameters and/or `severity`
      pool-capacity: {severity: deny}
      long-job-checkpoint: {maxRuntimeWithoutCheckpoint: 6h}
    disabled: [cohort-borrowing]
    rules: [{id, name, severity, kinds, violation | condition, message, params, field}]
    waivers: [{policy, address, reason, expires}]

A folder without policies.yaml means the defaults. Without `--policies`, trainform.yaml's
`policies:` section applies (`settings`, `disabled`, and `path`, a folder whose
policies.yaml adds rules and waivers): then the spec folder itself is trusted, which suits
a laptop, not CI. Any mistake (unknown policy id or parameter, invalid CEL, bad date) is an
error naming file:line, so a typo never silently turns a policy off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from trainform.policies.builtin import BUILTINS
from trainform.policies.builtin.isolation import ID as ISOLATION_ID
from trainform.policies.builtin.isolation import unanchored
from trainform.policies.codeowners import CodeOwners, find_code_owners
from trainform.policies.findings import Severity
from trainform.policies.rules import RuleCompileError, UserRule
from trainform.policies.waivers import EXPIRED_ID, Waiver
from trainform.specs import RootConfig
from trainform.specs.suggest import closest_name

POLICY_FILE = "policies.yaml"
ENGINE_IDS = (EXPIRED_ID,)


class PolicyConfigError(Exception):
    """The trusted policies cannot be read: missing folder, bad YAML, unknown id, bad rule."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class RuleModel(_Model):
    id: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    name: str = ""
    severity: Severity = Severity.DENY
    kinds: list[str] = Field(default_factory=list)
    violation: str | None = None
    condition: str | None = None
    message: str = ""
    message_expression: str = Field(default="", alias="messageExpression")
    params: dict[str, Any] = Field(default_factory=dict)
    field: str = ""


class WaiverModel(_Model):
    policy: str = Field(min_length=1)
    address: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    expires: date


class PolicyFileModel(_Model):
    api_version: Literal["trainform/v1"] = Field(default="trainform/v1", alias="apiVersion")
    kind: Literal["PolicyConfig"] = "PolicyConfig"
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    disabled: list[str] = Field(default_factory=list)
    rules: list[RuleModel] = Field(default_factory=list)
    waivers: list[WaiverModel] = Field(default_factory=list)


@dataclass
class TrustedPolicies:
    """What the engine runs: built-in settings, disabled ids, user rules and waivers."""

    source: str = "defaults"
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    disabled: frozenset[str] = frozenset()
    rules: list[UserRule] = field(default_factory=list)
    waivers: list[Waiver] = field(default_factory=list)
    code_owners: CodeOwners = field(default_factory=CodeOwners)
    """CODEOWNERS of the trusted folder: whose approval a tenancy finding names."""

    def severity_of(self, policy: str, default: Severity) -> Severity:
        return Severity(self.settings.get(policy, {}).get("severity", default))

    def parameters_of(self, policy: str) -> dict[str, Any]:
        return {
            **BUILTINS[policy].parameters,
            **{k: v for k, v in self.settings.get(policy, {}).items() if k != "severity"},
        }


def _position(node: Any, path: list[str | int]) -> tuple[int, int]:
    line, column = 1, 1
    for step in path:
        if isinstance(node, CommentedMap) and step in node:
            line, column = node.lc.value(step)
            line, column = line + 1, column + 1
            node = node[step]
        elif isinstance(node, CommentedSeq) and isinstance(step, int) and step < len(node):
            line, column = node.lc.item(step)
            line, column = line + 1, column + 1
            node = node[step]
        else:
            break
    return line, column


def _check_settings(
    settings: dict[str, dict[str, Any]], disabled: list[str], rule_ids: set[str], where: str
) -> None:
    known = [*BUILTINS, *ENGINE_IDS, *rule_ids]
    for policy in [*settings, *disabled]:
        if policy not in known:
            hint = closest_name(policy, known)
            raise PolicyConfigError(
                f"{where}: unknown policy id `{policy}`"
                + (f"; did you mean `{hint}`?" if hint else f" (known: {', '.join(known)})")
            )
    for policy, values in settings.items():
        if not isinstance(values, dict):
            raise PolicyConfigError(f"{where}: settings of `{policy}` must be a mapping")
        allowed = {"severity", *(BUILTINS[policy].parameters if policy in BUILTINS else ())}
        for name in values:
            if name not in allowed:
                raise PolicyConfigError(
                    f"{where}: `{policy}` has no setting `{name}` (settings: "
                    f"{', '.join(sorted(allowed))})"
                )
            default = BUILTINS[policy].parameters.get(name) if policy in BUILTINS else None
            if isinstance(default, list | bool) and not isinstance(values[name], type(default)):
                # A string where a list belongs would be read letter by letter.
                raise PolicyConfigError(
                    f"{where}: `{policy}` setting `{name}` must be a "
                    f"{'list' if isinstance(default, list) else 'boolean'}, "
                    f"not {values[name]!r}"
                )
        if "severity" in values and values["severity"] not in ("deny", "warn"):
            raise PolicyConfigError(f"{where}: severity of `{policy}` must be deny or warn")
    _check_admin_paths(settings.get(ISOLATION_ID, {}).get("adminPaths") or [], where)


def _check_admin_paths(patterns: list[Any], where: str) -> None:
    """adminPaths are globs as CODEOWNERS reads them; one that would match at any depth
    without saying so (`quotas.yaml`, `platform/`) would make a team's own
    teams/x/quotas.yaml an admin path, so it is refused with the anchored spelling."""
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise PolicyConfigError(
                f"{where}: `{ISOLATION_ID}` adminPaths holds {pattern!r}, not a path glob"
            )
    loose = unanchored(patterns)
    if loose:
        first = loose[0].strip().removeprefix("./")
        raise PolicyConfigError(
            f"{where}: `{ISOLATION_ID}` adminPaths `{first}` matches at any depth (as in "
            f"CODEOWNERS, a pattern without a `/` at its start or middle is not anchored), "
            f"so it would make files inside team folders admin paths too: write `/{first}` "
            f"for the one at the root, or `**/{first}` if every depth is meant"
        )


def _read_file(file: Path, display: str) -> TrustedPolicies:
    try:
        raw = YAML(typ="rt").load(file.read_text(encoding="utf-8"))
    except (OSError, YAMLError, UnicodeDecodeError) as exc:
        raise PolicyConfigError(f"cannot read policies {display}: {exc}") from None
    raw = CommentedMap() if raw is None else raw
    try:
        model = PolicyFileModel.model_validate(raw)
    except ValidationError as exc:
        problem = exc.errors()[0]
        line, column = _position(raw, list(problem["loc"]))
        where = ".".join(str(step) for step in problem["loc"])
        raise PolicyConfigError(
            f"cannot read policies {display}:{line}:{column}: {where}: {problem['msg']}"
        ) from None
    rules = []
    for index, rule in enumerate(model.rules):
        line, column = _position(raw, ["rules", index])
        location = f"{display}:{line}:{column}"
        if (rule.violation is None) == (rule.condition is None):
            raise PolicyConfigError(
                f"{location}: rule {rule.id} needs exactly one of `violation` (true when the "
                "resource violates the rule) and `condition` (what must hold)"
            )
        user_rule = UserRule(
            id=rule.id,
            name=rule.name or rule.id,
            severity=rule.severity,
            kinds=tuple(rule.kinds),
            expression=rule.violation if rule.violation is not None else str(rule.condition),
            must_hold=rule.violation is None,
            message=rule.message,
            message_expression=rule.message_expression,
            params=rule.params,
            field=rule.field,
            location=location,
        )
        try:
            user_rule.compile()
        except RuleCompileError as exc:
            raise PolicyConfigError(f"{location}: {exc}") from None
        rules.append(user_rule)
    ids = [rule.id for rule in rules]
    clash = sorted({i for i in ids if ids.count(i) > 1 or i in BUILTINS or i in ENGINE_IDS})
    if clash:
        raise PolicyConfigError(f"{display}: rule ids must be unique: {', '.join(clash)}")
    _check_settings(model.settings, model.disabled, set(ids), display)
    waivers = []
    for index, waiver in enumerate(model.waivers):
        line, column = _position(raw, ["waivers", index])
        waivers.append(
            Waiver(
                waiver.policy,
                waiver.address,
                waiver.reason,
                waiver.expires,
                f"{display}:{line}:{column}",
                index,
            )
        )
    return TrustedPolicies(
        source=display,
        settings={k: dict(v) for k, v in model.settings.items()},
        disabled=frozenset(model.disabled),
        rules=rules,
        waivers=waivers,
    )


def _read_folder(folder: Path) -> TrustedPolicies:
    if folder.is_file():
        return _read_file(folder, folder.as_posix())
    if not folder.is_dir():
        raise PolicyConfigError(f"cannot read policies: {folder} is not a folder")
    file = folder / POLICY_FILE
    if not file.exists():
        return TrustedPolicies(source=f"{folder.as_posix()} (no {POLICY_FILE}: defaults)")
    return _read_file(file, file.as_posix())


def _trusted_folders(path: Path) -> list[Path]:
    """Where CODEOWNERS of a `--policies` path may be: its folder, and the folder holding it
    (in CI `.trusted/policies` sits in `.trusted`, the base branch checkout)."""
    folder = path if path.is_dir() else path.parent
    return [folder, folder.parent] if folder.resolve() != folder.parent.resolve() else [folder]


def load_trusted(
    path: Path | None, fallback: RootConfig, spec_root: Path | None = None
) -> TrustedPolicies:
    """The policies from the trusted folder `path`; without one, from `fallback`'s
    `policies:` section (its `path` is relative to `spec_root`). CODEOWNERS comes from the
    same trusted place: `path` (or the folder holding it), else `spec_root`."""
    if path is not None:
        loaded = _read_folder(Path(path))
        loaded.code_owners = find_code_owners(_trusted_folders(Path(path)))
        return loaded
    section = fallback.policies
    base = TrustedPolicies(source="trainform.yaml")
    if section.path:
        folder = Path(section.path)
        if not folder.is_absolute() and spec_root is not None:
            folder = spec_root / folder
        base = _read_folder(folder)
    _check_settings(
        section.settings, section.disabled, {r.id for r in base.rules}, "trainform.yaml policies"
    )
    settings = {k: dict(v) for k, v in base.settings.items()}
    for policy, values in section.settings.items():
        settings[policy] = {**settings.get(policy, {}), **values}
    return TrustedPolicies(
        source=base.source if section.path else "trainform.yaml",
        settings=settings,
        disabled=base.disabled | frozenset(section.disabled),
        rules=base.rules,
        waivers=base.waivers,
        code_owners=find_code_owners([spec_root]) if spec_root is not None else CodeOwners(),
    )
