"""Benchmark: observing N Queues and N Quotas on Kubernetes, batched against one GET per object.

For each size N (default 100, 500 and 2,000) starts the in-repo fake API server
(tests/services/kube_api, in this process: server and client share the interpreter) and
applies, through the provider's own rendering, N Queues (a Cohort and a
WorkloadPriorityClass each) and N Quotas (a ClusterQueue and a LocalQueue each, spread
over PROJECTS project namespaces), as
tests/providers/kubernetes/test_batching.py does. Then times, interleaved over `--repeat`
rounds (the order alternates each round) after one untimed warm-up of each:

- **batched**: `KubernetesProvider.observe` of the 2N requests by a fresh provider on a warm
  client and server: one cluster-wide list per Kubernetes kind (filtered by the manager
  label), plus the project namespaces and one Workload list in each (paged) for the
  queues' admitted usage, then the projection of
  every object back to a spec; every observation must exist with no findings;
- **naive**: the same 5N objects read with one `KubeClient.get` each through the same
  client, what a provider observing object by object would send (reads only: no
  projection, no Workload list), every object must be found.

Requests are counted from the server's request log (and checked against the client's own
`requests` counter). The benchmark asserts (and exits 1 otherwise) that batched observe
sends exactly one request per kind listed (4 object kinds, ResourceFlavors, Namespaces,
and Workloads in each of the 4 project namespaces) at every N,
that naive sends exactly one per object, and that a drift check (observe of every
resource plus the listing of what the instance owns, to find orphans: what `trainform
drift` asks of the instance) sends the same number of requests at every N. It asserts
nothing about time. Reported:
median seconds, objects per second, requests per observe, and the ratio naive / batched;
raw numbers go to bench/out/kubernetes.json.

    .venv/bin/python bench/bench_kubernetes.py [--sizes 100 500 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from trainform.providers.base import DesiredResource, ObserveRequest, ProviderContext  # noqa: E402
from trainform.providers.kubernetes.client import KubeClient, make_api_client  # noqa: E402
from trainform.providers.kubernetes.kinds import BY_KIND, NAMESPACE, OBJECTS_OF, WORKLOAD  # noqa: E402
from trainform.providers.kubernetes.provider import KubernetesProvider  # noqa: E402

from bench.bench_plan import fmt, log, table  # noqa: E402
from bench.bench_validate import git_revision  # noqa: E402
from tests.providers.kubernetes.fixtures import unique_prefix  # noqa: E402
from tests.services.kube_api import KubeAPI, start_kube_api  # noqa: E402

PROJECTS = ("vision", "nlp", "speech", "robotics")
APPLY_THREADS = 8
# one list per Kubernetes kind a Queue or a Quota becomes, the ResourceFlavors (a Quota's
# left-over `-jobs` flavors, providers/kubernetes/leftovers.py), plus the project
# namespaces and the Workloads in each (admitted usage)
LISTED_KINDS = sorted(
    {api.kind for kind in ("Queue", "Quota") for api in OBJECTS_OF[kind]} | {"ResourceFlavor"}
)
BATCHED_REQUESTS = len(LISTED_KINDS) + 1 + len(PROJECTS)


@dataclass
class Case:
    n: int
    prefix: str = ""
    objects: int = 0
    setup_seconds: float = 0.0
    batched_seconds: list[float] = field(default_factory=list)
    batched_requests: list[int] = field(default_factory=list)
    batched_paths: list[str] = field(default_factory=list)
    naive_seconds: list[float] = field(default_factory=list)
    naive_requests: list[int] = field(default_factory=list)
    client_requests: list[int] = field(default_factory=list)  # the client's own counter
    drift_seconds: list[float] = field(default_factory=list)
    drift_requests: list[int] = field(default_factory=list)


def _document(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": {}, "annotations": {}}, "spec": spec}


QUEUE = _document(
    {
        "pools": [{"pool": "h100", "nominalQuota": {"gpu": "8", "cpu": "8", "memory": "8"}}],
        "defaultPriority": 0,
    }
)


def observe_requests(n: int) -> list[ObserveRequest]:
    """N Queues `q-i`, and N Quotas (one per queue, `q-i` in project PROJECTS[i % 4])."""
    requests = [ObserveRequest(f"Queue/q-{i}", "Queue", f"q-{i}", None, QUEUE) for i in range(n)]
    for i in range(n):
        project = PROJECTS[i % len(PROJECTS)]
        quota = _document({"queue": f"q-{i}", "limits": {"gpu": "4"}})
        requests.append(ObserveRequest(f"Quota/{project}/q-{i}", "Quota", f"q-{i}", project, quota))
    return requests


def new_provider(client: KubeClient, prefix: str, root: Path) -> KubernetesProvider:
    provider = KubernetesProvider(client)
    provider.configure(
        "k8s", {"namespacePrefix": prefix, "namePrefix": prefix}, ProviderContext(root)
    )
    return provider


def populate(provider: KubernetesProvider, requests: list[ObserveRequest]) -> list[dict[str, Any]]:
    """Apply the project namespaces and every object of the requests; the objects."""
    for project in PROJECTS:
        document = _document({"owners": ["a@example.com"]})
        for namespace in provider.render(
            DesiredResource(f"Project/{project}", "Project", project, None, document)
        ):
            provider.client.apply(namespace, "trainform", False)
    manifests = [
        obj
        for r in requests
        for obj in provider.render(
            DesiredResource(r.address, r.kind, r.name, r.project, r.document)
        )
    ]
    with ThreadPoolExecutor(APPLY_THREADS) as pool:
        list(pool.map(lambda m: provider.client.apply(m, "trainform", False), manifests))
    return manifests


def counted(api: KubeAPI, work: Callable[[], Any]) -> tuple[Any, float, int, list[str]]:
    """(result, seconds, requests, paths) of `work()`, from the server's request log."""
    api.reset_requests()
    started = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - started
    log_ = api.requests
    return result, seconds, len(log_), sorted(r.path for r in log_)


