"""Benchmark: verifying a Dataset of N objects on S3 (objectstore provider's observe).

Starts a moto server of its own (tests/services/s3.py), and for each size N (default 1,000
and 10,000) and each bucket kind (plain and versioned) uploads N tiny objects under
`datasets/corpus-N/v1/` with a thread pool, creates the Dataset through the provider (which
records the manifest and tags every object), then times, interleaved over `--repeat` rounds:

- **observe**: `ObjectStoreProvider.observe` of that Dataset, by a fresh provider on a warm
  client (so each round pays the bucket's versioning check, as every plan does): the marker
  GET, the marker's tags, the versioning check and the paginated listing of the version,
  compared with the recorded manifest (the result must be "exists, no findings");
- **floor**: a bare boto3 `list_objects_v2` paginator over the same prefix with the same
  client, keeping every key, size and ETag: the least any verification must do. On a
  versioned bucket the provider lists object versions instead (it records version ids), so
  a bare `list_object_versions` paginator is timed too ("versions floor").

HTTP requests are counted by a botocore hook (`before-send.s3.*`) on the client, retries
included. The benchmark asserts (and exits 1 otherwise) that observe sends at most
ceil(N/1000) + 3 requests (the listing pages, plus the marker GET, the marker's tagging GET
and the bucket's versioning GET) and that the provider's own `requests` counter agrees.
It asserts nothing about time. Reported: median seconds, objects per second, requests,
and the ratio observe / floor; raw numbers go to bench/out/objectstore.json.

    .venv/bin/python bench/bench_objectstore.py [--sizes 1000 10000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
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

from trainform.planner.desired import build_desired  # noqa: E402
from trainform.planner.session import ProviderSet  # noqa: E402
from trainform.providers.base import DesiredResource, ObserveRequest  # noqa: E402
from trainform.providers.objectstore.client import make_client  # noqa: E402
from trainform.providers.objectstore.provider import ObjectStoreProvider  # noqa: E402
from trainform.specs import load_specs  # noqa: E402

from bench.bench_plan import fmt, log, table  # noqa: E402
from bench.bench_validate import git_revision  # noqa: E402
from tests.providers.objectstore.fixtures import DATASET, PROJECTS, objectstore_config  # noqa: E402
from tests.services.s3 import REGION, S3Server, credentials_env, start_moto  # noqa: E402

PAGE = 1000  # S3's largest page of ListObjectsV2 / ListObjectVersions
FIXED_REQUESTS = 3  # marker GET, marker tagging GET, bucket versioning GET
UPLOAD_THREADS = 32


@dataclass
class Case:
    n: int
    versioned: bool
    bucket: str
    upload_seconds: float = 0.0
    create_seconds: float = 0.0
    create_requests: int = 0
    observe_seconds: list[float] = field(default_factory=list)
    observe_requests: list[int] = field(default_factory=list)
    provider_requests: list[int] = field(default_factory=list)
    floor_seconds: list[float] = field(default_factory=list)
    floor_requests: list[int] = field(default_factory=list)
    versions_floor_seconds: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        return "versioned" if self.versioned else "plain"

    @property
    def request_limit(self) -> int:
        return math.ceil(self.n / PAGE) + FIXED_REQUESTS


class RequestCounter:
    """Counts HTTP requests a boto3 client sends (retries included)."""

    def __init__(self, client: Any) -> None:
        self.count = 0
        client.meta.events.register("before-send.s3.*", self)

    def __call__(self, **_: Any) -> None:
        self.count += 1

    def counted(self, work: Callable[[], Any]) -> tuple[Any, float, int]:
        """(result, seconds, requests) of `work()`."""
        before = self.count
        started = time.perf_counter()
        result = work()
        return result, time.perf_counter() - started, self.count - before


def upload(server: S3Server, bucket: str, prefix: str, n: int) -> float:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        region_name=REGION,
        config=Config(
            s3={"addressing_style": "path"},
            max_pool_connections=UPLOAD_THREADS,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )
    started = time.perf_counter()

    def put(i: int) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/part-{i:06}.txt", Body=f"{i}\n".encode())

    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        list(pool.map(put, range(n)))
    return time.perf_counter() - started


def spec_folder(root: Path, server: S3Server, cases: list[Case]) -> Path:
    """One Dataset `corpus-N-<kind>` per case, each on its own bucket."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "trainform.yaml").write_text(objectstore_config(server, cases[0].bucket))
    (root / "projects.yaml").write_text(PROJECTS)
    documents = [
        DATASET.format(name=name(case), bucket=case.bucket, readers="research", policy="Abandon")
        for case in cases
    ]
    (root / "datasets.yaml").write_text("---\n".join(documents))
    return root


def name(case: Case) -> str:
    return f"corpus-{case.n}-{case.label}"


def request_of(resource: DesiredResource) -> ObserveRequest:
    return ObserveRequest(
        resource.address, resource.kind, resource.name, resource.project, resource.document
    )


def floor(
    client: Any, bucket: str, prefix: str, versions: bool = False
) -> list[tuple[str, int, str]]:
    operation, items = (
        ("list_object_versions", "Versions") if versions else ("list_objects_v2", "Contents")
    )
    pages = client.get_paginator(operation).paginate(
        Bucket=bucket, Prefix=prefix + "/", PaginationConfig={"PageSize": PAGE}
    )
    return [(item["Key"], item["Size"], item["ETag"]) for page in pages for item in page[items]]


