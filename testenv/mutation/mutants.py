"""The mutants of one module's source: one small change each, as new source text.

Pure: source text in, mutants out. Each operator is a decision a newcomer could get wrong
in one keystroke (a comparison's boundary, ``and`` for ``or``, a dropped ``not``, a
constant one off, a statement left out, ``max`` for ``min``, ``+=`` for ``-=``), so a
mutant that survives the tests is a decision no test pins down.

Not mutated, because a change there is not a decision of the code or cannot be run:
docstrings, type annotations, decorators, ``if TYPE_CHECKING:`` blocks, string pieces of
f-strings, and any line marked ``# pragma: no mutate``. Statements are dropped only inside
functions (dropping a module-level definition only breaks the import).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

PRAGMA = "pragma: no mutate"

_COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITH_SWAP: dict[type[ast.operator], type[ast.operator]] = {ast.Add: ast.Sub, ast.Sub: ast.Add}
_MAX_MIN = {"max": "min", "min": "max"}
#: longest snippet shown (and keyed) for a statement or a constant's context
_SNIPPET = 72


@dataclass(frozen=True)
class Mutant:
    #: the module's path as given (relative to the tree's root)
    path: str
    line: int
    #: the enclosing function or class (``WorkQueue.add``), or ``<module>``
    scope: str
    operator: str
    before: str
    after: str
    #: the whole module's source with this one change
    source: str

    @property
    def change(self) -> str:
        return f"{self.before} → {self.after}"

    @property
    def key(self) -> str:
        """What the allow-list of equivalent mutants names: no line number, so an entry
        outlives edits elsewhere in the module (identical changes in one scope share it)."""
        return f"{self.path} :: {self.scope} :: {self.change}"


@dataclass
class _Node:
    node: ast.AST
    parent: ast.AST | None
    scope: str
    in_function: bool


def _walk(tree: ast.Module, lines: list[str]) -> list[_Node]:
    """The nodes that may be mutated, each with its parent and scope."""
    out: list[_Node] = []

    def visit(node: ast.AST, parent: ast.AST | None, scope: str, in_function: bool) -> None:
        line = getattr(node, "lineno", None)
        if line is not None and PRAGMA in lines[line - 1]:
            return
        if _is_docstring(node, parent) or _is_type_checking(node):
            return
        out.append(_Node(node, parent, scope, in_function))
        inner_scope, inner_function = scope, in_function
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = node.name if scope == "<module>" else f"{scope}.{node.name}"
            inner_scope = name
            inner_function = not isinstance(node, ast.ClassDef)
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "decorator_list", "type_comment"):
                continue
            if isinstance(node, ast.JoinedStr):
                # only the formatted values of an f-string; its literal pieces are text
                value = [v for v in node.values if isinstance(v, ast.FormattedValue)]
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, ast.AST):
                    visit(child, node, inner_scope, inner_function)

    visit(tree, None, "<module>", False)
    return out


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    if not (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return False
    body = getattr(parent, "body", None)
    return isinstance(body, list) and bool(body) and body[0] is node


def _is_type_checking(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
    return name == "TYPE_CHECKING"


def _sites(n: _Node) -> Iterator[tuple[str, object]]:
    """(operator, argument) of each mutation of one node."""
    node = n.node
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE_SWAP:
                yield "compare", i
    elif isinstance(node, ast.BoolOp):
        yield "and/or", None
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not", None
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            yield "bool", None
        elif isinstance(node.value, int):
            yield "int", 1
            yield "int", -1
        elif node.value == "":
            yield "str", None
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in _MAX_MIN:
            yield "max/min", None
    elif isinstance(node, ast.AugAssign | ast.BinOp) and type(node.op) in _ARITH_SWAP:
        yield "+/-", None
    if (
        isinstance(node, ast.stmt)
        and n.in_function
        and not isinstance(
            node,
            ast.Pass
            | ast.FunctionDef
            | ast.AsyncFunctionDef
            | ast.ClassDef
            | ast.Import
            | ast.ImportFrom
            | ast.Global
            | ast.Nonlocal,
        )
    ):
        yield "drop", None


def _apply(n: _Node, operator: str, arg: object) -> tuple[ast.AST, Callable[[], None]]:
    """Change the node in place, or name the node that replaces it in its parent; with the
    function that undoes the in-place change."""
    node = n.node
    if isinstance(node, ast.Compare) and operator == "compare":
        assert isinstance(arg, int)
        old_op = node.ops[arg]
        node.ops[arg] = _COMPARE_SWAP[type(old_op)]()
        return node, lambda: node.ops.__setitem__(arg, old_op)
    if isinstance(node, ast.BoolOp) and operator == "and/or":
        old_bool = node.op
        node.op = ast.Or() if isinstance(old_bool, ast.And) else ast.And()
        return node, lambda: setattr(node, "op", old_bool)
    if isinstance(node, ast.UnaryOp) and operator == "not":
        return node.operand, _nothing
    if isinstance(node, ast.Constant) and operator in ("bool", "int", "str"):
        old_value = node.value
        if operator == "bool":
            node.value = not old_value
        elif operator == "int":
            assert isinstance(arg, int) and isinstance(old_value, int)
            node.value = old_value + arg
        else:
            node.value = "x"
        return node, lambda: setattr(node, "value", old_value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and operator == "max/min":
        func, old_id = node.func, node.func.id
        func.id = _MAX_MIN[old_id]
        return node, lambda: setattr(func, "id", old_id)
    if isinstance(node, ast.AugAssign | ast.BinOp) and operator == "+/-":
        old_arith = node.op
        node.op = _ARITH_SWAP[type(old_arith)]()
        return node, lambda: setattr(node, "op", old_arith)
    assert operator == "drop", operator
    return ast.Pass(), _nothing


def _nothing() -> None:
    pass


def _replace(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
    raise AssertionError(f"{old!r} is not a child of {parent!r}")


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    first, _, rest = text.partition("\n")
    if rest:
        first += " ..."
    return first if len(first) <= _SNIPPET else first[: _SNIPPET - 1] + "…"


def _shown(n: _Node) -> ast.AST:
    """The node whose text shows a change: a constant with its expression around it (``1``
    says nothing; ``max(tracked, 1)`` does), when that is short enough to read."""
    if (
        isinstance(n.node, ast.Constant)
        and isinstance(n.parent, ast.expr)
        and len(ast.unparse(n.parent)) <= _SNIPPET
    ):
        return n.parent
    return n.node


def mutants(source: str, path: str) -> list[Mutant]:
    """Every mutant of ``source``, in source order; a mutant whose code is the original's or
    another's is left out. Raises SyntaxError (naming ``path``) for a module that does not
    parse."""
    lines = source.splitlines()
    tree = ast.parse(source, filename=path)
    original = ast.unparse(tree)
    nodes = _walk(tree, lines)
    seen = {original}
    out: list[Mutant] = []
    for n in nodes:
        for operator, arg in list(_sites(n)):
            shown = _shown(n)
            before = _snippet(shown)
            new, undo = _apply(n, operator, arg)
            if new is not n.node:
                assert n.parent is not None
                _replace(n.parent, n.node, new)
            after = _snippet(new if shown is n.node else shown)
            text = ast.unparse(tree)
            if new is not n.node:
                assert n.parent is not None
                _replace(n.parent, new, n.node)
            undo()
            if text in seen:
                continue
            seen.add(text)
            line = getattr(n.node, "lineno", 0)
            out.append(Mutant(path, line, n.scope, operator, before, after, text + "\n"))
    out.sort(key=lambda m: m.line)
    return out
