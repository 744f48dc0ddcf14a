"""Validation of rendered manifests: Kueue kinds against their CRD's openAPIV3Schema
(tests/reference/kueue-crds, v1beta2), core kinds through the kubernetes client's models.

The CRD schemas are made stricter than the API server, which prunes unknown fields: every
object schema with properties refuses others, so a misspelt field fails here instead of
vanishing on the server. `x-kubernetes-int-or-string` becomes integer-or-string.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from kubernetes.client import ApiClient

CRDS = Path(__file__).resolve().parents[2] / "reference" / "kueue-crds"
MODELS = {
    "Namespace": "V1Namespace",
    "ResourceQuota": "V1ResourceQuota",
    "Job": "V1Job",
    "ConfigMap": "V1ConfigMap",
    "Service": "V1Service",
    "PriorityClass": "V1PriorityClass",
}


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        pattern = out.pop("pattern", None)
        string: dict[str, Any] = {"type": "string", **({"pattern": pattern} if pattern else {})}
        out["anyOf"] = [{"type": "integer"}, string]
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_validator(kind: str) -> jsonschema.Draft7Validator:
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    path = CRDS / (plural.replace("ys", "ies") if kind.endswith("y") else plural)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(path.with_suffix(".yaml").read_text(), Loader=loader)
    assert crd["spec"]["names"]["kind"] == kind
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    schema = _strict(version["schema"]["openAPIV3Schema"])
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None and v != {}}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def check_manifest(manifest: dict[str, Any]) -> None:
    """Raise when `manifest` is not a valid object of its kind."""
    kind = manifest["kind"]
    if manifest["apiVersion"].startswith("kueue.x-k8s.io/"):
        assert manifest["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        crd_validator(kind).validate(manifest)
        return
    client = ApiClient()
    model = client.deserialize(json.dumps(manifest), MODELS[kind], "application/json")
    back = client.sanitize_for_serialization(model)
    assert _plain(back) == _plain(manifest), f"{kind}: fields the model does not know"
