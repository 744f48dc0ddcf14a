"""Tenancy on by default: on examples/platform, a team folder cannot declare platform kinds
or another project's documents, and a pull request cannot change the rules that judge it.

Each case is a real CLI run on a Git repository made from a copy of examples/platform: the
base commit is the example as shipped, the head commit is the pull request. `review` reads
the head from Git; `validate` and `plan` read the working tree (the head). `plan` runs
offline on a copy whose state is local and without the two Slurm jobs (the slurm provider
refuses their S3 checkpoint prefixes at plan time, a known issue unrelated to tenancy).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, run_cli
from tests.policies.review.fixture import commit, git

PLATFORM = REPO / "examples" / "platform"
ADMINS = "needs approval of the platform admins: @ml-platform"
ALIGNMENT_OWNERS = (
    "needs approval of project alignment's owners: alignment-leads@example.com, jokafor@example.com"
)

GRAB = """\
# The pull request of the acceptance criteria: a team folder grabs capacity.
apiVersion: trainform/v1
kind: Queue
metadata: {name: vip}
spec:
  pools:
    - pool: h100
      nominalQuota: {gpu: 0}
  defaultPriority: 1000
---
apiVersion: trainform/v1
kind: Project
metadata: {name: shadow}
spec:
  owners: [me@example.com]
  specPaths: ["**"]
---
apiVersion: trainform/v1
kind: Quota
metadata: {name: vip, project: llm-pretrain}
spec:
  queue: vip
  limits: {gpu: 512}
"""

# A job for another project (running on alignment's quota), from llm-pretrain's folder.
CROSS_TENANT = """\
apiVersion: trainform/v1
kind: TrainingJob
metadata: {name: on-their-quota, project: alignment}
spec:
  queue: finetune
  image: trainer
  datasets: [instruct-mix@v2]
  code:
    repo: https://git.example.com/ml/megatron-recipes.git
    commit: aa69c3532f1e559ed80ec8389abcedacd5d6eba1
  command: [torchrun, sft.py]
  resources: {nodes: 1, acceleratorsPerNode: 8, cpu: 80, memory: 1200Gi}
  checkpoint:
    prefix: "s3://{{ checkpointBucket }}/alignment/on-their-quota/"
    interval: 1h
  maxRuntime: 2d
"""

# The head's attempt to turn tenancy off for itself.
OPEN_POLICIES = """\
apiVersion: trainform/v1
kind: PolicyConfig
settings:
  project-isolation: {adminPaths: ["**"]}
disabled: [project-isolation]
"""


def platform_objects(team: str, victim: str) -> str:
    """The pull request of the adversarial tester, from `team`'s folder: a priority-1000
    Queue, a Project claiming `victim`'s folder, a 512-GPU Quota and a job of `victim`."""
    job = CROSS_TENANT.replace("project: alignment", f"project: {victim}").replace(
        "/alignment/", f"/{victim}/"
    )
    return (
        f"""\
apiVersion: trainform/v1
kind: Queue
metadata: {{name: vip}}
spec:
  pools:
    - pool: h100
      nominalQuota: {{gpu: 0}}
  defaultPriority: 1000
---
apiVersion: trainform/v1
kind: Project
metadata: {{name: shadow}}
spec:
  owners: [me@example.com]
  specPaths: ["teams/{victim}/**"]
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: vip, project: {team}}}
spec:
  queue: vip
  limits: {{gpu: 512}}
---
"""
        + job
    )


