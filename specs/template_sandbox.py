"""The template language trainform allows: expressions over variables, nothing that can
run away.

On top of jinja2's immutable sandbox (no access to internals, no mutation), a template is
checked before it is compiled: only variables, constants, lookups, comparisons, boolean
logic, conditionals, loops over data, arithmetic and an allowlist of filters are accepted.
No method or function calls (so no `'a'.center(10**9)`), no macros, imports or blocks.
Arithmetic is checked as it runs: operands must be numbers (no string or list
repetition), exponents and results stay small, and every rendered string is bounded.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_OUTPUT = 64 * 1024
MAX_NUMBER = 10**18
MAX_EXPONENT = 64

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
                raise SecurityError("template result is too large")
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


@lru_cache(maxsize=1)
def environment() -> BoundedSandbox:
    return BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


@lru_cache(maxsize=4096)
def compile_template(text: str) -> Any:
    """A checked, compiled template; raises TemplateSyntaxError or SecurityError."""
    env = environment()
    _check(env.parse(text))
    return env.from_string(text)


def render(text: str, variables: dict[str, Any]) -> str:
    result: str = compile_template(text).render(variables)
    if len(result) > MAX_OUTPUT:
        raise SecurityError("template result is too large")
    return result
