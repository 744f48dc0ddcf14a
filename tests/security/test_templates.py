"""Template rendering is bounded: loops, output and time each stop at a `template-limit`.

Every case is a real `trainform validate` on a spec folder whose job parameter holds the
attack; the run must fail with a `template-limit` diagnostic naming the file and line of
the value. Timing lives in bench/bench_bounded.py, never here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainform.specs import SpecError, load_specs, templating
from trainform.specs.template_rendering import render_document
from trainform.specs.templating import RenderBudget

from tests.helpers import run_cli, training_job
from tests.security.support import canary_payloads, write_platform

ITEMS = "[" + ",".join(str(i) for i in range(100)) + "]"
FOUR_LOOPS = (
    "".join(f"{{% for {name} in {ITEMS} %}}" for name in "abcd")
    + "{{ a }}{{ b }}{{ c }}{{ d }}"
    + "{% endfor %}" * 4
)
SILENT_LOOPS = "".join(f"{{% for {name} in {ITEMS} %}}" for name in "abcd") + "{% endfor %}" * 4
REPLACE_CHAIN = '{{ "xx"' + '|replace("x", "xxxxxxxx")' * 9 + " }}"
BIG = '"x"' + '|replace("x", "xxxxxxxx")' * 5  # 32,768 characters
CONCAT_CHAIN = "{{ " + " ~ ".join([f"({BIG})"] * 4) + " }}"
JOIN_LIST = "{{ [" + ", ".join([f"({BIG})"] * 4) + ']|join("") }}'
JSON_INDENT = "{{ {'a': [1, 2, 3]}|tojson(indent=1000000) }}"


def job_with(tmp_path: Path, value: str, extra: str = "") -> Path:
    """A spec folder whose job has parameter `p` (line 9 of jobs.yaml) set to `value`."""
    quoted = "'" + value.replace("'", "''") + "'"
    return write_platform(
        tmp_path / "specs", {"jobs.yaml": training_job(parameters=f"{{p: {quoted}}}", extra=extra)}
    )


@pytest.mark.parametrize(
    ("value", "summary"),
    [
        pytest.param(FOUR_LOOPS, "", id="four-nested-loops"),
        pytest.param(SILENT_LOOPS, "loop too many times", id="loops-without-output"),
        pytest.param(REPLACE_CHAIN, "too large", id="replace-chain"),
        pytest.param(CONCAT_CHAIN, "too large", id="concatenation"),
        pytest.param(JOIN_LIST, "too large", id="join"),
    ],
)
def test_runaway_template_is_a_template_limit_at_its_value(
    tmp_path: Path, value: str, summary: str
) -> None:
    result = run_cli("validate", str(job_with(tmp_path, value)))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error[template-limit]" in result.stdout
    assert summary in result.stdout
    assert "jobs.yaml:9:" in result.stdout  # the parameter's line
    assert "spec.parameters.p" in result.stdout
    assert len(result.stdout) < 5_000  # one diagnostic, not the rendered text


def test_tojson_indent_is_refused_by_the_sandbox(tmp_path: Path) -> None:
    result = run_cli("validate", str(job_with(tmp_path, JSON_INDENT)))
    assert result.returncode == 1
    assert "error[template-error]" in result.stdout
    assert "tojson indent" in result.stdout


def test_output_of_one_document_is_capped_across_its_values(tmp_path: Path) -> None:
    values = ", ".join(f"p{i}: '{{{{ {BIG} }}}}'" for i in range(40))  # 40 x 32 KB
    root = write_platform(
        tmp_path / "specs", {"jobs.yaml": training_job(parameters=f"{{{values}}}")}
    )
    result = run_cli("validate", str(root))
    assert result.returncode == 1
    assert "error[template-limit]: templates of this document render too much text" in (
        result.stdout
    )
    assert result.stdout.count("[template-limit]") == 1  # the rest of the document is skipped


def test_small_loops_still_render(tmp_path: Path) -> None:
    value = "{% for x in [1, 2, 3] %}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}"
    root = job_with(tmp_path, value)
    result = run_cli("validate", str(root))
    assert result.returncode == 0, result.stdout + result.stderr
    loaded = load_specs(root)
    assert loaded.resources["TrainingJob/research/bigram"].document.spec.parameters["p"] == "1,2,3"


def test_template_payloads_execute_nothing(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    values = [
        "{{ cycler.__init__.__globals__.os.system('touch " + str(canary) + "') }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{% for p in " + repr(canary_payloads(canary)) + " %}{{ p }}{% endfor %}",
    ]
    for number, value in enumerate(values):
        result = run_cli("validate", str(job_with(tmp_path / str(number), value)))
        assert result.returncode == 1 or "Success" in result.stdout
    assert not canary.exists()


def test_rendering_past_the_deadline_is_a_template_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templating, "MAX_DOCUMENT_SECONDS", -1.0)
    document = {"spec": {"parameters": {"p": "{% for x in [1, 2] %}{{ x }}{% endfor %}"}}}
    _, problems = render_document(document, {}, RenderBudget())
    assert [(p.path, p.message) for p in problems] == [
        (("spec", "parameters", "p"), "templates of this document take too long to render")
    ]


def test_the_load_budget_spans_documents() -> None:
    budget = RenderBudget()
    budget.load_iterations = 5
    loop = "{% for x in [1, 2, 3] %}{{ x }}{% endfor %}"
    _, first = render_document({"p": loop}, {}, budget)
    _, second = render_document({"p": loop}, {}, budget)
    assert first == []
    assert [p.message for p in second] == ["templates of the spec folder loop too many times"]


# Random nestings of loops, filters and concatenations: rendering always ends with a value
# or problems (never an exception), and loading raises only the loader's own error type.
FRAGMENTS = st.sampled_from(
    [
        "{{ a }}",
        "x",
        "{{ a ~ a }}",
        '{{ a|replace("x", "xxxx") }}',
        "{{ [a, a]|join(a) }}",
        "{{ a|list|length }}",
        "{% if a %}y{% endif %}",
        "{{ a|tojson }}",
        "{{ 2 ** 60 }}",
        "{{",
        "{% for %}",
    ]
)


@st.composite
def nested_templates(draw: st.DrawFn) -> str:
    depth = draw(st.integers(min_value=0, max_value=6))
    body = "".join(draw(st.lists(FRAGMENTS, min_size=1, max_size=4)))
    for level in range(depth):
        source = draw(st.sampled_from([ITEMS, "[a, a, a]", "a", "range"]))
        body = f"{{% for a{level} in {source} %}}{body}{{% endfor %}}"
    return "{% for a in ['x' ~ 'x'] %}" + body + "{% endfor %}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=nested_templates())
def test_nested_templates_end_in_a_value_or_problems(template: str) -> None:
    rendered, problems = render_document({"spec": {"p": template}}, {}, RenderBudget())
    assert problems or isinstance(rendered["spec"]["p"], str)
    for problem in problems:
        assert problem.message


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=nested_templates())
def test_loading_nested_templates_raises_only_spec_errors(tmp_path_factory, template: str) -> None:
    root = job_with(tmp_path_factory.mktemp("templates"), template)
    try:
        load_specs(root)
    except SpecError:
        pass
