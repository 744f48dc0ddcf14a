"""Refresh fails fast and readably: providers are read in parallel, one that does not
answer within --timeout is reported as such, and the error has one line per provider
naming what to check; a Slurm provider whose slurm.conf is missing fails at once (the
Slurm commands would retry reading it for a minute)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from trainform.planner.refresh import RefreshError, RefreshSettings, Target, observe_all
from trainform.planner.session import ProviderSet
from trainform.providers.base import ObserveRequest
from trainform.providers.errors import ProviderConfigError, TransientProviderError
from trainform.providers.local.provider import LocalProvider
from trainform.providers.slurm.commands import SlurmCommands
from trainform.specs import load_specs

from tests.helpers import write_tree

CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: stuck, type: local}
  - {name: broken, type: objectstore, connection: {endpointUrl: 'http://127.0.0.1:9'}}
"""

RELEASE = threading.Event()


class StuckProvider(LocalProvider):
    """A local provider whose reads never come back until the test releases them."""

    def observe(self, requests):  # type: ignore[no-untyped-def]
        RELEASE.wait(30)
        return {}


class BrokenProvider(LocalProvider):
    def observe(self, requests):  # type: ignore[no-untyped-def]
        raise TransientProviderError("cannot reach endpoint\nconnection refused\n")


def request(address: str) -> ObserveRequest:
    return ObserveRequest(address, "Project", address.split("/")[1], None, {})


@pytest.fixture()
def short_timeout():  # type: ignore[no-untyped-def]
    before = RefreshSettings.timeout
    RefreshSettings.timeout = 0.3
    yield
    RefreshSettings.timeout = before
    RELEASE.set()


def test_each_provider_gets_one_line_naming_what_to_check(
    tmp_path: Path, short_timeout: None
) -> None:
    write_tree(tmp_path, {"trainform.yaml": CONFIG})
    config = load_specs(tmp_path).config
    providers = ProviderSet(
        config, tmp_path, {"local": StuckProvider, "objectstore": BrokenProvider}
    )
    targets = [Target("stuck", request("Project/a")), Target("broken", request("Project/b"))]

    with pytest.raises(RefreshError) as raised:
        observe_all(providers, targets)

    lines = str(raised.value).splitlines()
    assert len(lines) == 3
    assert lines[1] == (
        "  provider `broken` (objectstore): cannot reach endpoint / connection refused; "
        "check connection.endpointUrl and the credentials (profile or AWS_* variables)"
    )
    assert lines[2] == (
        "  provider `stuck` (local): did not answer within 0.3s (--timeout); check connection.root"
    )


def test_a_missing_slurm_conf_fails_without_running_anything(tmp_path: Path) -> None:
    commands = SlurmCommands(conf=str(tmp_path / "absent" / "slurm.conf"))
    commands.program = lambda name: "/bin/false"  # type: ignore[method-assign]

    with pytest.raises(ProviderConfigError, match="slurm.conf .* does not exist on this machine"):
        commands.run(["sacctmgr", "-nP", "show", "account"])
