"""`trainform drill JOB`: run one job under baseline, congested and failure conditions and
write the evidence report (report.json, report.md, report.html) into --out.

The command parses flags, calls planner.drill.run_drill, renders the report three ways
(cli/render/drill_report.py) and writes each file whole or not at all (specs.file_writes).
Exit codes: 0 when every condition's run succeeded within its time limit and the clean-up
left nothing (the verdicts are in the report), 1 on an error or a refused drill
(production, a job whose plan is not empty), 2 when a condition stopped early (its time
limit, a failed apply) or its run did not succeed, or the clean-up left something behind.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from trainform.cli.options import TemplateInputs, template_options
from trainform.cli.output import open_or_exit
from trainform.cli.render.drill_report import render_drill_html, render_drill_markdown
from trainform.planner.drill import CONDITIONS, DrillOptions, run_drill
from trainform.planner.errors import PlannerError
from trainform.providers.errors import ProviderError
from trainform.specs import Duration
from trainform.specs.file_writes import write_file
from trainform.specs.secrets import redact


def _duration(text: str, option: str) -> float:
    try:
        return float(Duration(text).seconds)
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r} is not a duration (like 90s, 10m): {exc}", param_hint=option
        ) from None


@click.command()
@click.argument("job")
@click.option(
    "--dir", "spec_dir", default=".", type=click.Path(file_okay=False), help="Spec folder."
)
@template_options
@click.option(
    "--conditions",
    default=",".join(CONDITIONS),
    show_default=True,
    help="Comma-separated conditions to run, in this order.",
)
@click.option(
    "--out",
    "out",
    default="drill-report",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for report.json, report.md and report.html (created if missing).",
)
@click.option("--allow-production", is_flag=True, help="Drill a production environment too.")
@click.option(
    "--time-limit", default="10m", show_default=True, help="Time limit of each condition."
)
@click.option(
    "--tolerance",
    default=1e-3,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Relative difference allowed between a condition's metric and the baseline's.",
)
@click.option(
    "--fault-after-checkpoint",
    "after_checkpoint",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Inject the failure condition's fault after checkpoint K.",
)
@click.option(
    "--hold",
    default="2s",
    show_default=True,
    help="How long the congested condition keeps the job waiting behind its fillers.",
)
def drill(
    job: str,
    spec_dir: str,
    inputs: TemplateInputs,
    conditions: str,
    out: str,
    allow_production: bool,
    time_limit: str,
    tolerance: float,
    after_checkpoint: int,
    hold: str,
) -> None:
    """Run JOB under baseline, congested and failure conditions; write the evidence report.

    Each condition is a new run of the same job through plan and apply; the congestion and
    the fault use only trainform's own temporary objects, removed afterwards, and the job's
    state is restored as it was (docs/drills.md)."""
    options = DrillOptions(
        conditions=tuple(c.strip() for c in conditions.split(",") if c.strip()),
        time_limit=_duration(time_limit, "--time-limit"),
        allow_production=allow_production,
        tolerance=tolerance,
        after_checkpoint=after_checkpoint,
        hold=_duration(hold, "--hold"),
    )
    workspace = open_or_exit(spec_dir, inputs, "text")
    try:
        report = run_drill(workspace, job, options, say=lambda line: click.echo(line, err=True))
    except (PlannerError, ProviderError) as exc:
        click.echo(f"error: cannot drill {job}: {redact(str(exc))}", err=True)
        sys.exit(1)
    finally:
        workspace.providers.close()
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    write_file(folder / "report.json", redact(json.dumps(report, indent=2, sort_keys=True)) + "\n")
    write_file(folder / "report.md", render_drill_markdown(report))
    write_file(folder / "report.html", render_drill_html(report))
    stopped = [
        c["name"] for c in report["conditions"] if c.get("error") or c["outcome"] != "succeeded"
    ]
    unsure = [
        c["name"]
        for c in report["conditions"]
        if any(v["verdict"] == "needs more testing" for v in c["verdicts"])
    ]
    click.echo(
        f"Drilled {report['job']}: {len(report['conditions'])} conditions"
        + (f", stopped early or failed: {', '.join(stopped)}" if stopped else "")
        + (f", items that need more testing in {', '.join(unsure)}" if unsure else "")
        + f"; cost {report['usage']['acceleratorHours']:.4f} accelerator-hours, "
        f"{report['usage']['cpuHours']:.4f} CPU-hours. Wrote {folder}/report.html, report.md, "
        "report.json."
    )
    if stopped or report["cleanup"]["left"] or report["cleanup"]["planAfterDrill"] != "no changes":
        sys.exit(2)
