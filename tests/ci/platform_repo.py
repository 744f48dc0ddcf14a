"""A spec repository for the pipeline tests: a local-provider variant of examples/platform.

What the pipelines act on is kept from the example: its trainform.yaml (the prod
environment's variables, policies path, security), `.policies/`, `traces/`, CODEOWNERS,
projects, pools, queues and the teams' quotas. What the local provider cannot run is
changed: the provider instances become local platforms under `live/` (outside every
checkout, so they persist between jobs like a real cluster), state is a local file there,
each pool is one node holding a quarter of the example's GPUs (the local provider has one
node and at most 64 accelerators a pool), queue and quota GPU figures are quartered with
them, CPU and memory quotas are dropped, and the trace's jobs are sized down alike. Jobs,
images, datasets and evaluations are left out (they need a registry, S3 and GPUs).
trainform's own source is vendored under `tools/trainform`, which the pipelines install
from the trusted side. An `nvidia-smi` stand-in on PATH reports the 64 accelerators of
this imagined machine.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import zipfile
from io import StringIO
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.ci import wheel

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "platform"
KEPT = ("CODEOWNERS", ".policies/policies.yaml", "platform/projects.yaml")
# A vendored copy: what a build reads, and the CI pieces (the action, the component).
SOURCE = (*wheel.SOURCE, "ci", "templates")
ACCELERATORS = 64


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _config(live: Path) -> str:
    """The example's trainform.yaml with every provider instance a local platform and a
    local state file, each environment's own under `live/<env>/`, and the environments'
    variables."""
    config = YAML(typ="safe").load((EXAMPLE / "trainform.yaml").read_text(encoding="utf-8"))
    names = [p["name"] for p in config["providers"]]
    config["providers"] = [
        {"name": name, "type": "local", "connection": {"root": str(live / "prod" / name)}}
        for name in names
    ]
    config["state"] = {"backend": "local", "path": str(live / "prod" / "state.json")}
    # One state location and set of provider endpoints per environment, as the example.
    staging = config["environments"]["staging"]
    config["environments"] = {
        "staging": {
            "state": {"backend": "local", "path": str(live / "staging" / "state.json")},
            "providers": {name: {"root": str(live / "staging" / name)} for name in names},
            "variables": staging["variables"],
        },
        "prod": {"variables": config["environments"]["prod"]["variables"]},
    }
    text, writer = StringIO(), YAML(typ="safe", pure=True)
    writer.default_flow_style = False
    writer.dump(config, text)
    return text.getvalue()


def _pool(document: str) -> str:
    nodes = re.search(r"\n  nodes: (\d+)", document)
    if nodes is None:
        return document
    document = document.replace(nodes.group(0), "\n  nodes: 1")
    document = re.sub(
        r"\n    count: (\d+)",
        lambda m: f"\n    count: {int(nodes.group(1)) * int(m.group(1)) // 4}",
        document,
    )
    document = re.sub(r"\n  cpu: \d+", "\n  cpu: 1", document)
    return re.sub(r"\n  memory: \w+", "\n  memory: 1Gi", document)


def _quartered(text: str) -> str:
    text = re.sub(r"gpu: (\d+)", lambda m: f"gpu: {int(m.group(1)) // 4}", text)
    text = re.sub(r", cpu: \d+, memory: \w+", "", text)
    return re.sub(r"\n +(cpu|memory): \w+", "", text)


# The local provider enforces a Quota per queue, which Slurm's account limits cannot (the
# example's hpc-debug Quotas state none): the pipelines' platform keeps per-queue limits
# there, the ones the tests' pull requests edit.
DEBUG_LIMITS = "limits:\n    gpu: 16\n    runningJobs: 4\n    maxWallTime: 2h\n"


def _debug_limits(text: str) -> str:
    return text.replace("queue: hpc-debug\n  limits: {}\n", f"queue: hpc-debug\n  {DEBUG_LIMITS}")


def _trace(text: str) -> str:
    rows = text.splitlines()
    out = [rows[0]]
    for row in rows[1:]:
        cells = row.split(",")
        cells[4] = str(max(1, int(cells[4]) // 4))
        out.append(",".join(cells))
    return "\n".join(out) + "\n"


def write_platform(folder: Path, live: Path) -> None:
    for name in KEPT:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(EXAMPLE / name, folder / name)
    (folder / "trainform.yaml").write_text(_config(live), encoding="utf-8")
    pools = (EXAMPLE / "platform" / "pools.yaml").read_text(encoding="utf-8")
    (folder / "platform" / "pools.yaml").write_text(
        "\n---\n".join(_pool(d) for d in pools.split("\n---\n")), encoding="utf-8"
    )
    queues = (EXAMPLE / "platform" / "queues.yaml").read_text(encoding="utf-8")
    (folder / "platform" / "queues.yaml").write_text(_quartered(queues), encoding="utf-8")
    for quotas in EXAMPLE.glob("teams/*/quotas.yaml"):
        target = folder / quotas.relative_to(EXAMPLE)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = _debug_limits(quotas.read_text(encoding="utf-8"))
        target.write_text(_quartered(text), encoding="utf-8")
    (folder / "traces").mkdir(exist_ok=True)
    trace = (EXAMPLE / "traces" / "recent.csv").read_text(encoding="utf-8")
    (folder / "traces" / "recent.csv").write_text(_trace(trace), encoding="utf-8")


def write_standin_bin(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\nfor i in $(seq {ACCELERATORS}); do echo "NVIDIA A100-SXM4-80GB"; done\n'
    )
    smi.chmod(0o755)
    return folder


PLACEHOLDER = Path("/live-placeholder")
DEVELOPMENT_TRAINFORM = REPO / ".venv" / "bin" / "trainform"


def make_template(template: Path, trainform: Path) -> None:
    """`main` of the spec repository once per session: the platform and its lock, its live
    paths a placeholder that `make_origin` replaces with a test's own; no trainform yet."""
    template.mkdir(parents=True)
    git(template, "init", "-q", "-b", "main")
    git(template, "config", "user.email", "ci@example.com")
    git(template, "config", "user.name", "ci")
    write_platform(template, PLACEHOLDER)
    (template / ".trainformignore").write_text("tools/\n", encoding="utf-8")
    subprocess.run(
        [str(trainform), "lock", ".", "--env", "prod"], cwd=template, check=True,
        capture_output=True,
    )
    git(template, "add", "-A")
    git(template, "commit", "-q", "-m", "platform")


