"""A real Slurm 22.05 cluster of two nodes for the Slurm provider's tests.

`start_slurm(folder)` runs `scripts/slurm-cluster.sh start folder` (munge, MariaDB, slurmdbd,
slurmctld and one slurmd per node, all on 127.0.0.1 with state, logs, pid files and sockets
under the folder; two nodes with 4 fake GPUs each, accounting with association/QOS limits
enforced) and returns a `SlurmCluster`. Both nodes' slurmd run on this host (`slurmd -N
<node>`, each on a port of its own: Debian's build has MULTIPLE_SLURMD); the first node
(`node_name`, the short hostname) is the default `debug` partition's only node, the second
(`<hostname>-2`, Feature=extra) belongs to no partition until a test's own partition names
both (`node_names`), so a multi-node job spans two slurmd. `stop_slurm` stops the daemons
by their pid files and removes the folder; `restart_controller` brings slurmctld back after
a bad include file made it exit.
`serve_slurm` is the session fixture's body: a fresh folder under /tmp per session (munged
runs as user `munge` and must reach its socket, which pytest's 0700 temporary folders
forbid; a socket path must also stay under 108 bytes).

Sessions that died without stopping their cluster leave daemons behind: each live session
holds an exclusive lock on `<folder>/session.lock`, and a new session stops and removes
every `/tmp/trainform-slurm-*` folder whose lock nobody holds. Clusters of sessions still
running (another checkout, a parallel run) are left alone. Missing packages or a cluster
that does not come up call `unavailable` (a failure under CI=true, a skip elsewhere).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.services.common import unavailable

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm-cluster.sh"
FOLDER_PREFIX = "trainform-slurm-"
LOCK_NAME = "session.lock"
PROGRAMS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacctmgr")


@dataclass
class SlurmCluster:
    """A running cluster. Clients find it through `env()` (SLURM_CONF)."""

    folder: Path
    conf: Path
    partitions_file: Path
    cluster_name: str
    node_name: str
    node_names: tuple[str, ...]
    cpus: int
    memory_mb: int
    gpus: int
    bin_dir: Path
    job_root: Path
    lock: IO[bytes] | None = field(default=None, repr=False)

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def run(
        self, argv: Sequence[str], timeout: float = 30, conf: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (`sbatch`, `squeue`, ...) against this cluster (or with
        SLURM_CONF=`conf`); no check."""
        program = str(self.bin_dir / argv[0])
        return subprocess.run(
            [program, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env(), **({"SLURM_CONF": str(conf)} if conf else {})},
            check=False,
        )

    def controller_alive(self) -> bool:
        """Whether the slurmctld that `run/slurmctld.pid` names is running (a reconfigure
        with an unknown node or QOS in the include file makes it exit)."""
        try:
            pid = int((self.folder / "run" / "slurmctld.pid").read_text().strip())
            return Path(f"/proc/{pid}/comm").read_text().strip() == "slurmctld"
        except (OSError, ValueError):
            return False

    def log_tail(self, lines: int = 20) -> str:
        return _log_tail(self.folder, lines)


def start_slurm(folder: Path) -> SlurmCluster:
    """Start a cluster under `folder` (created if missing; it and its parents must be
    reachable by the `munge` user)."""
    if os.geteuid() != 0:
        unavailable("the Slurm test cluster needs root (it starts munged, MariaDB and Slurm)")
    missing = [name for name in PROGRAMS if shutil.which(name) is None]
    if missing:
        unavailable(
            f"cannot start the Slurm cluster: {', '.join(missing)} not installed "
            "(scripts/services.sh installs the Debian packages)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    try:
        result = subprocess.run(
            ["bash", str(SCRIPT), "start", str(folder)],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    except subprocess.TimeoutExpired:
        _stop_folder(folder)
        unavailable(f"cannot start the Slurm cluster: no answer in 180s\n{_log_tail(folder)}")
    if result.returncode != 0:
        _stop_folder(folder)
        unavailable(f"cannot start the Slurm cluster (exit {result.returncode}):\n{result.stderr}")
    return _cluster(folder)


def restart_controller(cluster: SlurmCluster) -> None:
    """Start slurmctld again (stopping it first if it runs) on the cluster's configuration;
    fix the include file first. Running jobs survive (slurmd keeps them)."""
    result = subprocess.run(
        ["bash", str(SCRIPT), "restart-controller", str(cluster.folder)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"cannot restart slurmctld:\n{result.stderr}")


def _cluster(folder: Path) -> SlurmCluster:
    values = _read_env(folder / "cluster.env")
    return SlurmCluster(
        folder=folder,
        conf=folder / "slurm.conf",
        partitions_file=folder / "trainform-partitions.conf",
        cluster_name=values["CLUSTER"],
        node_name=values["NODE"],
        node_names=tuple(values.get("NODES", values["NODE"]).split(",")),
        cpus=int(values["CPUS"]),
        memory_mb=int(values["MEMORY"]),
        gpus=int(values["GPUS"]),
        bin_dir=Path(shutil.which("sbatch") or "/usr/bin/sbatch").parent,
        job_root=folder / "jobs",
    )


def stop_slurm(cluster: SlurmCluster, remove: bool = True) -> None:
    """Stop the daemons `cluster.folder`'s pid files name; remove the folder if asked."""
    _stop_folder(cluster.folder)
    if cluster.lock is not None:
        cluster.lock.close()
        cluster.lock = None
    if remove:
        shutil.rmtree(cluster.folder, ignore_errors=True)


def serve_slurm(root: Path = Path("/tmp")) -> Iterator[SlurmCluster]:
    """A cluster in a fresh folder under `root` for as long as the generator runs."""
    reap_abandoned(root)
    folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=root))
    lock = hold_lock(folder)
    try:
        cluster = start_slurm(folder)
    except BaseException:
        lock.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    cluster.lock = lock
    try:
        yield cluster
    finally:
        stop_slurm(cluster)


def reap_abandoned(root: Path = Path("/tmp"), min_age: float = 600.0) -> list[Path]:
    """Stop and remove the clusters of sessions that ended without stopping them: folders
    whose lock nobody holds (or, with no lock file, older than `min_age` seconds)."""
    reaped = []
    for folder in sorted(root.glob(f"{FOLDER_PREFIX}*")):
        if not folder.is_dir() or folder.is_symlink():
            continue
        lock_path = folder / LOCK_NAME
        if not lock_path.exists():
            try:
                young = time.time() - folder.stat().st_mtime < min_age
            except OSError:
                continue
            if young:  # a session between mkdtemp and taking its lock
                continue
        else:
            with open(lock_path, "ab") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its session is alive
        _stop_folder(folder)
        shutil.rmtree(folder, ignore_errors=True)
        reaped.append(folder)
    return reaped


def hold_lock(folder: Path) -> IO[bytes]:
    """Mark `folder`'s cluster as in use by this process until the handle is closed."""
    handle = open(folder / LOCK_NAME, "ab")  # noqa: SIM115 - held for the session
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def _stop_folder(folder: Path) -> None:
    subprocess.run(
        ["bash", str(SCRIPT), "stop", str(folder)],
        capture_output=True,
        timeout=60,
        check=False,
    )


def _read_env(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key and not key.startswith("#"):
            values[key.strip()] = value.strip()
    return values


def _log_tail(folder: Path, lines: int = 20) -> str:
    parts = []
    for log in sorted(folder.glob("log/*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        parts.append(f"---- {log.name}\n" + "\n".join(text))
    return "\n".join(parts) or "(no log)"