def measure(
    case: Case, api: KubeAPI, client: KubeClient, prefix: str, root: Path, repeat: int
) -> None:
    requests = observe_requests(case.n)
    setup = new_provider(client, prefix, root)
    started = time.perf_counter()
    manifests = populate(setup, requests)
    case.setup_seconds = time.perf_counter() - started
    case.objects = len(manifests)
    targets = [
        (BY_KIND[m["kind"]], m["metadata"]["name"], m["metadata"].get("namespace"))
        for m in manifests
    ]

    def batched_once() -> None:
        provider = new_provider(client, prefix, root)
        before = client.requests
        seen, seconds, sent, paths = counted(api, lambda: provider.observe(requests))
        bad = [a for a, o in seen.items() if not o.exists or o.findings]
        if len(seen) != len(requests) or bad:
            raise SystemExit(f"N={case.n}: batched observe saw {len(seen)}, wrong: {bad[:3]}")
        case.batched_seconds.append(seconds)
        case.batched_requests.append(sent)
        case.batched_paths = paths
        case.client_requests.append(client.requests - before)

    def naive_once() -> None:
        before = client.requests
        found, seconds, sent, _ = counted(
            api, lambda: [client.get(kind, name, namespace) for kind, name, namespace in targets]
        )
        missing = sum(1 for obj in found if obj is None)
        if missing:
            raise SystemExit(f"N={case.n}: naive GETs missed {missing} objects")
        case.naive_seconds.append(seconds)
        case.naive_requests.append(sent)
        case.client_requests.append(client.requests - before)

    def drift_once() -> None:
        """What `trainform drift` asks of this instance: observe every resource in state,
        then list what it owns to find orphans."""
        provider = new_provider(client, prefix, root)
        (seen, owned), seconds, sent, _ = counted(
            api, lambda: (provider.observe(requests), provider.list_owned())
        )
        if len(seen) != len(requests) or len(owned) < len(requests):
            raise SystemExit(f"N={case.n}: drift saw {len(seen)} and owned {len(owned)}")
        case.drift_seconds.append(seconds)
        case.drift_requests.append(sent)

    batched_once()  # warm-up, untimed
    naive_once()
    drift_once()
    case.drift_seconds.clear()
    case.drift_requests.clear()
    case.batched_seconds.clear()
    case.batched_requests.clear()
    case.naive_seconds.clear()
    case.naive_requests.clear()
    case.client_requests.clear()
    for round_number in range(repeat):
        steps = [batched_once, naive_once, drift_once]
        for step in steps if round_number % 2 == 0 else reversed(steps):
            step()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 2_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--out", type=Path, default=BENCH / "out", help="Folder for the servers' data and results."
    )
    parser.add_argument(
        "--smoke", action="store_true", help="One small round (CI: the benchmark still works)."
    )
    arguments = parser.parse_args(argv)
    if arguments.smoke:
        arguments.sizes, arguments.repeat = [20], 1

    out = arguments.out / "kubernetes"
    if out.exists():
        shutil.rmtree(out)
    load_before = os.getloadavg()
    cases = []
    for n in arguments.sizes:
        case = Case(n)
        folder = out / f"n-{n}"
        folder.mkdir(parents=True)
        log(f"N={n:,}: starting the fake API server, applying {n:,} queues and quotas...")
        api = start_kube_api(folder)  # one server per N: lists see only this N's objects
        client = KubeClient(make_api_client(str(api.kubeconfig), ""))
        try:
            case.prefix = unique_prefix()
            measure(case, api, client, case.prefix, folder, arguments.repeat)
        finally:
            client.close()
            api.stop()
        log(f"N={n:,}: {case.objects:,} objects applied in {case.setup_seconds:.1f} s, measured")
        cases.append(case)

    rows = []
    failures = []
    for case in cases:
        expected_paths = sorted(
            [BY_KIND[kind].path() for kind in LISTED_KINDS]
            + [NAMESPACE.path()]
            + [WORKLOAD.path(f"{case.prefix}{project}") for project in PROJECTS]
        )
        batched_s = statistics.median(case.batched_seconds)
        naive_s = statistics.median(case.naive_seconds)
        batched_requests = max(case.batched_requests)
        naive_requests = max(case.naive_requests)
        if batched_requests > BATCHED_REQUESTS or min(case.batched_requests) < BATCHED_REQUESTS:
            failures.append(
                f"N={case.n}: batched observe sent {case.batched_requests} requests, "
                f"not {BATCHED_REQUESTS} (one per kind listed)"
            )
        if case.batched_paths != expected_paths:
            failures.append(f"N={case.n}: batched observe sent {case.batched_paths}")
        if naive_requests > case.objects:
            failures.append(f"N={case.n}: naive sent {naive_requests} > {case.objects} requests")
        if sum(case.client_requests) != sum(case.batched_requests) + sum(case.naive_requests):
            failures.append(f"N={case.n}: the client counted {case.client_requests}")
        resources = 2 * case.n
        rows.append(
            (
                f"{case.n:,}",
                f"{resources:,}",
                f"{case.objects:,}",
                str(batched_requests),
                f"{naive_requests:,}",
                fmt(batched_s),
                fmt(naive_s),
                fmt(case.objects / batched_s, "{:,.0f}"),
                fmt(case.objects / naive_s, "{:,.0f}"),
                fmt(naive_s / batched_s, "{:.1f}x"),
                str(max(case.drift_requests)),
                fmt(statistics.median(case.drift_seconds)),
            )
        )
    header = (
        "N",
        "resources",
        "objects",
        "batched req",
        "naive req",
        "batched s",
        "naive s",
        "batched obj/s",
        "naive obj/s",
        "naive / batched",
        "drift req",
        "drift s",
    )
    drift_counts = {max(case.drift_requests) for case in cases}
    if len(drift_counts) != 1 or any(len(set(c.drift_requests)) != 1 for c in cases):
        failures.append(
            "drift sent a number of requests that depends on N: "
            + ", ".join(f"N={c.n}: {c.drift_requests}" for c in cases)
        )
    print(
        f"\nkubernetes: observing N Queues + N Quotas (fake API server, "
        f"median of {arguments.repeat} rounds)\n"
    )
    print(table(header, rows))
    result = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        },
        "revision": git_revision(),
        "server": "tests/services/kube_api (in process)",
        "repeat": arguments.repeat,
        "projects": len(PROJECTS),
        "batched_request_limit": BATCHED_REQUESTS,
        "cases": [asdict(case) for case in cases],
    }
    (arguments.out / "kubernetes.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nload average {load_before[0]:.2f} -> {os.getloadavg()[0]:.2f}")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
