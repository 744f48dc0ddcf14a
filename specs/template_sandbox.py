"""The template language trainform allows: expressions over variables, nothing that can
run away.

On top of jinja2's immutable sandbox (no access to internals, no mutation), a template is
checked before it is compiled: only variables, constants, lookups, comparisons, boolean
logic, conditionals, loops over data, arithmetic and an allowlist of filters are accepted.
No method or function calls (so no `'a'.center(10**9)`), no macros, imports or blocks.
Arithmetic is checked as it runs: operands must be numbers (no string or list
repetition), exponents and results stay small, and every rendered string is bounded.

Rendering is bounded too (a `RenderBudget`): loop iterations, counted across nested loops
through a hidden filter wrapped around the iterable of every `for`; output, counted chunk
by chunk as `generate()` yields it (per value, per document, per load); and time, a
deadline checked at every loop step and every chunk. Filters and `~` that could build a
large string from small ones check the size before building it. A breach raises
`TemplateLimitExceeded`, which the loader reports as a `template-limit` diagnostic.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, nodes, pass_context, pass_environment, pass_eval_context
from jinja2.exceptions import SecurityError
from jinja2.filters import FILTERS, make_attrgetter
from jinja2.sandbox import ImmutableSandboxedEnvironment
from trainform.specs.templating import MAX_OUTPUT, RenderBudget, TemplateLimitExceeded

MAX_SOURCE = 64 * 1024
"""Characters of one template: a value longer than this is not compiled."""
MAX_NUMBER = 10**18
MAX_EXPONENT = 64
MAX_JSON_INDENT = 8

_LOOP_FILTER = "_trainform_bounded_loop"
_CONCAT_FILTER = "_trainform_bounded_concat"


_BUDGET: ContextVar[RenderBudget | None] = ContextVar("trainform_render_budget", default=None)


def _too_large() -> TemplateLimitExceeded:
    return TemplateLimitExceeded(
        "template result is too large", f"at most {MAX_OUTPUT:,} characters per value"
    )


def _budget() -> RenderBudget:
    budget = _BUDGET.get()
    if budget is None:  # rendering outside `render` (never in the loader): a fresh share
        budget = RenderBudget()
        _BUDGET.set(budget)
    return budget


@pass_context
def _bounded_loop(context: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    budget = _budget()
    for item in iterable:
        budget.step()
        yield item


@pass_context
def _bounded_concat(context: Any, parts: list[Any]) -> str:
    texts = [str(part) for part in parts]
    if sum(map(len, texts)) > MAX_OUTPUT:
        raise _too_large()
    return "".join(texts)


@pass_eval_context
def _bounded_replace(
    eval_context: Any, s: Any, old: Any, new: Any, count: int | None = None
) -> str:
    text, old, new = str(s), str(old), str(new)
    occurrences = text.count(old) if count is None or count < 0 else min(count, text.count(old))
    if len(text) + occurrences * (len(new) - len(old)) > MAX_OUTPUT:
        raise _too_large()
    return text.replace(old, new, -1 if count is None else count)


@pass_environment
def _bounded_join(
    environment: Any, value: Iterable[Any], d: str = "", attribute: str | int | None = None
) -> str:
    if attribute is not None:
        value = map(make_attrgetter(environment, attribute), value)
    texts = [str(item) for item in value]
    separator = str(d)
    if sum(map(len, texts)) + len(separator) * max(0, len(texts) - 1) > MAX_OUTPUT:
        raise _too_large()
    return separator.join(texts)


@pass_eval_context
def _bounded_tojson(eval_context: Any, value: Any, indent: int | None = None) -> Any:
    if indent is not None and not (isinstance(indent, int) and 0 <= indent <= MAX_JSON_INDENT):
        raise SecurityError(f"tojson indent must be between 0 and {MAX_JSON_INDENT}")
    result = FILTERS["tojson"](eval_context, value, indent)
    if len(result) > MAX_OUTPUT:
        raise _too_large()
    return result


ALLOWED_FILTERS = frozenset(
    {
        "abs",
        "capitalize",
        "d",
        "default",
        "first",
        "float",
        "int",
        "join",
        "last",
        "length",
        "list",
        "lower",
        "max",
        "min",
        "replace",
        "reverse",
        "round",
        "sort",
        "string",
        "title",
        "tojson",
        "trim",
        "truncate",
        "unique",
        "upper",
    }
)
ALLOWED_TESTS = frozenset(
    {
        "defined",
        "undefined",
        "none",
        "number",
        "string",
        "mapping",
        "sequence",
        "true",
        "false",
        "boolean",
        "integer",
        "float",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "in",
        "even",
        "odd",
        "divisibleby",
    }
)
ALLOWED_NODES = (
    nodes.Template,
    nodes.Output,
    nodes.TemplateData,
    nodes.Name,
    nodes.Const,
    nodes.Getattr,
    nodes.Getitem,
    nodes.Slice,
    nodes.Filter,
    nodes.Test,
    nodes.Concat,
    nodes.Compare,
    nodes.Operand,
    nodes.CondExpr,
    nodes.And,
    nodes.Or,
    nodes.Not,
    nodes.Add,
    nodes.Sub,
    nodes.Mul,
    nodes.Div,
    nodes.FloorDiv,
    nodes.Mod,
    nodes.Pow,
    nodes.Neg,
    nodes.Pos,
    nodes.List,
    nodes.Tuple,
    nodes.Dict,
    nodes.Pair,
    nodes.If,
    nodes.For,
    nodes.Keyword,
)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "/", "//", "%", "**", "+", "-"})
    intercepted_unops = frozenset({"-", "+"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "+" and not (_number(left) and _number(right)):
            result = super().call_binop(context, operator, left, right)
            if hasattr(result, "__len__") and len(result) > MAX_OUTPUT:
                raise _too_large()
            return result
        if not (_number(left) and _number(right)):
            raise SecurityError(f"`{operator}` works on numbers only in templates")
        if operator == "**" and (abs(right) > MAX_EXPONENT or abs(left) > 10**6):
            raise SecurityError("exponent too large in template")
        result = super().call_binop(context, operator, left, right)
        if _number(result) and abs(result) > MAX_NUMBER:
            raise SecurityError("number too large in template")
        return result


def _check(node: nodes.Node) -> None:
    if not isinstance(node, ALLOWED_NODES):
        raise SecurityError(f"`{type(node).__name__}` is not allowed in spec templates")
    if isinstance(node, nodes.Filter) and node.name not in ALLOWED_FILTERS:
        raise SecurityError(f"filter `{node.name}` is not allowed in spec templates")
    if isinstance(node, nodes.Test) and node.name not in ALLOWED_TESTS:
        raise SecurityError(f"test `{node.name}` is not allowed in spec templates")
    for child in node.iter_child_nodes():
        _check(child)


def _bound(node: nodes.Node) -> None:
    """Rewrite a checked tree in place: every `for` iterates through the loop counter and
    every `~` joins through the size check (neither is then folded at compile time)."""
    for child in node.iter_child_nodes():
        _bound(child)
    for name, value in node.iter_fields():
        if isinstance(value, nodes.Concat):
            setattr(node, name, _bounded_concat_node(value))
        elif isinstance(value, list):
            setattr(
                node,
                name,
                [_bounded_concat_node(v) if isinstance(v, nodes.Concat) else v for v in value],
            )
    if isinstance(node, nodes.For):
        node.iter = nodes.Filter(node.iter, _LOOP_FILTER, [], [], None, None, lineno=node.lineno)


def _bounded_concat_node(node: nodes.Concat) -> nodes.Filter:
    parts = nodes.List(list(node.nodes), lineno=node.lineno)
    return nodes.Filter(parts, _CONCAT_FILTER, [], [], None, None, lineno=node.lineno)


@lru_cache(maxsize=1)
def environment() -> BoundedSandbox:
    env = BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters.update(
        {
            "replace": _bounded_replace,
            "join": _bounded_join,
            "tojson": _bounded_tojson,
            _LOOP_FILTER: _bounded_loop,
            _CONCAT_FILTER: _bounded_concat,
        }
    )
    return env


@lru_cache(maxsize=4096)
def compile_template(text: str) -> Any:
    """A checked, bounded, compiled template; raises TemplateSyntaxError, SecurityError or
    TemplateLimitExceeded (source too long)."""
    if len(text) > MAX_SOURCE:
        raise TemplateLimitExceeded(
            "template is too long", f"at most {MAX_SOURCE:,} characters of template source"
        )
    env = environment()
    tree = env.parse(text)
    _check(tree)
    _bound(tree)
    tree.set_environment(env)
    return env.from_string(tree)


def render(text: str, variables: dict[str, Any], budget: RenderBudget | None = None) -> str:
    """`text` rendered with `variables`, output counted chunk by chunk against `budget`
    (a fresh one when None) and MAX_OUTPUT."""
    budget = budget if budget is not None else RenderBudget()
    budget.check_time()
    template = compile_template(text)
    token = _BUDGET.set(budget)
    try:
        chunks = []
        size = 0
        for chunk in template.generate(variables):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise _too_large()
            budget.emit(len(chunk))
            chunks.append(chunk)
        return "".join(chunks)
    finally:
        _BUDGET.reset(token)
