"""List the modules over ~400 lines and the functions over ~80 (the size habits of the code).

Usage: ``python scripts/sizes.py [FOLDER ...]`` (default: every package folder). Prints one line per
offender, ``FILE path lines`` or ``FUNC path:line name lines``; exits 1 when there is any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_FILE_LINES = 400
MAX_FUNC_LINES = 80
PACKAGES = ("cli", "api", "trainer", "agentrl", "client", "sandbox", "envhub", "envs")


def offenders(folder: Path, root: Path) -> list[str]:
    """The offenders under ``folder`` (paths relative to ``root``), as printed."""
    out = []
    for file in sorted(folder.rglob("*.py")):
        source, path = file.read_text(), file.relative_to(root)
        lines = source.count("\n")
        if lines > MAX_FILE_LINES:
            out.append(f"FILE {path} {lines}")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNC_LINES:
                    out.append(f"FUNC {path}:{node.lineno} {node.name} {length}")
    return out


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    found = [line for folder in (argv or PACKAGES) for line in offenders(root / folder, root)]
    print("\n".join(found) or "no offenders")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
