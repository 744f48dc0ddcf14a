"""Accounts, users, associations and QOS through sacctmgr (slurmdbd).

Called by SlurmProvider. Every command is non-interactive with parseable output: reads
use `-nP` (no header, `|`-separated), changes use `-i` (commit at once). "Nothing new
added" and "Nothing modified" are outcomes (the object already is as asked), not failures.
Identifiers are validated (providers/slurm/names.py) before they reach a command.

Reads return plain dataclasses keyed by lowercased name; Slurm keeps names lowercase.

The provider keeps its `Accounting` as `sacctmgr` (`accounting(since)` is the JobProvider
verb for usage from sacct, providers/slurm/history.py).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from trainform.providers.errors import PermanentProviderError, TransientProviderError
from trainform.providers.slurm.commands import Result, SlurmCommands, is_transient
from trainform.providers.slurm.names import check_identifier, check_sacctmgr_arguments
from trainform.providers.slurm.transactions import Change, last_changes

CHANGES = threading.Lock()
ROOT_ACCOUNT = "root"  # sacctmgr: "Parent: Default is the root account"
UNCHANGED = ("nothing new added", "nothing modified", "already exists")
# `sacctmgr show` column -> the option name `sacctmgr modify ... set` takes (specs/models/slurm.py)
QOS_COLUMNS = {
    "Description": "Description",
    "Priority": "Priority",
    "Flags": "Flags",
    "GraceTime": "GraceTime",
    "GrpJobs": "GrpJobs",
    "GrpSubmit": "GrpSubmitJobs",
    "GrpTRES": "GrpTRES",
    "GrpTRESMins": "GrpTRESMins",
    "GrpWall": "GrpWall",
    "MaxJobsPU": "MaxJobsPerUser",
    "MaxSubmitPU": "MaxSubmitJobsPerUser",
    "MaxTRES": "MaxTRESPerJob",
    "MaxTRESPU": "MaxTRESPerUser",
    "MaxWall": "MaxWall",
    "Preempt": "Preempt",
    "PreemptMode": "PreemptMode",
    "UsageFactor": "UsageFactor",
}
ASSOCIATION_COLUMNS = {
    "DefaultQOS": "DefaultQOS",
    "GrpJobs": "GrpJobs",
    "GrpSubmit": "GrpSubmitJobs",
    "GrpTRES": "GrpTRES",
    "GrpTRESMins": "GrpTRESMins",
    "GrpWall": "GrpWall",
    "MaxJobs": "MaxJobs",
    "MaxSubmit": "MaxSubmitJobs",
    "MaxTRES": "MaxTRESPerJob",
    "MaxWall": "MaxWall",
    "QOS": "QOS",
}
# What an association may use is its effective QOS list and default (its own, else its
# parent's); `WOPLimits` prints a `QOS+=x` delta as a bare `x`, so only the effective list
# says what a user can submit with. Every other setting is compared as the association's
# own (set on it), never as what it inherits.
EFFECTIVE_KEYS = ("QOS", "DefaultQOS")
QOS_FIELDS = "Name," + ",".join(QOS_COLUMNS)
ASSOC_FIELDS = "Account,User,Partition,ParentName," + ",".join(ASSOCIATION_COLUMNS)


@dataclass(frozen=True)
class Account:
    name: str
    description: str
    organization: str


@dataclass(frozen=True)
class Association:
    """One association. `limits`: the settings set on it (its own; a child inherits the
    rest from its parent), with QOS and DefaultQOS as it may use them (effective);
    `effective`: every setting as Slurm enforces it, inherited values included; `own`: as
    `WOPLimits` prints them (set on it; a QOS delta without its sign)."""

    account: str
    user: str
    partition: str
    parent: str = ""
    limits: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    effective: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    own: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def qos_list(self) -> list[str]:
        return [q for q in self.effective.get("QOS", "").lower().split(",") if q]


@dataclass(frozen=True)
class Qos:
    name: str
    description: str
    priority: int
    grp_tres: str
    max_tres_per_user: str
    preempt: str
    preempt_mode: str
    settings: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


@dataclass
class AccountingSnapshot:
    """One batched read of everything the provider compares."""

    accounts: dict[str, Account] = field(default_factory=dict)
    associations: list[Association] = field(default_factory=list)
    qos: dict[str, Qos] = field(default_factory=dict)

    def users_of(self, account: str) -> list[str]:
        """Users with an association with the account on no particular partition (what a
        Project's `users` are; a Quota owns the associations on its queue's partition)."""
        return sorted(
            {
                a.user
                for a in self.associations
                if a.account == account and a.user and not a.partition
            }
        )

    def parent_of(self, account: str) -> str:
        """The account's parent on this cluster. An account with no association here (made
        without one, or left by deleting its parent, whose child associations go with it)
        prints an empty ParentName in `sacctmgr show account withassoc`; Slurm gives it
        root, the default Parent, as soon as it is associated again, so it reads as root."""
        own = self.association(account)
        return own.parent if own is not None else ROOT_ACCOUNT

    def naming_qos(self, name: str) -> list[Association]:
        """Associations whose QOS list or default names QOS `name`."""
        return [
            a
            for a in self.associations
            if name in a.qos_list or a.effective.get("DefaultQOS", "").lower() == name
        ]

    def partition_associations(self, account: str, partition: str) -> list[Association]:
        return [
            a
            for a in self.associations
            if a.account == account and a.partition == partition and a.user
        ]

    def association(self, account: str, user: str = "", partition: str = "") -> Association | None:
        """The one association of (account, user, partition); "" for none of user/partition."""
        return next(
            (
                a
                for a in self.associations
                if (a.account, a.user, a.partition) == (account, user, partition)
            ),
            None,
        )


def _rows(text: str, width: int) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|")
        rows.append((cells + [""] * width)[:width])
    return rows


def _settings_by_association(text: str) -> dict[tuple[str, str, str], tuple[str, dict[str, str]]]:
    found = {}
    for row in _rows(text, 4 + len(ASSOCIATION_COLUMNS)):
        account, user, partition, parent = (cell.lower() for cell in row[:4])
        values = dict(zip(ASSOCIATION_COLUMNS.values(), row[4:], strict=True))
        found[(account, user, partition)] = (parent, values)
    return found


def parse_associations(effective_text: str, own_text: str) -> list[Association]:
    own = _settings_by_association(own_text)
    found = []
    for key, (parent, effective) in _settings_by_association(effective_text).items():
        set_here = own.get(key, (parent, {}))[1]
        limits = {k: set_here.get(k, "") for k in ASSOCIATION_COLUMNS.values()}
        limits.update({k: effective[k] for k in EFFECTIVE_KEYS})
        found.append(Association(*key, parent, limits, effective, set_here))
    return found


class Accounting:
    def __init__(self, commands: SlurmCommands, cluster: str = "") -> None:
        self.commands = commands
        self.cluster = cluster

    def _where_cluster(self) -> list[str]:
        return [f"cluster={self.cluster}"] if self.cluster else []

    def _locked_run(self, argv: list[str], check: bool = True) -> Result:
        check_sacctmgr_arguments(argv[2:])  # after `sacctmgr -i`
        with CHANGES:
            return self.commands.run(argv, check=check)

    def _change(self, argv: list[str]) -> bool:
        """Run a change; False when Slurm says nothing needed changing.

        Changes are serialized: slurmdbd 22.05 silently drops one of two accounts added at
        the same moment by two sacctmgr processes (both report success)."""
        check_sacctmgr_arguments(argv)
        with CHANGES:
            result = self.commands.run(["sacctmgr", "-i", *argv], check=False)
        text = result.text.lower()
        if any(phrase in text for phrase in UNCHANGED):
            return False
        if result.returncode != 0:
            message = f"cannot run sacctmgr {argv[0]} {argv[1]}: {result.text}"
            if is_transient(result.text):
                raise TransientProviderError(message)
            raise PermanentProviderError(message)
        return True

    # reads ---------------------------------------------------------------------------

    def snapshot(self) -> AccountingSnapshot:
        """Accounts, associations (as enforced, and as set on each: `WOPLimits`, without
        parent limits) and QOS, read by four sacctmgr calls run side by side."""
        show_associations = ["sacctmgr", "-nP", "show", "association", *self._where_cluster()]
        queries = [
            ["sacctmgr", "-nP", "show", "account", "format=Account,Descr,Org"],
            [*show_associations, f"format={ASSOC_FIELDS}"],
            [*show_associations, "WOPLimits", f"format={ASSOC_FIELDS}"],
            ["sacctmgr", "-nP", "show", "qos", f"format={QOS_FIELDS}"],
        ]
        with ThreadPoolExecutor(max_workers=4) as pool:
            accounts, associations, own, qos = (
                result.stdout for result in pool.map(self.commands.run, queries)
            )
        snapshot = AccountingSnapshot()
        for name, description, organization in _rows(accounts, 3):
            snapshot.accounts[name.lower()] = Account(name.lower(), description, organization)
        snapshot.associations = parse_associations(associations, own)
        for row in _rows(qos, 1 + len(QOS_COLUMNS)):
            settings = dict(zip(QOS_COLUMNS.values(), row[1:], strict=True))
            snapshot.qos[row[0].lower()] = Qos(
                row[0].lower(),
                settings["Description"],
                int(settings["Priority"] or 0),
                settings["GrpTRES"],
                settings["MaxTRESPerUser"],
                settings["Preempt"],
                settings["PreemptMode"],
                settings,
            )
        return snapshot

    def last_changes(self) -> dict[str, Change]:
        """The newest sacctmgr transaction per object (providers/slurm/transactions.py)."""
        return last_changes(self.commands, self._where_cluster())

    def qos_names(self) -> set[str]:
        text = self.commands.run(["sacctmgr", "-nP", "show", "qos", "format=Name"]).stdout
        return {line.strip().lower() for line in text.splitlines() if line.strip()}

    # accounts and users ------------------------------------------------------------------

    def add_account(
        self, name: str, description: str, organization: str = "", parent: str = ""
    ) -> bool:
        name = check_identifier(name, "account")
        argv = ["add", "account", name, f"Description={description}", *self._where_cluster()]
        if organization:
            argv.append(f"Organization={organization}")
        if parent:
            argv.append(f"Parent={check_identifier(parent, 'account')}")
        changed = self._change(argv)
        listed = self.commands.run(["sacctmgr", "-nP", "show", "account", name, "format=Account"])
        if name not in listed.stdout.split():
            raise TransientProviderError(f"cannot add account {name}: slurmdbd did not keep it")
        return changed

    def add_association(self, name: str, parent: str = "") -> bool:
        """The account's association on this cluster, for an account that has none
        (`sacctmgr add account` of an existing account adds only what is missing)."""
        argv = ["add", "account", check_identifier(name, "account"), *self._where_cluster()]
        if parent:
            argv.append(f"Parent={check_identifier(parent, 'account')}")
        return self._change(argv)

    def set_account_description(self, name: str, description: str) -> bool:
        name = check_identifier(name, "account")
        return self._change(
            ["modify", "account", "where", f"name={name}", "set", f"Description={description}"]
        )

    def delete_account(self, name: str, snapshot: AccountingSnapshot) -> None:
        name = check_identifier(name, "account")
        for user in sorted({a.user for a in snapshot.associations if a.account == name and a.user}):
            self.remove_user(user, name, snapshot)  # on every partition
        # with a cluster= condition sacctmgr removes only that cluster's associations
        self._change(["delete", "account", "where", f"name={name}"])

    def add_user(self, user: str, account: str, partition: str = "", limits: str = "") -> bool:
        argv = [
            "add",
            "user",
            check_identifier(user, "user"),
            f"account={check_identifier(account, 'account')}",
            *self._where_cluster(),
        ]
        if partition:
            argv.append(f"partition={check_identifier(partition, 'partition')}")
        return self._change(argv + (limits.split() if limits else []))

    def remove_user(
        self, user: str, account: str, snapshot: AccountingSnapshot, partition: str | None = None
    ) -> None:
        """Remove the user's associations with the account: on one partition, the one on
        none (`partition=""`), or all (None)."""
        user = check_identifier(user, "user")
        where = ["where", f"name={user}", f"account={check_identifier(account, 'account')}"]
        if partition is not None:
            where.append(
                f"partition={check_identifier(partition, 'partition') if partition else ''}"
            )
        result = self._locked_run(
            ["sacctmgr", "-i", "delete", "user", *where, *self._where_cluster()], check=False
        )
        text = result.text.lower()
        if result.returncode == 0 or "nothing deleted" in text or "not found" in text:
            return
        if "default account" in text:
            others = {a.account for a in snapshot.associations if a.user == user} - {account}
            if not others:  # the account is the user's only one: the user goes with it
                self._change(["delete", "user", "where", f"name={user}", *self._where_cluster()])
                return
            self._change(
                [
                    "modify",
                    "user",
                    "where",
                    f"name={user}",
                    "set",
                    f"DefaultAccount={sorted(others)[0]}",
                ]
            )
            self._locked_run(["sacctmgr", "-i", "delete", "user", *where, *self._where_cluster()])
            return
        raise PermanentProviderError(f"cannot remove user {user} from {account}: {result.text}")

    def set_user_limits(self, user: str, account: str, partition: str, limits: str) -> bool:
        return self._change(
            [
                "modify",
                "user",
                "where",
                f"name={check_identifier(user, 'user')}",
                f"account={check_identifier(account, 'account')}",
                f"partition={check_identifier(partition, 'partition')}",
                *self._where_cluster(),
                "set",
                *limits.split(),
            ]
        )

    def modify_account(self, name: str, settings: list[str]) -> bool:
        """Settings of the account itself or of its own association (not its users')."""
        where = ["where", f"name={check_identifier(name, 'account')}", *self._where_cluster()]
        return self._change(["modify", "account", *where, "set", *settings])

    def modify_association(
        self, account: str, user: str, partition: str, settings: list[str]
    ) -> bool:
        """Limits of exactly one user association (`partition=` empty: the one without)."""
        where = [
            "where",
            f"name={check_identifier(user, 'user')}",
            f"account={check_identifier(account, 'account')}",
            f"partition={check_identifier(partition, 'partition') if partition else ''}",
            *self._where_cluster(),
        ]
        return self._change(["modify", "user", *where, "set", *settings])

    # QOS -----------------------------------------------------------------------------

    def add_qos(self, name: str, settings: list[str]) -> bool:
        return self._change(["add", "qos", check_identifier(name, "QOS"), *settings])

    def modify_qos(self, name: str, settings: list[str]) -> bool:
        return self._change(
            ["modify", "qos", "where", f"name={check_identifier(name, 'QOS')}", "set", *settings]
        )

    def delete_qos(self, name: str) -> None:
        self._change(["delete", "qos", check_identifier(name, "QOS")])
