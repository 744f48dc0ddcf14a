"""The root configuration, `trainform.yaml`: providers, state backend, environments, policies.

Connection settings never hold secrets: credentials come from the environment or from
named profiles, and fields that would hold one name the environment variable instead.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from trainform.specs.models.base import SpecModel
from trainform.specs.names import EnvName, ResourceName, check_s3_uri


class LocalConnection(SpecModel):
    root: str = Field(
        default=".trainform",
        description="Folder (relative to the spec folder) holding the local platform's "
        "SQLite database, object root and job logs.",
    )


class KubernetesConnection(SpecModel):
    kubeconfig: str = Field(default="", description="Path of a kubeconfig; default as kubectl.")
    context: str = Field(default="", description="kubeconfig context; default the current one.")
    field_manager: str = Field(
        default="trainform", description="Server-side apply field manager name."
    )
    namespace_prefix: str = Field(
        default="", description="Prefix of the namespaces created for projects."
    )
    name_prefix: str = Field(
        default="",
        description="Prefix of the cluster-scoped Kueue objects trainform writes "
        "(ClusterQueues, ResourceFlavors, Topologies, WorkloadPriorityClasses), so several "
        "trainform instances can share one cluster.",
    )
    force_conflicts: bool = Field(
        default=False,
        description="Take over fields another field manager set (server-side apply with "
        "force). Off: such a conflict fails the apply and names the other manager.",
    )
    kueue_config: str = Field(
        default="kueue-system/kueue-manager-config",
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
        description="<namespace>/<name> of the ConfigMap holding Kueue's configuration "
        "(controller_manager_config.yaml), read at plan to check waitForPodsReady and "
        "fair sharing.",
    )


class SlurmConnection(SpecModel):
    cluster: str = Field(default="", description="Slurm cluster name (sacctmgr cluster).")
    partitions_file: str = Field(
        default="/etc/slurm/trainform-partitions.conf",
        description="The one slurm.conf include file trainform owns for partitions.",
    )
    bin_dir: str = Field(default="", description="Folder of the Slurm commands; default PATH.")
    conf: str = Field(
        default="/etc/slurm/slurm.conf",
        description="Path of slurm.conf; every Slurm command runs with SLURM_CONF set to it.",
    )
    job_root: str = Field(
        default="",
        description="Absolute path of a folder every node shares, for job scripts, outputs, "
        "logs and checkpoints (never inside the spec folder). Required to run jobs.",
    )
    gres: str = Field(
        default="gpu", pattern=r"^[a-z0-9_]{1,32}$", description="GRES name of accelerators."
    )
    containers: Literal["pyxis", "oci"] = Field(
        default="pyxis",
        description="How jobs run a container Image: pyxis (`sbatch --container-image=<ref>`) "
        "or Slurm's own OCI support (`sbatch --container=<bundle>`, the reference names a "
        "bundle path the nodes see).",
    )

    @field_validator("job_root")
    @classmethod
    def _job_root_absolute(cls, value: str) -> str:
        if value and not value.startswith("/"):
            raise ValueError("jobRoot must be an absolute path outside the spec folder")
        return value


class ObjectStoreConnection(SpecModel):
    endpoint_url: str = Field(default="", description="S3 endpoint; default AWS.")
    region: str = Field(default="", description="Region name.")
    addressing_style: Literal["auto", "path", "virtual"] = Field(
        default="auto", description="Bucket addressing style."
    )
    profile: str = Field(default="", description="Named credentials profile.")
    buckets: list[str] = Field(
        default_factory=list,
        description="Buckets this instance manages, searched for orphaned datasets "
        "(default: every bucket the credentials can list).",
    )


class RegistryConnection(SpecModel):
    url: str = Field(description="Registry base URL, e.g. https://registry.example.com.")
    username_env: EnvName | None = Field(
        default=None, description="Environment variable holding the user name."
    )
    password_env: EnvName | None = Field(
        default=None, description="Environment variable holding the password or token."
    )
    insecure: bool = Field(default=False, description="Allow plain HTTP.")
    allowed: list[str] = Field(
        default_factory=list, description="Registries images may come from (host[:port])."
    )


class _ProviderBase(SpecModel):
    name: ResourceName = Field(description="Instance name that specs refer to.")


class LocalProvider(_ProviderBase):
    type: Literal["local"] = Field(description="Provider type.")
    connection: LocalConnection = Field(default_factory=LocalConnection, description="Settings.")


class KubernetesProvider(_ProviderBase):
    type: Literal["kubernetes"] = Field(description="Provider type.")
    connection: KubernetesConnection = Field(
        default_factory=KubernetesConnection, description="Settings."
    )


class SlurmProvider(_ProviderBase):
    type: Literal["slurm"] = Field(description="Provider type.")
    connection: SlurmConnection = Field(default_factory=SlurmConnection, description="Settings.")


class ObjectStoreProvider(_ProviderBase):
    type: Literal["objectstore"] = Field(description="Provider type.")
    connection: ObjectStoreConnection = Field(
        default_factory=ObjectStoreConnection, description="Settings."
    )


class RegistryProvider(_ProviderBase):
    type: Literal["registry"] = Field(description="Provider type.")
    connection: RegistryConnection = Field(description="Settings.")


ProviderInstance = Annotated[
    LocalProvider | KubernetesProvider | SlurmProvider | ObjectStoreProvider | RegistryProvider,
    Field(discriminator="type"),
]


class LocalState(SpecModel):
    backend: Literal["local"] = Field(description="State backend type.")
    path: str = Field(
        default=".trainform/state.json", description="State file, relative to the spec folder."
    )
    backups: int = Field(default=5, ge=0, le=100, description="Backup generations kept.")


class S3State(SpecModel):
    backend: Literal["s3"] = Field(description="State backend type.")
    bucket: str = Field(description="Versioned bucket holding the state.")
    key: str = Field(default="trainform/state.json", description="Object key of the state.")
    provider: ResourceName | None = Field(
        default=None, description="objectstore provider instance whose connection is used."
    )
    timeout: float = Field(
        default=10.0,
        ge=0.5,
        le=300,
        description="Seconds to wait for a connection and for each response of the endpoint.",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        le=10,
        description="Attempts per call (throttling, 5xx, timeouts); a call fails after at most "
        "maxAttempts x timeout seconds.",
    )


StateBackend = Annotated[LocalState | S3State, Field(discriminator="backend")]

Variable = str | int | float | bool | None | list[Any] | dict[str, Any]


class Environment(SpecModel):
    """An isolated target: its variables, and where it differs from the shared settings."""

    variables: dict[str, Variable] = Field(
        default_factory=dict, description="Template variables of this environment."
    )
    state: StateBackend | None = Field(
        default=None,
        description="This environment's own state backend, replacing `state` (two "
        "environments never share a state location).",
    )
    providers: dict[ResourceName, dict[str, Any]] = Field(
        default_factory=dict,
        description="Connection fields per provider instance, laid over the instance's "
        "`connection` for this environment (two environments never share an endpoint).",
    )
    production: bool | None = Field(
        default=None,
        description="Whether this environment is production: `trainform drill` refuses it "
        "unless --allow-production. Unset: production when named prod or production.",
    )


class StorageSettings(SpecModel):
    """Where datasets and checkpoints live, so specs need not say: a relative dataset source
    and a relative or empty checkpoint prefix are placed under these locations."""

    datasets: str = Field(
        default="",
        description="Base of relative dataset sources: s3://bucket/prefix or file:///path "
        "(default: the spec folder).",
    )
    checkpoints: str = Field(
        default="",
        description="Base of job checkpoints: s3://bucket/prefix or file:///path "
        "(default: the compute provider's own storage).",
    )
    provider: ResourceName | None = Field(
        default=None,
        description="objectstore provider instance for s3:// locations (default: the only one).",
    )

    @field_validator("datasets", "checkpoints")
    @classmethod
    def _location(cls, value: str) -> str:
        if value and not value.startswith(("s3://", "file:///")):
            raise ValueError("must be an s3://bucket/prefix or file:///absolute/path location")
        if value.startswith("s3://"):
            check_s3_uri(value)
        return value.rstrip("/")


class PolicySettings(SpecModel):
    path: str = Field(default="", description="Folder of user policy rules (trusted).")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Parameters of built-in policies."
    )
    disabled: list[str] = Field(default_factory=list, description="Policy ids turned off.")
    mass_delete_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="A plan deleting more than this share of the resources in state (and at "
        "least five) needs --allow-mass-delete.",
    )


class SecuritySettings(SpecModel):
    """What specs from a pull request may reach beyond the spec folder (see docs/security.md).

    Only trainform.yaml declares these, so only the people who own it widen them."""

    code_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts a code repository (`code.repo`) may name, e.g. github.com or "
        "git.example.com:2222; `plan` and `lock` contact no other code host, and a repository "
        "on another host is refused even with a pinned commit. Empty: code ships with the "
        "specs.",
    )
    data_roots: list[str] = Field(
        default_factory=list,
        description="Absolute host folders that dataset sources may name (as file:///path) "
        "besides the spec folder.",
    )

    @field_validator("data_roots")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for root in value:
            if not root.removeprefix("file://").startswith("/"):
                raise ValueError(f"data root {root!r} must be an absolute path")
        return value


class RootConfig(SpecModel):
    """`trainform.yaml`: what the specs run against and how state is kept."""

    api_version: Literal["trainform/v1"] = Field(description="Always trainform/v1.")
    kind: Literal["Config"] = Field(default="Config", description="Config")
    providers: list[ProviderInstance] = Field(
        default_factory=list, description="Provider instances specs refer to by name."
    )
    state: StateBackend = Field(
        default_factory=lambda: LocalState(backend="local"), description="State backend."
    )
    variables: dict[str, Variable] = Field(
        default_factory=dict, description="Template variables common to all environments."
    )
    environments: dict[ResourceName, Environment] = Field(
        default_factory=dict, description="Named environments and their variables."
    )
    default_environment: ResourceName | None = Field(
        default=None, description="Environment used when --env is not given."
    )
    policies: PolicySettings = Field(default_factory=PolicySettings, description="Policy settings.")
    storage: StorageSettings = Field(
        default_factory=StorageSettings, description="Default places of datasets and checkpoints."
    )
    security: SecuritySettings = Field(
        default_factory=SecuritySettings,
        description="Code hosts and data roots specs may reach (trusted settings).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> RootConfig:
        names = [provider.name for provider in self.providers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"provider instance names must be unique: {', '.join(duplicates)}")
        stores = [p.name for p in self.providers if p.type == "objectstore"]
        state_store = getattr(self.state, "provider", None)
        if state_store and state_store not in stores:
            raise ValueError(
                f"state.provider {state_store!r} is not an objectstore provider instance"
            )
        wanted = self.storage.provider
        if wanted and wanted not in stores:
            raise ValueError(f"storage.provider {wanted!r} is not an objectstore provider instance")
        uses_s3 = any(
            location.startswith("s3://")
            for location in (self.storage.datasets, self.storage.checkpoints)
        )
        if uses_s3 and not wanted and len(stores) != 1:
            raise ValueError(
                "storage places data on s3://, which needs exactly one objectstore provider "
                "instance or storage.provider naming one"
            )
        if self.default_environment and self.default_environment not in self.environments:
            raise ValueError(
                f"defaultEnvironment {self.default_environment!r} is not declared in environments"
            )
        return self

    def object_store(self) -> Any:
        """The objectstore instance s3:// locations use: storage.provider, else the only one."""
        if self.storage.provider:
            return self.provider(self.storage.provider)
        stores = [p for p in self.providers if p.type == "objectstore"]
        return stores[0] if len(stores) == 1 else None

    def provider(self, name: str) -> Any:
        for instance in self.providers:
            if instance.name == name:
                return instance
        return None
