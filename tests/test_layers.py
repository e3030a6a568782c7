"""The layers hold because imports say so, not because they hide in functions.

Top to bottom: cli > api > trainer > agentrl > client > sandbox > envhub > envs. A module imports its own package
and the packages below it, at module top; an upper layer plugs into a lower one through a registry
and an entry point (pyproject.toml), never through an import hidden in a function.

* ``lint-imports`` (import-linter, the ``[tool.importlinter]`` contracts in pyproject.toml) checks
  the order over every import, function-level ones included; a second contract keeps agentrl's own
  subpackages in order (:data:`AGENTRL_LAYERS`);
* no function-level import of another rockroll package, except :data:`HEAVY_LAZY` and in the
  command line (:data:`LAZY_LAYERS`);
* no import cycle between rockroll modules, except :data:`KNOWN_CYCLES` (being fixed);
* importing any rockroll module loads no optional heavy dependency, and what runs inside a sandbox
  image needs nothing the image lacks.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("cli", "api", "trainer", "agentrl", "client", "sandbox", "envhub", "envs")  # top to bottom
#: agentrl's subpackages and top modules, top to bottom (`|`: independent siblings); _moved (old paths) is outside
AGENTRL_LAYERS = (
    "serving",
    "eval",
    "rollout",
    "sources | rewards",
    "engines",
    "tools",
    "models | faults",
    "errors | trajectory | _lazy",
)
AGENTRL_OUTSIDE_LAYERS = ("_moved",)
HEAVY_DEPS = ("torch", "ray", "transformers", "vllm", "sglang", "deepspeed", "docker", "alfworld", "textworld")

#: target module -> why a function-level import of it (from another rockroll package) may stay lazy.
#: Only for modules that import an optional heavy dependency at their own top; none do today: torch,
#: ray, transformers, vllm, sglang, deepspeed and the Docker SDK are imported inside the functions that
#: use them (see test_no_module_imports_a_heavy_dependency_at_import), so every sibling import sits at
#: module top. An entry must name such a module (test_heavy_lazy_entries_are_heavy checks it).
HEAVY_LAZY: dict[str, str] = {}

#: layers whose modules may import lower layers inside functions: the command line (cli/) imports what a
#: command runs (the server, the trainer, the eval) in that command, so `rockroll --help` stays fast;
#: lint-imports still checks that those imports point down.
LAZY_LAYERS = ("cli",)

#: (importing module, imported module) -> reason, for a hidden import being fixed in parallel; an entry
#: goes once its file is fixed (a stale entry warns). Empty: the last ones (client/remote_env.py) are fixed.
TEMPORARY_LAZY: dict[tuple[str, str], str] = {}

#: groups of modules whose import cycles are being fixed in parallel (a cycle must lie inside one);
#: a stale group warns. Empty: client/sdk.py <-> remote_env.py <-> session_socket.py and
#: trainer/algos/advantages.py <-> normalize.py are fixed.
KNOWN_CYCLES: tuple[frozenset[str], ...] = ()


def _modules() -> dict[str, Path]:
    """``rockroll.<pkg>.<...>`` -> file, for every module of the eight packages (data folders excluded)."""
    out: dict[str, Path] = {}
    for top in LAYERS:
        for path in sorted((ROOT / top).rglob("*.py")):
            if not (path.parent / "__init__.py").is_file():
                continue  # package data (envs/swe/reference, migrations scripts), not modules
            parts = path.relative_to(ROOT).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out["rockroll." + ".".join(parts)] = path
    return out


def _function_level_imports(module: str, path: Path) -> list[tuple[str, int]]:
    """``(imported module, line)`` of every import inside a function or class body of ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            if nested and isinstance(child, ast.Import):
                found.extend((a.name, child.lineno) for a in child.names)
            elif nested and isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.append((target, child.lineno))
            visit(child, inner)

    visit(tree, False)
    return found


def _layer(module: str) -> str:
    return module.split(".")[1] if module.startswith("rockroll.") and module.count(".") >= 1 else ""


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_import_linter_contracts_are_the_layers() -> None:
    """pyproject.toml holds the two layers contracts: the packages' order and agentrl's own."""
    by_container = {tuple(c.get("containers", ())): c for c in _contracts()}
    assert set(by_container) == {(), ("rockroll.agentrl",)}
    assert by_container[()]["type"] == "layers"
    assert by_container[()]["layers"] == [f"rockroll.{layer}" for layer in LAYERS]
    agentrl = by_container[("rockroll.agentrl",)]
    assert agentrl["type"] == "layers" and tuple(agentrl["layers"]) == AGENTRL_LAYERS