def measure(
    case: Case, client: Any, counter: RequestCounter, resource: DesiredResource, repeat: int
) -> None:
    prefix = f"datasets/{name(case)}/v1"
    request = request_of(resource)

    def observe_once() -> None:
        provider = ObjectStoreProvider(client)
        seen, seconds, requests = counter.counted(lambda: provider.observe([request]))
        observation = seen[resource.address]
        if not observation.exists or observation.findings:
            raise SystemExit(f"{name(case)}: observe saw {observation}")
        case.observe_seconds.append(seconds)
        case.observe_requests.append(requests)
        case.provider_requests.append(provider.requests)

    def floor_once() -> None:
        listed, seconds, requests = counter.counted(lambda: floor(client, case.bucket, prefix))
        if len(listed) != case.n:
            raise SystemExit(f"{name(case)}: the floor listed {len(listed)} objects")
        case.floor_seconds.append(seconds)
        case.floor_requests.append(requests)
        if case.versioned:  # what the provider lists there, to record version ids
            started = time.perf_counter()
            floor(client, case.bucket, prefix, versions=True)
            case.versions_floor_seconds.append(time.perf_counter() - started)

    observe_once()  # warm-up, untimed
    floor_once()
    case.observe_seconds.clear()
    case.observe_requests.clear()
    case.provider_requests.clear()
    case.floor_seconds.clear()
    case.floor_requests.clear()
    case.versions_floor_seconds.clear()
    for round_number in range(repeat):
        steps = [observe_once, floor_once]
        for step in steps if round_number % 2 == 0 else reversed(steps):
            step()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--kinds", nargs="+", choices=["plain", "versioned"], default=["plain", "versioned"]
    )
    parser.add_argument(
        "--out", type=Path, default=BENCH / "out", help="Folder for the servers' data and results."
    )
    parser.add_argument(
        "--smoke", action="store_true", help="One small round (CI: the benchmark still works)."
    )
    arguments = parser.parse_args(argv)
    if arguments.smoke:
        arguments.sizes, arguments.repeat = [50], 1

    out = arguments.out / "objectstore"
    os.environ.update(credentials_env())
    load_before = os.getloadavg()
    log("starting moto...")
    server = start_moto(out / "moto")
    try:
        cases = []
        for n in arguments.sizes:
            for kind in arguments.kinds:
                versioned = kind == "versioned"
                cases.append(Case(n, versioned, server.new_bucket(versioned=versioned)))
        for case in cases:
            log(f"uploading {case.n:,} objects ({case.label} bucket)...")
            case.upload_seconds = upload(server, case.bucket, f"datasets/{name(case)}/v1", case.n)
        root = spec_folder(out / "specs", server, cases)
        specs = load_specs(root)
        desired = build_desired(specs)
        providers = ProviderSet(specs.config, root)
        creator = providers.get("s3")
        assert isinstance(creator, ObjectStoreProvider)
        client = make_client(specs.config.provider("s3").connection)  # type: ignore[union-attr]
        counter = RequestCounter(client)
        creator_counter = RequestCounter(creator.client)
        for case in cases:
            item = desired[f"Dataset/{name(case)}"]
            resource = DesiredResource(item.address, item.kind, item.name, None, item.document)
            log(f"creating {item.address} (records the manifest, tags {case.n:,} objects)...")
            _, case.create_seconds, case.create_requests = creator_counter.counted(
                lambda resource=resource: creator.create(resource)
            )
            log(f"measuring {item.address}: {arguments.repeat} rounds...")
            measure(case, client, counter, resource, arguments.repeat)
        providers.close()
    finally:
        server.stop()

    rows = []
    failures = []
    for case in cases:
        observe_s = statistics.median(case.observe_seconds)
        floor_s = statistics.median(case.floor_seconds)
        versions_s = (
            statistics.median(case.versions_floor_seconds) if case.versions_floor_seconds else 0
        )
        requests = max(case.observe_requests)
        if requests > case.request_limit:
            failures.append(f"{name(case)}: {requests} requests > {case.request_limit}")
        if case.provider_requests != case.observe_requests:
            failures.append(
                f"{name(case)}: provider counted {case.provider_requests}, "
                f"HTTP {case.observe_requests}"
            )
        rows.append(
            (
                f"{case.n:,}",
                case.label,
                f"{requests} (<= {case.request_limit})",
                str(max(case.floor_requests)),
                fmt(observe_s),
                fmt(floor_s),
                fmt(case.n / observe_s, "{:,.0f}"),
                fmt(case.n / floor_s, "{:,.0f}"),
                fmt(observe_s / floor_s, "{:.2f}x"),
                fmt(observe_s / versions_s, "{:.2f}x") if versions_s else "-",
                f"{case.create_requests:,} / {case.create_seconds:.1f} s",
            )
        )
    header = (
        "N",
        "bucket",
        "observe req",
        "floor req",
        "observe s",
        "floor s",
        "observe obj/s",
        "floor obj/s",
        "ratio",
        "vs versions floor",
        "create req / s",
    )
    print(f"\nobjectstore: verifying a dataset (moto, median of {arguments.repeat} rounds)\n")
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
        "server": "moto",
        "repeat": arguments.repeat,
        "cases": [asdict(case) | {"request_limit": case.request_limit} for case in cases],
    }
    (arguments.out / "objectstore.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nload average {load_before[0]:.2f} -> {os.getloadavg()[0]:.2f}")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
