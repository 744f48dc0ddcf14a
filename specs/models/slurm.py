"""Slurm-only sections of Project, Queue and Quota specs: Slurm settings stated verbatim.

A generic field (Queue.defaultPriority, Queue.maxRuntime, ...) maps to one Slurm setting
(docs/slurm.md). Everything else a Slurm site sets by hand (a QOS's MaxWall or Preempt list,
an account's parent, a partition's PriorityTier, limits on one user's association) is stated
here under Slurm's own option name, with a value as `sacctmgr show` or slurm.conf spells it.
A setting named here is managed: trainform writes it and reports drift on it; a setting
not named is left exactly as it is live. An empty value asks Slurm to clear the setting.

The key tables below are the whole vocabulary: the Slurm provider reads them, and
docs/slurm.md lists them (tests/providers/slurm/test_mapping_table.py keeps both in step).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator
from trainform.specs.models.base import SpecModel
from trainform.specs.names import ResourceName
from trainform.specs.suggest import closest_name

# Settings of a QOS (`sacctmgr modify qos ... set <key>=<value>`).
QOS_KEYS = (
    "Description",
    "Flags",
    "GraceTime",
    "GrpJobs",
    "GrpSubmitJobs",
    "GrpTRES",
    "GrpTRESMins",
    "GrpWall",
    "MaxJobsPerUser",
    "MaxSubmitJobsPerUser",
    "MaxTRESPerJob",
    "MaxTRESPerUser",
    "MaxWall",
    "Preempt",
    "PreemptMode",
    "UsageFactor",
)
# Settings of an association (an account's, or a user's in an account, optionally on one
# partition): `sacctmgr modify account|user where ... set <key>=<value>`. QOS is the list of
# QOS the association may use (a comma list), DefaultQOS the one a job without --qos gets.
ASSOCIATION_KEYS = (
    "DefaultQOS",
    "GrpJobs",
    "GrpSubmitJobs",
    "GrpTRES",
    "GrpTRESMins",
    "GrpWall",
    "MaxJobs",
    "MaxSubmitJobs",
    "MaxTRESPerJob",
    "MaxWall",
    "QOS",
)
# Partition settings of slurm.conf trainform manages when a spec names them. Every other
# partition setting is kept verbatim (PARTITION_KEPT_KEYS) and cannot be declared.
PARTITION_KEYS = (
    "AllowAccounts",
    "DefaultTime",
    "DefMemPerCPU",
    "DefMemPerGPU",
    "MaxTime",
    "OverSubscribe",
    "PreemptMode",
    "PriorityJobFactor",
    "PriorityTier",
    "QOS",
    "State",
)
PARTITION_KEPT_KEYS = (
    "AllocNodes",
    "AllowGroups",
    "AllowQos",
    "Alternate",
    "CpuBind",
    "Default",
    "DefCpuPerGPU",
    "DefMemPerNode",
    "DenyAccounts",
    "DenyQos",
    "DisableRootJobs",
    "ExclusiveUser",
    "GraceTime",
    "Hidden",
    "LLN",
    "MaxCPUsPerNode",
    "MaxCPUsPerSocket",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "MaxNodes",
    "MinNodes",
    "OverTimeLimit",
    "PowerDownOnIdle",
    "ReqResv",
    "ResumeTimeout",
    "RootOnly",
    "SelectTypeParameters",
    "SuspendTime",
    "SuspendTimeout",
    "TRESBillingWeights",
)
# A value: what Slurm prints (numbers, times, TRES lists, names, flags); spaces only in
# free text. No quote, `#`, `=`-leading text or control character reaches a command.
VALUE = re.compile(r"^[A-Za-z0-9_.,:/=+@\[\]*-]*$")
TEXT = re.compile(r"^[A-Za-z0-9_.,:/=+@()\[\] -]*$")
FREE_TEXT_KEYS = ("Description", "Organization")


def _check(settings: dict[str, str], allowed: tuple[str, ...], what: str) -> dict[str, str]:
    for key, value in settings.items():
        if key not in allowed:
            hint = closest_name(key, allowed)
            raise ValueError(
                f"{key!r} is not a {what} setting trainform manages"
                + (f" (did you mean {hint!r}?)" if hint else "")
                + f"; managed: {', '.join(allowed)}"
            )
        pattern = TEXT if key in FREE_TEXT_KEYS else VALUE
        if not pattern.match(value) or value.startswith("-") and value != "-1":
            raise ValueError(f"{key}={value!r}: not a value Slurm prints for {key}")
    return settings


class SlurmAccount(SpecModel):
    parent: ResourceName | None = Field(
        default=None, description="Parent account of the project's account (Slurm hierarchy)."
    )
    description: str | None = Field(
        default=None, description="The account's Description; unset: left as it is."
    )
    organization: str | None = Field(
        default=None, description="The account's Organization; unset: left as it is."
    )
    limits: dict[str, str] = Field(
        default_factory=dict,
        description="Limits of the account's own association (all partitions), by sacctmgr "
        "option name: GrpTRES, GrpJobs, MaxWall, ...",
    )
    users: dict[ResourceName, dict[str, str]] = Field(
        default_factory=dict,
        description="Limits of one user's association with the account (no partition).",
    )

    @field_validator("description", "organization")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        if value is not None and not TEXT.match(value):
            raise ValueError(f"{value!r}: letters, digits, spaces and . , : / - _ only")
        return value

    @field_validator("limits")
    @classmethod
    def _limits(cls, value: dict[str, str]) -> dict[str, str]:
        return _check(value, ASSOCIATION_KEYS, "association")

    @field_validator("users")
    @classmethod
    def _users(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for limits in value.values():
            _check(limits, ASSOCIATION_KEYS, "association")
        return value


class SlurmQueue(SpecModel):
    qos_from: ResourceName | None = Field(
        default=None,
        description="The Queue that declares the QOS this queue's partition names, when "
        "several partitions share one QOS: this queue then declares no QOS setting (no "
        "spec.slurm.qos, no nominalQuota; its defaultPriority and preemption are that "
        "queue's), and deleting it never deletes the QOS.",
    )
    partition: dict[str, str] = Field(
        default_factory=dict,
        description="Partition settings of slurm.conf, by name: PriorityTier, AllowAccounts, "
        "QOS (the QOS this queue manages; default: the queue's name), ...",
    )
    qos: dict[str, str] = Field(
        default_factory=dict,
        description="Settings of the queue's QOS, by sacctmgr option name: MaxWall, Preempt, "
        "PreemptMode, GrpTRES (instead of nominalQuota), ...",
    )

    @field_validator("partition")
    @classmethod
    def _partition(cls, value: dict[str, str]) -> dict[str, str]:
        return _check(value, PARTITION_KEYS, "partition")

    @field_validator("qos")
    @classmethod
    def _qos(cls, value: dict[str, str]) -> dict[str, str]:
        return _check(value, QOS_KEYS, "QOS")

    @model_validator(mode="after")
    def _one_declaration(self) -> SlurmQueue:
        if self.qos_from is not None and self.qos:
            raise ValueError(
                f"qos: the QOS is declared by Queue {self.qos_from} (qosFrom); state its "
                "settings there, once"
            )
        return self


class SlurmQuota(SpecModel):
    users: dict[ResourceName, dict[str, str]] = Field(
        default_factory=dict,
        description="Associations of the project's users on the queue's partition, each with "
        "its limits by sacctmgr option name (Slurm keeps partitions on user associations).",
    )

    @field_validator("users")
    @classmethod
    def _users(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for limits in value.values():
            _check(limits, ASSOCIATION_KEYS, "association")
        return value