def test_every_agentrl_part_has_a_layer() -> None:
    """A new agentrl subpackage or top-level module gets a place in :data:`AGENTRL_LAYERS`."""
    placed = {name.strip() for layer in AGENTRL_LAYERS for name in layer.split("|")}
    parts = {p.name for p in (ROOT / "agentrl").iterdir() if (p / "__init__.py").is_file()}
    parts |= {p.stem for p in (ROOT / "agentrl").glob("*.py") if p.stem != "__init__"}
    assert parts - placed - set(AGENTRL_OUTSIDE_LAYERS) == set(), "add them to the agentrl contract (pyproject.toml)"
    assert placed - parts == set(), "these layers of the agentrl contract are gone"


def test_import_linter_contract_is_kept() -> None:
    """``lint-imports`` (what CI runs through this test) keeps the layers contracts of pyproject.toml."""
    linter = Path(sys.executable).with_name("lint-imports")
    if not linter.exists():
        pytest.fail("lint-imports is missing: pip install -e '.[dev]' (import-linter is in the dev extra)")
    proc = subprocess.run(
        [str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )  # fmt: skip
    assert proc.returncode == 0, f"the layers contract is broken:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    assert f"Contracts: {len(_contracts())} kept, 0 broken." in proc.stdout, proc.stdout[-3000:]


def test_no_function_level_import_of_another_rockroll_package() -> None:
    """Sibling-package imports sit at module top, where import-linter and readers see them."""
    hidden, used = [], set()
    for module, path in _modules().items():
        for target, line in _function_level_imports(module, path):
            if not target.startswith("rockroll.") or _layer(target) == _layer(module):
                continue
            if _layer(module) in LAZY_LAYERS:
                continue
            if target in HEAVY_LAZY:
                continue
            if (module, target) in TEMPORARY_LAZY:
                used.add((module, target))
                continue
            hidden.append(f"{path.relative_to(ROOT)}:{line}: imports {target} inside a function")
    assert not hidden, "move these imports to module top (or register a plugin):\n" + "\n".join(hidden)
    for stale in set(TEMPORARY_LAZY) - used:
        warnings.warn(f"TEMPORARY_LAZY entry {stale} is fixed: remove it from tests/test_layers.py", stacklevel=1)


def test_heavy_lazy_entries_are_heavy() -> None:
    """Each :data:`HEAVY_LAZY` module imports a heavy optional dependency at its own top."""
    modules = _modules()
    for target, reason in HEAVY_LAZY.items():
        assert reason, f"{target}: say why it stays lazy"
        tree = ast.parse(modules[target].read_text())
        tops = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        tops |= {(n.module or "").split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom)}
        assert tops & set(HEAVY_DEPS), f"{target} imports no heavy dependency at its top: import it at module top"


def _cycles() -> list[set[str]]:
    """Strongly connected groups of more than one module in rockroll's import graph (all imports)."""
    import grimp

    graph = grimp.build_graph(*(f"rockroll.{p}" for p in LAYERS), cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm; the graph has ~200 nodes, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph.modules):
        if module not in index:
            connect(module)
    return groups


def test_no_import_cycles_between_modules() -> None:
    """Module imports form a DAG (TYPE_CHECKING and function-level imports count too)."""
    cycles = _cycles()
    new = [sorted(c) for c in cycles if not any(c <= known for known in KNOWN_CYCLES)]
    assert not new, "import cycles (give the shared part a module of its own, or a Protocol):\n" + "\n".join(
        " <-> ".join(c) for c in new
    )
    for known in KNOWN_CYCLES:
        if not any(c & known for c in cycles):
            warnings.warn(f"known cycle {sorted(known)} is gone: remove it from KNOWN_CYCLES", stacklevel=1)


def _imported_after(modules: list[str]) -> set[str]:
    """Top-level names in ``sys.modules`` of a fresh interpreter after importing ``modules``."""
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.timeout(180)
def test_no_module_imports_a_heavy_dependency_at_import() -> None:
    """Every module's top-level imports are cheap: heavy optional dependencies load inside functions."""
    loaded = _imported_after(sorted(m for m in _modules() if not m.endswith("__main__")))
    assert not loaded & set(HEAVY_DEPS), f"importing rockroll loads {sorted(loaded & set(HEAVY_DEPS))}"


def test_the_sandbox_image_needs_only_numpy_and_gymnasium() -> None:
    """The in-sandbox server, its plugins and the envs import nothing the sandbox image lacks."""
    loaded = _imported_after(
        [
            "rockroll.sandbox.server.app",
            "rockroll.sandbox.server.plugins",
            "rockroll.sandbox.server.env_worker",
            "rockroll.agentrl.faults.sandbox_envs",
            "rockroll.envhub",
        ]
    )
    missing_in_image = {"sqlalchemy", "alembic", "fastapi", "starlette", "httpx", "pydantic", "yaml", "docker"}
    assert not loaded & missing_in_image, f"the sandbox image has no {sorted(loaded & missing_in_image)}"