def copy_source(target: Path) -> None:
    """trainform's source as a vendored copy holds it (what a build reads, the CI pieces)."""
    for name in SOURCE:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(
                source, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def make_trainform_repository(folder: Path) -> Path:
    """trainform's own repository (one commit of its source), for a submodule to pin."""
    copy_source(folder)
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "-c", "user.email=ci@example.com", "-c", "user.name=ci", "commit", "-q", "-m",
        "trainform")
    return folder


def make_origin(
    origin: Path, live: Path, template: Path, install: str = "vendored",
    trainform: Path | None = None,
) -> None:
    """The repository on the forge, copied from `template`: `main` with the platform (live
    under `live`, applied to both environments) and trainform at `tools/`, as `install`
    says: a vendored copy, a submodule of the repository `trainform`, or the wheel
    `trainform`."""
    shutil.copytree(template, origin, symlinks=True)
    config = origin / "trainform.yaml"
    config.write_text(
        config.read_text(encoding="utf-8").replace(str(PLACEHOLDER), str(live)), encoding="utf-8"
    )
    if install == "vendored":
        copy_source(origin / "tools" / "trainform")
    elif install == "submodule":
        assert trainform is not None
        git(origin, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
            str(trainform), "tools/trainform")
    else:
        assert trainform is not None and trainform.suffix == ".whl"
        (origin / "tools").mkdir()
        shutil.copy2(trainform, origin / "tools" / trainform.name)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", f"trainform ({install}), live platforms")
    # The platform as the story finds it: main applied to both environments (so a pull
    # request's plan holds its own change, not the whole platform's creation).
    path = f"{write_standin_bin(origin.parent / 'bin')}{os.pathsep}{os.environ['PATH']}"
    for environment in ("staging", "prod"):
        subprocess.run(
            [str(DEVELOPMENT_TRAINFORM), "apply", ".", "--env", environment, "--auto-approve"],
            cwd=origin, check=True, capture_output=True, env={**os.environ, "PATH": path},
        )


