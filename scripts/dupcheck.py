"""Fail on duplicate code: pylint's similarity checker (``duplicate-code``, R0801) over the given folders.

    .venv/bin/python scripts/dupcheck.py DIR [DIR ...]      # bash scripts/dupcheck.sh names the folders

The settings are pylint's own, read from ``[tool.pylint.similarities]`` in pyproject.toml (the block length, and
whether comments, docstrings, imports and function signatures are compared). The comparison is pylint's
(:class:`pylint.checkers.symilar.Symilar`); only the imports and signatures are found here with the standard
library's :mod:`ast` instead of astroid, whose trees (built with inference into every imported package: torch,
transformers...) take minutes for this tree where this takes seconds. The lines found are the ones pylint finds
(``pylint --rcfile=pyproject.toml DIRS`` reports the same blocks). Prints the blocks found and exits 1 when
there are any.
"""

from __future__ import annotations

import ast
import io
import sys
import tomllib
from pathlib import Path

from pylint.checkers.symilar import Symilar

ROOT = Path(__file__).resolve().parent.parent


def settings() -> dict[str, bool | int]:
    """``[tool.pylint.similarities]`` of pyproject.toml, with pylint's defaults for what it leaves out."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        conf = tomllib.load(f).get("tool", {}).get("pylint", {}).get("similarities", {})
    return {
        "min_lines": int(conf.get("min-similarity-lines", 4)),
        "ignore_comments": bool(conf.get("ignore-comments", True)),
        "ignore_docstrings": bool(conf.get("ignore-docstrings", True)),
        "ignore_imports": bool(conf.get("ignore-imports", True)),
        "ignore_signatures": bool(conf.get("ignore-signatures", True)),
    }


def ignored_lines(source: str, imports: bool, signatures: bool) -> set[int]:
    """The lines pylint leaves out of the comparison: every import statement, and each function's signature
    (from ``def`` to its body; functions of modules, classes and functions, as pylint finds them)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # compared whole, as pylint compares a module it cannot parse
        return set()
    out: set[int] = set()
    if imports:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))

    def functions(scope: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for node in scope.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.update(range(node.lineno, node.body[0].lineno))
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                functions(node)

    if signatures:
        functions(tree)
    return out


def main(dirs: list[str]) -> int:
    conf = settings()
    imports, signatures = bool(conf.pop("ignore_imports")), bool(conf.pop("ignore_signatures"))
    sim = Symilar(**conf)  # type: ignore[arg-type]
    files = sorted(p for d in dirs for p in Path(d).rglob("*.py"))
    for path in files:
        source = path.read_text(encoding="utf-8")
        drop = ignored_lines(source, imports, signatures)
        lines = ["\n" if i in drop else line for i, line in enumerate(source.splitlines(keepends=True), 1)]
        sim.append_stream(str(path), io.StringIO("".join(lines)))
    found = sim._compute_sims()
    if found:
        print(sim._get_similarity_report(found), end="")
        print(f"dupcheck: {len(found)} duplicated blocks of {conf['min_lines']}+ lines (above)")
        return 1
    print(f"dupcheck: no block of {conf['min_lines']}+ lines repeated in {len(files)} files")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
