"""Bug injection for SWE tasks: mutation operators over Python's ``ast``.

:func:`mutations` lists every single-site mutant of a module's source; :func:`apply_mutation`
turns one into the buggy source. A mutation is a *textual* replacement of one expression or
statement span, so the buggy file differs from the reference only where the bug is (comments and
formatting elsewhere stay as they were); each replacement is checked to parse back to exactly the
mutated tree (parenthesised when precedence requires it, dropped when even that does not work).

Operators (``Mutation.operator``):

* ``compare``: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in`` <-> ``not in``, ``is`` <-> ``is not``
* ``boolop``: ``and`` <-> ``or``
* ``arith``: ``+`` <-> ``-``, ``*`` -> ``+``, ``//`` -> ``/``, ``/`` -> ``//``, ``%`` -> ``//``, ``**`` -> ``*``
  (also in augmented assignments such as ``+=``)
* ``off_by_one``: an integer literal ``n`` -> ``n + 1`` and ``n - 1``
* ``range_bound``: ``range(..., stop)`` -> ``range(..., stop + 1)`` / ``stop - 1`` (non-literal stop)
* ``negation``: ``not x`` -> ``x``
* ``return_flip``: ``True`` <-> ``False`` (in a ``return`` or elsewhere)
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, cast

__all__ = ["Mutation", "mutations", "apply_mutation", "OPERATORS"]

OPERATORS = ("compare", "boolop", "arith", "off_by_one", "range_bound", "negation", "return_flip")

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
_ARITH_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Div,
    ast.Div: ast.FloorDiv,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}


@dataclass(frozen=True)
class Mutation:
    """One single-site change to a source file.

    Attributes:
        operator: which operator made it (one of :data:`OPERATORS`).
        line: 1-based line of the changed span.
        start: character offset where the replaced span starts.
        end: character offset where it ends (exclusive).
        old: the replaced text (checked on apply).
        new: the replacement text.
    """

    operator: str
    line: int
    start: int
    end: int
    old: str
    new: str

    @property
    def description(self) -> str:
        return f"{self.operator} at line {self.line}: {self.old!r} -> {self.new!r}"


def _line_offsets(source: str) -> list[int]:
    offsets = [0]
    for line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def _char_offset(source_lines: list[str], offsets: list[int], lineno: int, col_bytes: int) -> int:
    """Character offset of a (line, UTF-8 byte column) position."""
    line = source_lines[lineno - 1]
    return offsets[lineno - 1] + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))


def _replace_child(root: ast.AST, target: ast.AST, new: ast.AST) -> None:
    """Replace ``target`` (a node inside ``root``) by ``new`` in its parent."""
    for parent in ast.walk(root):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is target:
                        value[i] = new
                        return
    raise ValueError("node not found in tree")


# Each rule maps a node (a deep copy, free to modify) to zero or more (operator, new node) pairs.
Rule = Callable[[ast.AST], Iterator[tuple[str, ast.AST]]]


def _compare_rule(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            swap = _COMPARE_SWAP.get(type(op))
            if swap is not None:
                new = copy.deepcopy(node)
                new.ops[i] = swap()
                yield "compare", new


def _boolop_rule(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolop", new


def _arith_rule(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, (ast.BinOp, ast.AugAssign)):
        swap = _ARITH_SWAP.get(type(node.op))
        if swap is not None:
            new = copy.deepcopy(node)
            new.op = swap()
            yield "arith", new


def _constant_rule(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield "return_flip", ast.Constant(value=not node.value)
    elif isinstance(node, ast.Constant) and isinstance(node.value, int):
        for delta in (1, -1):
            if node.value + delta >= 0:
                yield "off_by_one", ast.Constant(value=node.value + delta)


def _range_rule(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
        idx = 0 if len(node.args) == 1 else 1
        if isinstance(node.args[idx], ast.Constant):
            return  # literal bounds are covered by off_by_one
        for op in (ast.Add(), ast.Sub()):
            new = copy.deepcopy(node)
            new.args[idx] = ast.BinOp(left=new.args[idx], op=op, right=ast.Constant(value=1))
            yield "range_bound", new


def _negation_rule(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "negation", copy.deepcopy(node.operand)


RULES: tuple[Rule, ...] = (_compare_rule, _boolop_rule, _arith_rule, _constant_rule, _range_rule, _negation_rule)


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Nodes never mutated: docstrings."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
    return skip


def mutations(source: str) -> list[Mutation]:
    """Every valid single-site mutant of ``source``, in source order, without duplicates."""
    tree = ast.parse(source)
    skip = _skipped_nodes(tree)
    lines = source.splitlines(keepends=True)
    offsets = _line_offsets(source)
    found: list[Mutation] = []
    seen: set[str] = set()
    for index, node in enumerate(ast.walk(tree)):
        if getattr(node, "end_lineno", None) is None or id(node) in skip:  # no position, or a synthetic node
            continue
        for rule in RULES:
            for operator, new_node in rule(copy.deepcopy(node)):
                mutation = _as_text_mutation(source, tree, index, node, new_node, operator, lines, offsets)
                if mutation is None:
                    continue
                buggy = apply_mutation(source, mutation)
                if buggy not in seen and buggy != source:
                    seen.add(buggy)
                    found.append(mutation)
    found.sort(key=lambda m: (m.start, m.end, m.operator, m.new))
    return found


class _Located(Protocol):
    """A node with a source position (an expression or a statement)."""

    lineno: int
    col_offset: int
    end_lineno: int
    end_col_offset: int


def _as_text_mutation(
    source: str,
    tree: ast.AST,
    index: int,
    node: ast.AST,
    new_node: ast.AST,
    operator: str,
    lines: list[str],
    offsets: list[int],
) -> Mutation | None:
    """Express replacing node number ``index`` by ``new_node`` as a text span replacement."""
    at = cast(_Located, node)  # find_mutations passes only nodes with a position
    start = _char_offset(lines, offsets, at.lineno, at.col_offset)
    end = _char_offset(lines, offsets, at.end_lineno, at.end_col_offset)
    mutated_tree = copy.deepcopy(tree)
    target = list(ast.walk(mutated_tree))[index]
    _replace_child(mutated_tree, target, copy.deepcopy(new_node))
    want = ast.dump(mutated_tree)
    text = ast.unparse(new_node)
    for candidate in (text, f"({text})"):
        try:
            got = ast.dump(ast.parse(source[:start] + candidate + source[end:]))
        except SyntaxError:
            continue
        if got == want:
            return Mutation(operator, at.lineno, start, end, source[start:end], candidate)
    return None


def apply_mutation(source: str, mutation: Mutation) -> str:
    """The buggy source; raises ValueError if ``source`` is not the one the mutation was made for."""
    if source[mutation.start : mutation.end] != mutation.old:
        raise ValueError(f"source does not match the mutation ({mutation.description})")
    return source[: mutation.start] + mutation.new + source[mutation.end :]
