"""`plan --format markdown --max-chars N` on the command line: a PR comment within budget."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.helpers import REPO, run_cli


def test_a_large_plan_is_cut_by_whole_resources_to_the_budget(tmp_path: Path) -> None:
    folder = tmp_path / "platform"
    shutil.copytree(REPO / "examples" / "platform", folder)
    config = yaml.safe_load((folder / "trainform.yaml").read_text())
    config["environments"]["prod"]["state"] = {"backend": "local", "path": "prod.json"}
    (folder / "trainform.yaml").write_text(yaml.safe_dump(config))

    args = ("plan", str(folder), "--no-refresh", "--env", "prod", "--format", "markdown")
    whole = run_cli(*args)
    assert whole.returncode == 0, whole.stderr
    assert "not shown" not in whole.stdout
    cut = run_cli(*args, "--max-chars", "6000")
    assert cut.returncode == 0, cut.stderr
    assert len(cut.stdout) <= 6000 < len(whole.stdout)
    assert cut.stdout.startswith(f"### trainform plan: environment `prod`, folder `{folder}`\n")
    assert "**Plan: 44 to create," in cut.stdout.splitlines()[2]
    assert "resource changes not shown**" in cut.stdout
    assert cut.stdout.count("```diff") == 1 and cut.stdout.count("\n```\n") == 1
    assert cut.stdout.count("<details>") == cut.stdout.count("</details>")


def test_a_budget_too_small_for_the_header_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("plan", str(tmp_path), "--format", "markdown", "--max-chars", "100")
    assert result.returncode == 1  # usage errors exit 1 (cli.entry)
    assert "Invalid value for '--max-chars': 100 is not in the range x>=2000" in result.stderr