def commit_change(
    origin: Path, branch: str, base: str, edits: dict[str, str] | dict[str, str | bytes]
) -> str:
    """Commit `edits` (path -> new text, or bytes) on `branch` (created from `base`); its sha."""
    current = git(origin, "branch", "--show-current")
    if branch not in git(origin, "branch", "--list", branch):
        git(origin, "branch", branch, base)
    git(origin, "checkout", "-q", branch)
    for path, text in edits.items():
        (origin / path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            (origin / path).write_bytes(text)
        else:
            (origin / path).write_text(text, encoding="utf-8")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", f"change on {branch}")
    sha = git(origin, "rev-parse", "HEAD")
    git(origin, "checkout", "-q", current)
    return sha


def merge(origin: Path, branch: str) -> str:
    git(origin, "checkout", "-q", "main")
    git(origin, "merge", "-q", "--no-ff", "-m", f"Merge {branch}", branch)
    return git(origin, "rev-parse", "HEAD")


def limits(live: Path, quota: str, environment: str = "prod") -> dict[str, Any]:
    """The limits `environment`'s state records for Quota/`quota` (the last apply's)."""
    state = json.loads((live / environment / "state.json").read_text(encoding="utf-8"))
    return dict(state["resources"][f"Quota/{quota}"]["spec"]["spec"]["limits"])


def hand_edit(live: Path, address: str, field: str, value: object) -> None:
    """Change one live object of prod out of band, as an admin with direct access would."""
    database = sqlite3.connect(live / "prod" / "gke-prod" / "platform.db")
    with database:
        (document,) = database.execute(
            "SELECT document FROM objects WHERE address = ?", (address,)
        ).fetchone()
        data = json.loads(document)
        data["spec"][field] = value
        database.execute(
            "UPDATE objects SET document = ?, manager = 'admin', updated_at = "
            "strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE address = ?",
            (json.dumps(data), address),
        )
    database.close()


def planted_files(sentinel: Path) -> dict[str, str | bytes]:
    """What a hostile branch adds to be read or installed as the trusted side: under
    `.trusted/` (where a job once unpacked the base commit inside the checkout) a CODEOWNERS
    naming @mallory at GitHub's first place, policies that disable project-isolation, an
    empty trace, and a trainform source with a setup.cfg and a `.pth`; a wheel in `dist/`
    (where a job once took the trusted wheel from) whose `.pth` runs on every Python start;
    and the same `.pth` and setup.cfg in trainform's own source. Anything that runs writes
    `sentinel`."""
    payload = f"import pathlib; pathlib.Path({str(sentinel)!r}).write_text('planted')\n"
    setup_cfg = "[metadata]\nname = trainform\nversion = 99.0\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        info = "trainform-99.0.dist-info"
        wheel.writestr("planted.pth", payload)
        wheel.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: trainform\nVersion: 99.0\n"
        )
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    policies = "apiVersion: trainform/v1\nkind: PolicyConfig\ndisabled: [project-isolation]\n"
    return {
        ".trusted/.github/CODEOWNERS": "* @mallory\n",
        ".trusted/CODEOWNERS": "* @mallory\n",
        ".trusted/.policies/policies.yaml": policies,
        ".trusted/traces/recent.csv": "",
        ".trusted/tools/trainform/setup.cfg": setup_cfg,
        ".trusted/tools/trainform/planted.pth": payload,
        ".trusted/tree/.policies/policies.yaml": policies,
        ".trusted/tree/.github/CODEOWNERS": "* @mallory\n",
        "dist/trainform-99.0-py3-none-any.whl": buffer.getvalue(),
        "tree/.github/CODEOWNERS": "* @mallory\n",
        "tools/trainform/setup.cfg": setup_cfg,
        "tools/trainform/planted.pth": payload,
    }


def installed_plants(venv: Path) -> list[str]:
    """Files of the planted wheel found in `venv` (none when nothing planted was installed)."""
    return sorted(p.name for p in venv.rglob("planted.pth")) + sorted(
        p.name for p in venv.rglob("trainform-99.0.dist-info")
    )


def live_rows(live: Path) -> list[tuple]:
    """Every object row of the live platform, to put back as it was."""
    database = sqlite3.connect(live / "prod" / "gke-prod" / "platform.db")
    rows = database.execute("SELECT address, manager, document, updated_at FROM objects").fetchall()
    database.close()
    return rows


def restore_rows(live: Path, rows: list[tuple]) -> None:
    database = sqlite3.connect(live / "prod" / "gke-prod" / "platform.db")
    with database:
        database.executemany(
            "UPDATE objects SET manager = ?, document = ?, updated_at = ? WHERE address = ?",
            [(manager, document, updated, address) for address, manager, document, updated in rows],
        )
    database.close()
