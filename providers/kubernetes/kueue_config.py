"""The Kueue configuration trainform relies on, read from the cluster and checked at plan.

Kueue reads its `Configuration` (config.kueue.x-k8s.io) from the file
`controller_manager_config.yaml` of a ConfigMap, `kueue-system/kueue-manager-config` in
Kueue's own manifests and Helm chart (config/components/manager of kubernetes-sigs/kueue);
the connection's `kueueConfig` names another `<namespace>/<name>`. Two of its settings
change what a trainform spec means:

- `waitForPodsReady`: without it an admitted multi-node job whose pods never all become
  ready holds its quota forever instead of being evicted and requeued (docs/distributed.md,
  "Gang admission"). In config v1beta1 it is on with `waitForPodsReady.enable: true`; in
  v1beta2 (apis/config/v1beta2/configuration_types.go) the block being present turns it on.
- `fairSharing`: a Queue's `fairShareWeight` only acts when fair sharing is on (v1beta1
  `fairSharing.enable: true`; v1beta2 the block present).

`read_kueue_config` is one GET, made while a plan refreshes (never with `--no-refresh`);
`config_warnings` turns what it found into plan warnings: a setting that is off, or why the
configuration could not be read (no permission, no such ConfigMap, not YAML), so a plan
never claims what it could not check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml_rs
from trainform.providers.base import DesiredResource
from trainform.providers.errors import ProviderError
from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.kinds import CONFIG_MAP
from trainform.providers.launch import launch_of

DEFAULT_LOCATION = "kueue-system/kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"


@dataclass(frozen=True)
class KueueConfig:
    where: str
    """`<namespace>/<name>` of the ConfigMap."""
    problem: str = ""
    """Why it could not be read ("" when it was)."""
    wait_for_pods_ready: bool = False
    fair_sharing: bool = False


def _enabled(config: dict[str, Any], key: str) -> bool:
    block = config.get(key)
    if not isinstance(block, dict):
        return False
    if str(config.get("apiVersion", "")).endswith("/v1beta1"):
        return block.get("enable") is True
    return True  # v1beta2 and later: the block being there turns the feature on


def parse_kueue_config(where: str, data: dict[str, Any]) -> KueueConfig:
    """The settings of a ConfigMap's `data` (or why they cannot be read)."""
    text = data.get(CONFIG_KEY)
    if not isinstance(text, str):
        return KueueConfig(where, f"it has no {CONFIG_KEY}")
    try:
        config = yaml_rs.loads(text)
    except (yaml_rs.YAMLDecodeError, ValueError, TypeError) as exc:
        return KueueConfig(where, f"its {CONFIG_KEY} is not YAML: {exc}")
    if not isinstance(config, dict) or config.get("kind") != "Configuration":
        return KueueConfig(where, f"its {CONFIG_KEY} is not a Kueue Configuration")
    return KueueConfig(
        where,
        wait_for_pods_ready=_enabled(config, "waitForPodsReady"),
        fair_sharing=_enabled(config, "fairSharing"),
    )


def read_kueue_config(client: KubeClient, location: str) -> KueueConfig:
    where = location or DEFAULT_LOCATION
    namespace, _, name = where.partition("/")
    try:
        found = client.get(CONFIG_MAP, name, namespace)
    except ProviderError as exc:
        return KueueConfig(where, str(exc))
    if found is None:
        return KueueConfig(where, "no such ConfigMap")
    return parse_kueue_config(where, found.get("data") or {})


def config_warnings(resource: DesiredResource, config: KueueConfig | None) -> list[str]:
    """What the plan says of a resource that relies on a Kueue setting."""
    if resource.kind == "TrainingJob" and launch_of(resource.spec).nodes > 1:
        nodes = launch_of(resource.spec).nodes
        needs = (
            f"a {nodes}-node job is admitted all at once by Kueue, but a job whose pods do "
            "not all become ready is evicted and requeued only with Kueue's waitForPodsReady"
        )
        if config is None:
            return [f"{needs}, which this plan did not read (no refresh): make sure it is on"]
        if config.problem:
            return [f"{needs}; cannot read Kueue's configuration {config.where}: {config.problem}"]
        if not config.wait_for_pods_ready:
            return [f"{needs}, which Kueue's configuration {config.where} does not turn on"]
    weight = (resource.spec or {}).get("fairShareWeight")
    if resource.kind == "Queue" and weight not in (None, 1, 1.0) and config is not None:
        said = f"spec.fairShareWeight {weight:g} acts only with Kueue's fair sharing"
        if config.problem:
            return [f"{said}; cannot read Kueue's configuration {config.where}: {config.problem}"]
        if not config.fair_sharing:
            return [f"{said}, which Kueue's configuration {config.where} does not turn on"]
    return []
