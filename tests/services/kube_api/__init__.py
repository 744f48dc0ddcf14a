"""A fake Kubernetes API server, faithful on the wire, for the Kubernetes/Kueue provider's tests.

`start_kube_api(folder, crd_folder=CRD_FOLDER, defaults=True, schema=True)` starts it in a
background thread on 127.0.0.1 (plain HTTP, no auth) and returns a `KubeAPI`: `url`,
`configuration()` (a kubernetes.client.Configuration), `kubeconfig` (a file), the request
log (`requests`, `count()`, `reset_requests()`), `fail()` (injected faults, faults.py),
`reset()`, `snapshot()`/`delete_created_since()`, `store`, `stop()`. It serves discovery
(/version, /api, /apis, ..., /openapi/v3 for kubectl), core v1 Namespace, ConfigMap,
Secret, Node, ResourceQuota, Service, Pod (and its `log` subresource, whose text tests
set with `set_pod_log`, logs.py); batch/v1 Job; scheduling.k8s.io/v1 PriorityClass;
apiextensions.k8s.io/v1 CustomResourceDefinition; and every kind of the CRDs it is seeded
with (by default Kueue's, tests/reference/kueue-crds). The kubernetes Python client, its
DynamicClient and watch, and kubectl (get, apply, apply --server-side, diff, delete, wait)
work against it. It is strict by default (`defaults=True, schema=True`, the closest to a
real cluster); a test that needs the lax mode (no defaulting, no schema) asks for it.

What it refuses, as a real server with Kueue installed does (refusals.py lists cases):
CRD schemas (types, int64 bounds, the quantity pattern of int-or-string fields, enum,
pattern, lengths, item and property counts, list-map/set uniqueness, unknown fields: 400
with `fieldValidation=Strict`, 500 on server-side apply) and CEL rules (schemas.py,
cel.py); Kueue's validating webhooks (kueue_webhooks.py); ResourceQuota admission, with
`status.used` kept up to date (admission.py); ObjectMeta, ConfigMap/Secret size, Job and
PriorityClass rules and int32 fields of built-ins (validation.py); pod specs of Pods and
Job templates (podspec.py); finalizers: a
terminating object gains none, a namespace waits for objects with finalizers and refuses
creates meanwhile (deletion.py). `api.kueue.start()` (or the `kueue` fixture) runs a
Kueue controller stand-in (kueue.py): Workloads for queued Jobs, admission by flavor quota
with cohort borrowing, Kueue's messages, finalizers and queue status.

Known gaps (a real cluster differs here):
- no controllers but the opt-in Kueue stand-in: nothing schedules, no pods run, no Job
  controller, no garbage collection of dependents (`propagationPolicy` is accepted and
  ignored; the Kueue stand-in deletes the Workloads of deleted Jobs); a CRD deleted takes
  its objects along; no Priority admission plugin (an unknown priorityClassName passes);
- when started with `schema=False`: no CRD schema pruning, validation, CEL rules or
  webhooks (unknown fields are kept, `fieldValidation` is ignored) and no Job
  immutability; with `defaults=False`: no defaulting (CRD schema defaults and Job/Pod
  defaults only, see defaults.py); other built-in specs are validated only in part
  (podspec.py: no volumes, probes, security contexts, affinity terms); `format` (int32,
  date-time) is not checked on custom resources, as the apiextensions validator does not
  check it on integers either; no conversion between a CRD's versions (all see the same
  fields); with `schema=False` no pod spec validation either;
- field ownership is simplified (see fields.py): list-map and set items of CRD schemas are
  tracked by key (`k:`/`v:`), but lists of built-in kinds (containers, ...) are atomic;
- strategic merge patch on built-ins is approximated (see patch.py); on custom resources it
  is refused with 415, as on a real server;
- JSON only: no protobuf (so kubectl's generator commands such as `kubectl create
  namespace` get 415: use `kubectl apply -f`) or CBOR; no authentication or RBAC; no
  aggregated discovery; OpenAPI v3 documents carry no schemas (`kubectl explain` fails),
  no /openapi/v2; tables of built-in kinds have NAME and AGE only; watches never expire.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.services.kube_api.resources import CRD_FOLDER
from tests.services.kube_api.server import KubeAPI, RequestRecord

__all__ = ["KubeAPI", "RequestRecord", "start_kube_api", "CRD_FOLDER"]


def start_kube_api(
    folder: Path | None = None,
    crd_folder: Path | None = CRD_FOLDER,
    defaults: bool = True,
    schema: bool = True,
    crd_versions: tuple[str, ...] | None = None,
) -> KubeAPI:
    """Start a fake API server; its kubeconfig is written to `folder` (a temp dir if None).

    `crd_folder`: the CRDs to install (None: none, as on a cluster without Kueue).
    `crd_versions`: serve only these versions of those CRDs (e.g. ("v1beta1",): a cluster
    whose Kueue predates v1beta2).
    `defaults`: fill in schema and built-in defaults like a real server (see defaults.py).
    `schema`: prune undeclared fields and validate custom resources against their CRD
    schemas like a real server (see schemas.py). Both are on unless a test turns them off.
    """
    where = folder if folder is not None else Path(tempfile.mkdtemp(prefix="kube-api-"))
    api = KubeAPI(where, crd_folder, defaults, schema, crd_versions)
    api.start()
    return api