def make_repository(root: Path) -> Path:
    """`root/repo`: examples/platform committed as the base."""
    repo = root / "repo"
    shutil.copytree(PLATFORM, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base: examples/platform as shipped")
    return repo


def offline(repo: Path) -> None:
    """Make `plan` runnable here: local state; no Slurm jobs (see the module docstring)."""
    config = repo / "trainform.yaml"
    document = yaml.safe_load(config.read_text(encoding="utf-8"))
    document["state"] = {"backend": "local", "path": ".state/state.json"}
    for name, environment in document["environments"].items():
        environment["state"] = {"backend": "local", "path": f".state/{name}.json"}
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    (repo / "teams" / "alignment" / "reward-model.yaml").unlink()
    (repo / "teams" / "eval-team" / "judge.yaml").unlink()


def trusted_checkout(repo: Path, destination: Path) -> Path:
    """A checkout of the base branch, as CI makes it (`.trusted/`)."""
    git(repo, "worktree", "add", "-q", "--detach", str(destination), "HEAD~1")
    return destination


def review(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("review", "repo", "--base", "HEAD~1", "--head", "HEAD", *args, cwd=cwd)


def assert_names(output: str, file: str, address: str, owner: str) -> None:
    """`output` has a line naming `file:line`, `address` and whose approval it needs."""
    pattern = re.compile(rf"{re.escape(file)}:\d+:\d+")
    lines = [line for line in output.splitlines() if address in line and pattern.search(line)]
    assert any(owner in line for line in lines), (address, output)


def test_review_denies_a_team_folder_adding_a_queue_a_project_and_a_quota(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path)
    commit(repo, {"teams/llm-pretrain/capacity.yaml": GRAB}, "more GPUs for us")
    result = review(tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith("trainform review: DENIED by policy")
    denied = [line for line in result.stdout.splitlines() if line.split()[:2] == ["new", "deny"]]
    assert len(denied) == 3, result.stdout
    file = "repo/teams/llm-pretrain/capacity.yaml"
    for address in ("Queue/vip", "Project/shadow", "Quota/llm-pretrain/vip"):
        assert_names(result.stdout, file, address, ADMINS)

    markdown = review(tmp_path, "--format", "markdown")
    assert markdown.returncode == 3
    assert markdown.stdout.startswith(
        "<!-- trainform-review -->\n### trainform review: DENIED by policy"
    )
    for address in ("Queue/vip", "Project/shadow", "Quota/llm-pretrain/vip"):
        assert_names(markdown.stdout, file, address, ADMINS)


def test_the_shipped_platform_passes_and_its_own_quota_files_are_admin_paths(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path)
    quotas = (repo / "teams" / "llm-pretrain" / "quotas.yaml").read_text(encoding="utf-8")
    commit(repo, {"teams/llm-pretrain/quotas.yaml": quotas.replace("gpu: 64", "gpu: 48")}, "cut")
    result = review(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "project-isolation" not in result.stdout
    assert run_cli("validate", str(repo)).returncode == 0


def test_plan_denies_what_review_denies(tmp_path: Path) -> None:
    repo = make_repository(tmp_path)
    offline(repo)
    (repo / "teams" / "llm-pretrain" / "capacity.yaml").write_text(GRAB, encoding="utf-8")
    result = run_cli("plan", str(repo), "--no-refresh", "--no-lock")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Apply is blocked by policy" in result.stdout
    for address in ("Queue/vip", "Project/shadow", "Quota/llm-pretrain/vip"):
        assert f"deny[project-isolation] {address}" in result.stdout
    assert result.stdout.count(ADMINS) == 3


def test_validate_plan_and_review_deny_a_job_of_another_project(tmp_path: Path) -> None:
    repo = make_repository(tmp_path)
    commit(repo, {"teams/llm-pretrain/theirs.yaml": CROSS_TENANT}, "use alignment's quota")
    file = "repo/teams/llm-pretrain/theirs.yaml"
    address = "TrainingJob/alignment/on-their-quota"

    validated = run_cli("validate", "repo", cwd=tmp_path)
    assert validated.returncode == 1, validated.stdout + validated.stderr
    assert "error[project-isolation]" in validated.stdout
    assert f"--> {file}:3:" in validated.stdout
    assert f"address:  {address}" in validated.stdout
    assert ALIGNMENT_OWNERS in validated.stdout
    assert "in the folder of project llm-pretrain" in validated.stdout

    as_json = run_cli("validate", "repo", "--format", "json", cwd=tmp_path)
    assert as_json.returncode == 1 and '"valid": false' in as_json.stdout

    reviewed = review(tmp_path)
    assert reviewed.returncode == 3
    assert_names(reviewed.stdout, file, address, ALIGNMENT_OWNERS)

    offline(repo)
    planned = run_cli("plan", str(repo), "--no-refresh", "--no-lock")
    assert planned.returncode == 3, planned.stdout + planned.stderr
    assert f"deny[project-isolation] {address}" in planned.stdout


@pytest.mark.parametrize("how", ["base", "policies"])
def test_a_pull_request_turning_isolation_off_for_itself_is_still_denied(
    tmp_path: Path, how: str
) -> None:
    repo = make_repository(tmp_path)
    config = (repo / "trainform.yaml").read_text(encoding="utf-8")
    opened = config.replace(
        "policies:\n  path: .policies\n",
        "policies:\n  path: .policies\n  disabled: [project-isolation]\n",
    )
    assert opened != config
    commit(
        repo,
        {
            "trainform.yaml": opened,
            ".policies/policies.yaml": OPEN_POLICIES,
            "CODEOWNERS": "* @llm-pretrain-leads\n",
            "teams/llm-pretrain/capacity.yaml": GRAB,
        },
        "tenancy is optional now",
    )
    # Read as the pull request wants, the head allows itself (a laptop trusts its folder).
    assert run_cli("validate", "repo", cwd=tmp_path).returncode == 0

    extra: list[str] = []
    if how == "policies":
        trusted = trusted_checkout(repo, tmp_path / ".trusted")
        extra = ["--policies", str(trusted / ".policies")]
    result = review(tmp_path, *extra)
    assert result.returncode == 3, result.stdout + result.stderr
    file = "repo/teams/llm-pretrain/capacity.yaml"
    for address in ("Queue/vip", "Project/shadow", "Quota/llm-pretrain/vip"):
        assert_names(result.stdout, file, address, ADMINS)  # the base's CODEOWNERS
    if how == "policies":
        validated = run_cli("validate", "repo", *extra, cwd=tmp_path)
        assert validated.returncode == 1
        assert validated.stdout.count("error[project-isolation]") == 3
        offline(repo)
        planned = run_cli("plan", str(repo), "--no-refresh", "--no-lock", *extra)
        assert planned.returncode == 3, planned.stdout + planned.stderr
        assert planned.stdout.count(ADMINS) == 3


def test_unconfigured_tenancy_is_a_finding_that_says_where_to_configure_it(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path)
    (repo / ".policies" / "policies.yaml").write_text(
        "apiVersion: trainform/v1\nkind: PolicyConfig\n", encoding="utf-8"
    )
    result = run_cli("validate", str(repo))
    assert result.returncode == 1
    assert "error[project-isolation]: projects declare specPaths" in result.stdout
    assert "settings: {project-isolation: {adminPaths:" in result.stdout
    assert "trainform.yaml `policies.settings`" in result.stdout


# Every nesting of a quotas.yaml under a team folder; only the first is an admin path.
NESTINGS = ["", "x/", "x/y/", "x/y/z/", "teams/alignment/", "quotas/"]
# The teams tried (the job they declare is alignment's) and their leads in CODEOWNERS.
LEADS = {"llm-pretrain": "@llm-pretrain-leads", "eval-team": "@eval-leads"}


def project_owners(repo: Path, name: str) -> list[str]:
    """The owners of Project `name` in the repository's platform/projects.yaml."""
    text = (repo / "platform" / "projects.yaml").read_text(encoding="utf-8")
    [project] = [d for d in yaml.safe_load_all(text) if d["metadata"]["name"] == name]
    return list(project["spec"]["owners"])


def blocks(output: str) -> list[str]:
    """The diagnostics of `validate`'s text output, one text each."""
    return [block for block in output.split("\n\n") if block.strip()]


@pytest.mark.parametrize("nesting", NESTINGS, ids=lambda n: f"teams-TEAM-{n or '.'}quotas")
@pytest.mark.parametrize("team", sorted(LEADS))
def test_only_the_quotas_file_directly_in_a_team_folder_may_declare_platform_kinds(
    tmp_path: Path, team: str, nesting: str
) -> None:
    victim = "alignment"
    repo = make_repository(tmp_path)
    relative = f"teams/{team}/{nesting}quotas.yaml"
    grab = platform_objects(team, victim)
    if not nesting:  # the team's own quotas.yaml: the platform's, by CODEOWNERS too
        grab = (repo / relative).read_text(encoding="utf-8") + "---\n" + grab
    commit(repo, {relative: grab}, "capacity for us, from our folder")
    file = f"repo/{relative}"
    job = f"TrainingJob/{victim}/on-their-quota"
    addresses = ("Queue/vip", "Project/shadow", f"Quota/{team}/vip", job)
    validated = run_cli("validate", "repo", cwd=tmp_path)
    reviewed = review(tmp_path)
    owners = f"  {relative}: CODEOWNERS: "
    assert "codeowners-mismatch" not in validated.stdout + reviewed.stdout
    if not nesting:
        assert validated.returncode == 0, validated.stdout + validated.stderr
        assert reviewed.returncode == 0, reviewed.stdout + reviewed.stderr
        assert reviewed.stdout.startswith("trainform review: allowed by policy")
        assert f"{owners}@ml-platform; platform admins: @ml-platform" in reviewed.stdout
        return

    assert validated.returncode == 1, validated.stdout + validated.stderr
    denied = [b for b in blocks(validated.stdout) if b.startswith("error[project-isolation]")]
    assert len(denied) == 4, validated.stdout
    for address in addresses:
        [block] = [b for b in denied if f"address:  {address}\n" in b + "\n"]
        assert re.search(rf"--> {re.escape(file)}:\d+:\d+", block), block
    assert reviewed.returncode == 3, reviewed.stdout + reviewed.stderr
    assert reviewed.stdout.startswith("trainform review: DENIED by policy")
    for address in addresses[:3]:
        assert_names(reviewed.stdout, file, address, ADMINS)
    assert_names(reviewed.stdout, file, job, f"needs approval of project {victim}'s owners")
    # The code host agrees: the team's leads approve the file, the platform admins do not.
    [approvals] = [line for line in reviewed.stdout.splitlines() if line.startswith(owners)]
    listed = ", ".join(project_owners(repo, team))
    assert approvals == f"{owners}{LEADS[team]}; project {team} owners: {listed}"


def test_validate_warns_where_codeowners_gives_an_admin_path_to_a_team(tmp_path: Path) -> None:
    """The team's own quotas.yaml is allowed only while CODEOWNERS gives it to the platform:
    with the team's line last, its leads alone would approve it, and validate says so."""
    repo = make_repository(tmp_path)
    codeowners = (repo / "CODEOWNERS").read_text(encoding="utf-8")
    found = re.search(r"^/teams/alignment/ +@alignment-leads\n", codeowners, re.MULTILINE)
    assert found is not None
    reordered = codeowners.replace(found.group(0), "") + found.group(0)
    (repo / "CODEOWNERS").write_text(reordered, encoding="utf-8")
    line = len(reordered.splitlines())
    validated = run_cli("validate", "repo", cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    [warning] = [b for b in blocks(validated.stdout) if "codeowners-mismatch" in b]
    assert warning.startswith("warning[codeowners-mismatch]: CODEOWNERS line")
    assert f"--> repo/CODEOWNERS:{line}:1" in warning
    assert "lets @alignment-leads approve teams/alignment/quotas.yaml alone" in warning
    assert "adminPaths `/teams/*/quotas.yaml`" in warning
