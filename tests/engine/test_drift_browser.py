"""The HTML drift report opened in real headless Chromium: what an admin sees (visible text
and structure), that it loads nothing from anywhere, and that it prints; drift made by hand
on the local platform (a queue row, a dataset file), on the S3 test server (an object
overwritten), on the Kubernetes test server (a ClusterQueue edited with kubectl) and on the
Slurm test cluster (a QOS changed with sacctmgr).
Screenshots and the PDF stay in the test's tmp folder as artifacts."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from trainform.cli.render.drift_report import render_drift_html
from trainform.planner.drift_run import check_drift
from trainform.planner.workspace import open_workspace
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE

from tests.engine.support import SpecFolder, run_trainform
from tests.engine.test_drift_reports import EDITED_AT, QUEUE, QUOTA, make_drift
from tests.providers.kubernetes.fixtures import platform_folder, unique_prefix
from tests.providers.objectstore.fixtures import dataset_folder
from tests.providers.objectstore.test_datasets import VERSION_PREFIX, drop_bucket
from tests.providers.slurm import fixtures as slurm_fixtures
from tests.services.kube_api import KubeAPI
from tests.services.s3 import S3Server
from tests.services.slurm import SlurmCluster


@pytest.fixture
def report_file(quickstart: SpecFolder, tmp_path: Path) -> Path:
    quickstart.converge()
    make_drift(quickstart)
    workspace = open_workspace(str(quickstart.root))
    try:
        check_drift(workspace, now=datetime(2026, 5, 3, 9, tzinfo=UTC))
        report = check_drift(workspace, now=datetime(2026, 5, 4, 9, tzinfo=UTC))
    finally:
        workspace.providers.close()
    path = tmp_path / "drift.html"
    path.write_text(render_drift_html(report), encoding="utf-8")
    return path


def test_the_html_report_reads_right_in_chromium_offline_and_prints(
    browser: Any, report_file: Path, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    try:
        page.goto(report_file.as_uri())
        page.screenshot(path=str(tmp_path / "drift.png"), full_page=True)

        assert page.title() == "trainform drift report 2026-05-04T09:00:00Z"
        assert page.locator("h1").inner_text() == "trainform drift report"
        assert page.locator("#headline").inner_text() == (
            "Drift: 1 data-mutated, 1 missing, 1 modified, 1 orphaned (of 8 resources checked)."
        )
        severity = page.get_by_role("table", name="open findings by severity")
        assert severity.locator("tbody tr").all_inner_texts() == [
            "high\t2", "medium\t2", "low\t0"
        ]  # fmt: skip
        assert page.locator("section.instance h2").all_inner_texts() == ["Provider instance local"]
        addresses = page.locator("section.resource").evaluate_all(
            "sections => sections.map(s => s.dataset.address)"
        )
        assert addresses == ["Dataset/tiny-corpus", QUEUE, QUOTA, "Project/stray"]

        queue = page.locator(f'section.resource[data-address="{QUEUE}"] article.finding')
        assert queue.locator(".badge").all_inner_texts() == ["medium"]  # seen in the run before
        corpus = page.locator('section.resource[data-address="Dataset/tiny-corpus"] dl.evidence')
        assert "changed\npart-000.txt" in corpus.inner_text()
        assert queue.locator("table.changes tbody tr").inner_text().split("\t") == [
            "spec.defaultPriority", "100", "5", "50"
        ]  # fmt: skip
        assert f"updatedAt\n{EDITED_AT}" in queue.locator("dl.evidence").inner_text()
        assert queue.locator(".when").first.inner_text() == (
            "First seen 2026-05-03T09:00:00Z · last seen 2026-05-04T09:00:00Z"
        )
        assert (
            queue.locator(".remedy")
            .inner_text()
            .startswith("Remedy trainform apply to set spec.defaultPriority to 50;")
        )
        applied_colour = queue.locator("td.applied").evaluate("e => getComputedStyle(e).color")
        live_colour = queue.locator("td.live").evaluate("e => getComputedStyle(e).color")
        assert (applied_colour, live_colour) == ("rgb(179, 29, 40)", "rgb(34, 134, 58)")
        assert page.locator("article.finding").count() == 4
        assert requested == [report_file.as_uri()]

        pdf = page.pdf(path=str(tmp_path / "drift.pdf"))
        assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
    finally:
        page.close()


def test_an_object_overwritten_on_s3_shows_its_versions_in_chromium(
    browser: Any, tmp_path: Path, s3_env: S3Server, request: pytest.FixtureRequest
) -> None:
    bucket = s3_env.new_bucket()
    request.addfinalizer(lambda: drop_bucket(s3_env, bucket))
    root = dataset_folder(tmp_path / "specs", s3_env, bucket)
    applied = run_trainform("apply", ".", "--auto-approve", cwd=root)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    client = s3_env.client()
    key = f"{VERSION_PREFIX}/part-001.txt"
    before = client.head_object(Bucket=bucket, Key=key)
    after = client.put_object(Bucket=bucket, Key=key, Body=b"overwritten by hand\n")
    out = tmp_path / "drift.html"

    drift = run_trainform("drift", ".", "--format", "html", "--out", str(out), cwd=root)

    assert drift.returncode == 2, drift.stdout + drift.stderr
    page = browser.new_page()
    try:
        page.goto(out.as_uri())
        page.screenshot(path=str(tmp_path / "drift-s3.png"), full_page=True)
        finding = page.locator('section.resource[data-address="Dataset/corpus"] article.finding')
        assert finding.locator("strong").first.inner_text() == "data-mutated"
        row = finding.locator("table.objects tbody tr").inner_text().split("\t")
        assert row[:2] == ["part-001.txt", "changed"]
        assert row[2] == (f"{before['ETag'].strip(chr(34))} -> {after['ETag'].strip(chr(34))}")
        assert row[3] == f"{before['VersionId']} -> {after['VersionId']}"
        assert row[4].startswith("20") and row[4].endswith("Z")
        assert (
            finding.locator(".remedy")
            .inner_text()
            .startswith(
                "Remedy copy back the previous version of each changed object (its oldVersionId)"
            )
        )
    finally:
        page.close()


def test_a_cluster_queue_edited_with_kubectl_shows_who_and_when_in_chromium(
    browser: Any, tmp_path: Path, kube_api: KubeAPI
) -> None:
    prefix = unique_prefix()
    root = platform_folder(tmp_path / "specs", kube_api, prefix)
    applied = run_trainform("apply", ".", "--auto-approve", cwd=root)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    name = f"{prefix}train-vision"  # the project's ClusterQueue of Quota/vision/train
    queue = kube_api_object(kube_api, name)
    groups = queue["spec"]["resourceGroups"]
    limits = groups[0]["flavors"][0]["resources"]
    [gpu] = [r for r in limits if r["name"] == "nvidia.com/gpu"]
    gpu["borrowingLimit"] = "24"
    kubectl_edit(kube_api, name, {"spec": {"resourceGroups": groups}})
    out = tmp_path / "drift.html"

    drift = run_trainform("drift", ".", "--format", "html", "--out", str(out), cwd=root)

    assert drift.returncode == 2, drift.stdout + drift.stderr
    page = browser.new_page()
    try:
        page.goto(out.as_uri())
        page.screenshot(path=str(tmp_path / "drift-kubernetes.png"), full_page=True)
        finding = page.locator(
            'section.resource[data-address="Quota/vision/train"] article.finding'
        )
        assert finding.locator("strong").first.inner_text() == "modified"
        assert finding.locator("table.changes tbody tr").inner_text().split("\t")[:3] == [
            "spec.limits.gpu", "16", "24"
        ]  # fmt: skip
        evidence = finding.locator("dl.evidence").inner_text()
        assert "changedBy\nkubectl-edit" in evidence
        assert f"object\n'ClusterQueue {name}'" in evidence
        assert "changedAt\n20" in evidence
    finally:
        page.close()


def kube_api_object(api: KubeAPI, name: str) -> dict[str, Any]:
    client = KubeClient(make_api_client(str(api.kubeconfig), ""))
    try:
        found = client.get(CLUSTER_QUEUE, name)
    finally:
        client.close()
    assert found is not None, name
    return found


def kubectl_edit(api: KubeAPI, name: str, patch: dict[str, Any]) -> None:
    """What `kubectl edit clusterqueue NAME` sends: a merge patch as manager kubectl-edit."""
    client = KubeClient(make_api_client(str(api.kubeconfig), ""))
    try:
        client.merge_patch(CLUSTER_QUEUE, name, None, patch, "kubectl-edit")
    finally:
        client.close()


def test_a_qos_changed_with_sacctmgr_shows_who_and_when_in_chromium(
    browser: Any, tmp_path: Path, slurm_cluster: SlurmCluster
) -> None:
    prefix = slurm_fixtures.unique_prefix("h")
    project, queue, pool = (f"{prefix}-{s}" for s in ("p", "q", "pool"))
    root = tmp_path / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        slurm_fixtures.config(slurm_cluster, slurm_cluster.job_root / prefix)
    )
    documents = [
        slurm_fixtures.pool(slurm_cluster, pool),
        slurm_fixtures.project(project),
        slurm_fixtures.queue(queue, pool),
    ]
    (root / "platform.yaml").write_text("---\n".join(documents))
    try:
        applied = run_trainform("apply", ".", "--auto-approve", cwd=root)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        slurm_cluster.run(
            ["sacctmgr", "-i", "modify", "qos", "where", f"name={queue}", "set", "GrpTRES=cpu=3"]
        )
        out = tmp_path / "drift.html"

        drift = run_trainform("drift", ".", "--format", "html", "--out", str(out), cwd=root)

        assert drift.returncode == 2, drift.stdout + drift.stderr
        page = browser.new_page()
        try:
            page.goto(out.as_uri())
            page.screenshot(path=str(tmp_path / "drift-slurm.png"), full_page=True)
            section = page.locator(f'section.resource[data-address="Queue/{queue}"]')
            finding = section.locator("article.finding")
            assert finding.locator("strong").first.inner_text() == "modified"
            row = finding.locator("table.changes tbody tr").inner_text().split("\t")
            assert row[0] == f"spec.pools[0].nominalQuota.cpu QOS {queue}"
            assert row[1:3] == ["4", "3"]
            evidence = finding.locator("dl.evidence").inner_text()
            assert f"changedBy\n{getpass.getuser()}" in evidence
            assert "action\n'Modify QOS'" in evidence
            assert f"object\n'QOS {queue}'" in evidence
        finally:
            page.close()
    finally:
        slurm_fixtures.cleanup(slurm_cluster, prefix)
