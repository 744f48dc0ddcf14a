"""Slurm-only platforms: Images placed on the Slurm instance (no `local` needed), container
images passed to sbatch (with the QOS their partition names), and Slurm accounts kept off a
`local` instance next to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.planner.desired import build_desired
from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.jobs import SlurmJobs
from trainform.specs import load_specs

from tests.providers.slurm.test_mapping import launch

SLURM = (
    "apiVersion: trainform/v1\nproviders:\n  - name: hpc\n    type: slurm\n"
    "    connection: {jobRoot: /srv/jobs}\n"
)
LOCAL = "  - name: laptop\n    type: local\n"
DOCUMENTS = (
    "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: host-python}\n"
    "spec: {runtime: host}\n---\n"
    "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: trainer}\n"
    "spec: {reference: 'registry.example.com/trainer@sha256:" + "a" * 64 + "'}\n---\n"
    "apiVersion: trainform/v1\nkind: Project\nmetadata: {name: physics}\n"
    "spec: {owners: [sci], slurm: {parent: root}}\n---\n"
    "apiVersion: trainform/v1\nkind: Project\nmetadata: {name: plain}\n"
    "spec: {owners: [sci]}\n"
)


def placed(tmp_path: Path, providers: str) -> dict[str, list[str]]:
    (tmp_path / "trainform.yaml").write_text(providers)
    (tmp_path / "platform.yaml").write_text(DOCUMENTS)
    return {a: item.providers for a, item in build_desired(load_specs(tmp_path)).items()}


def test_images_of_a_slurm_only_platform_are_on_the_slurm_instance(tmp_path: Path) -> None:
    where = placed(tmp_path, SLURM)
    assert where["Image/host-python"] == ["hpc"]
    assert where["Image/trainer"] == ["hpc"]


def test_a_slurm_account_is_not_placed_on_a_local_instance_next_to_slurm(
    tmp_path: Path,
) -> None:
    where = placed(tmp_path, SLURM + LOCAL)
    assert where["Project/physics"] == ["hpc"]  # states Slurm settings: an account only
    assert sorted(where["Project/plain"]) == ["hpc", "laptop"]
    assert where["Image/host-python"] == ["laptop"]


@pytest.mark.parametrize(
    ("containers", "option"),
    [("pyxis", "--container-image="), ("oci", "--container=")],
)
def test_a_container_image_reaches_sbatch_as_one_option(
    tmp_path: Path, containers: str, option: str
) -> None:
    jobs = SlurmJobs(SlurmCommands(), tmp_path, tmp_path, "trainform", containers=containers)
    image = "registry.example.com/trainer@sha256:" + "a" * 64
    options = jobs._run_options(launch(image=image))
    assert options[-1] == option + image
    assert not any(o.startswith("--container") for o in jobs._run_options(launch()))


def test_jobs_ask_for_the_qos_their_partition_names(tmp_path: Path) -> None:
    jobs = SlurmJobs(SlurmCommands(), tmp_path, tmp_path, "trainform", qos_of={"train": "gold"}.get)
    assert "--qos=gold" in jobs._run_options(launch())


def test_a_slurm_image_is_pinned_without_a_registry_or_a_local_instance(tmp_path: Path) -> None:
    from trainform.planner.session import ProviderSet
    from trainform.providers.base import DesiredResource
    from trainform.providers.errors import PermanentProviderError

    (tmp_path / "trainform.yaml").write_text(SLURM)
    (tmp_path / "platform.yaml").write_text(DOCUMENTS)
    specs = load_specs(tmp_path)
    desired = build_desired(specs)
    providers = ProviderSet(specs.config, tmp_path)
    try:
        slurm = providers.get("hpc")
        host, trainer = (
            DesiredResource(a, "Image", a.split("/")[1], None, desired[a].document)
            for a in ("Image/host-python", "Image/trainer")
        )
        assert slurm.resolve(host)["digest"].startswith("sha256:")
        assert slurm.resolve(trainer) == {"digest": "sha256:" + "a" * 64}
        unpinned = {**trainer.document, "spec": {"reference": "registry.example.com/t:1"}}
        with pytest.raises(PermanentProviderError, match="must carry its digest"):
            slurm.resolve(DesiredResource("Image/t", "Image", "t", None, unpinned))
    finally:
        providers.close()
