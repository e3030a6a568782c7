"""Type-check the rockroll packages with mypy and count the escape hatches (`Any`, `type: ignore`).

    .venv/bin/python scripts/typecheck.py            # mypy (config: [tool.mypy] in pyproject.toml), then the counts
    .venv/bin/python scripts/typecheck.py --counts   # the counts only
    .venv/bin/python scripts/typecheck.py --debt     # the modules that would fail without their ignore_errors

The top-level folders install as one namespace (envs/ is rockroll.envs, see [tool.setuptools.package-dir]), which
an editable install provides through an import hook that mypy cannot follow. So this script links each folder
under .mypy_cache/rockroll-src/rockroll/ and checks the packages from there; paths in mypy's messages are
rewritten back to the folders of this repository. The counts read Python tokens, so an `Any` in a docstring or a
comment does not count, and a `# type: ignore[...]` counts once per comment.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import tokenize
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / ".mypy_cache" / "rockroll-src"  # the cache dir of [tool.mypy]; git ignores it


def package_dirs() -> dict[str, str]:
    """`rockroll.envs` -> `envs`, ..., as pyproject.toml installs them."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    return dict(pyproject["tool"]["setuptools"]["package-dir"])


def link_namespace(dirs: dict[str, str]) -> None:
    """Make SRC/rockroll/<name> a relative symlink to each package folder, so mypy sees the namespace."""
    ns = SRC / "rockroll"
    ns.mkdir(parents=True, exist_ok=True)
    for module, folder in dirs.items():
        link = ns / module.removeprefix("rockroll.")
        target = os.path.relpath(ROOT / folder, ns)
        if link.is_symlink() and os.readlink(link) == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)


def count_tokens(source: str) -> tuple[int, int]:
    """(names `Any`, `type: ignore` comments) in one module's source; strings and other comments do not count."""
    any_names = ignores = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string == "Any":
            any_names += 1
        elif tok.type == tokenize.COMMENT and "type: ignore" in tok.string.replace("type:ignore", "type: ignore"):
            ignores += 1
    return any_names, ignores


def python_files(folder: Path) -> Iterator[Path]:
    yield from sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def counts(folders: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Per package folder: (`Any` names, `type: ignore` comments) over its .py files."""
    out: dict[str, tuple[int, int]] = {}
    for folder in folders:
        total_any = total_ignore = 0
        for path in python_files(ROOT / folder):
            a, i = count_tokens(path.read_text(encoding="utf-8"))
            total_any += a
            total_ignore += i
        out[folder] = (total_any, total_ignore)
    return out


def print_counts(table: dict[str, tuple[int, int]]) -> None:
    print(f"{'package':<10} {'Any':>6} {'type: ignore':>13}")
    for folder, (a, i) in table.items():
        print(f"{folder:<10} {a:>6} {i:>13}")
    print(f"{'total':<10} {sum(a for a, _ in table.values()):>6} {sum(i for _, i in table.values()):>13}")


def ini_value(value: object) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def config_without_debt() -> str:
    """[tool.mypy] as an INI file, with every `ignore_errors` dropped: what `--debt` checks against."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        mypy_config = tomllib.load(f)["tool"]["mypy"]
    lines = ["[mypy]"]
    lines += [f"{k} = {ini_value(v)}" for k, v in mypy_config.items() if k != "overrides"]
    for override in mypy_config.get("overrides", []):
        options = {k: v for k, v in override.items() if k not in ("module", "ignore_errors")}
        if not options:
            continue
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        lines.append(f"[mypy-{','.join(modules)}]")
        lines += [f"{k} = {ini_value(v)}" for k, v in options.items()]
    return "\n".join(lines) + "\n"


def run_mypy(dirs: dict[str, str], config: Path) -> tuple[int, str]:
    link_namespace(dirs)
    args = [sys.executable, "-m", "mypy", "--config-file", str(config)]
    for module in dirs:
        args += ["-p", module]
    env = {**os.environ, "MYPYPATH": str(SRC)}
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    for module, folder in dirs.items():  # .mypy_cache/rockroll-src/rockroll/envs/core.py -> envs/core.py
        name = module.removeprefix("rockroll.")
        output = output.replace(f"{SRC.relative_to(ROOT)}/rockroll/{name}/", f"{folder}/")
        output = output.replace(f"{SRC}/rockroll/{name}/", f"{folder}/")
    return proc.returncode, output


def module_of(path: str, dirs: dict[str, str]) -> str | None:
    """``envs/swe/env.py`` -> ``rockroll.envs.swe.env``; None for a path outside the packages."""
    folder, _, rest = path.partition("/")
    package = next((m for m, f in dirs.items() if f == folder), None)
    if package is None:
        return None
    parts = rest.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--counts", action="store_true", help="print the counts of Any and type: ignore only")
    group.add_argument("--debt", action="store_true", help="list the modules that fail without ignore_errors")
    args = parser.parse_args()
    dirs = package_dirs()
    if args.debt:
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "mypy.ini"
            config.write_text(config_without_debt())
            _, output = run_mypy(dirs, config)
        errors = [line.split(":", 1)[0] for line in output.splitlines() if ": error:" in line]
        failing = sorted({m for m in (module_of(path, dirs) for path in errors) if m is not None})
        print(f"{len(failing)} modules have errors without ignore_errors:")
        print("\n".join(f'    "{m}",' for m in failing))
        return 0
    rc = 0
    if not args.counts:
        rc, output = run_mypy(dirs, ROOT / "pyproject.toml")
        print(output, end="")
    print_counts(counts(dirs.values()))
    return rc


if __name__ == "__main__":
    sys.exit(main())
