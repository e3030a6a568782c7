"""Generate and validate the SWE task list shipped as ``data/tasks.json``.

Run ``python -m envs.swe.generate [--per-module N] [--out PATH]`` after changing a reference module
in ``reference/`` or the mutation operators. For every reference module (``reference/<m>.py`` with
its tests ``reference/test_<m>.py``) it:

1. checks the reference passes all its tests;
2. builds every single-site mutant (:mod:`rockroll.envs.swe.mutate`) and runs the tests on it in a fresh
   temporary directory with the stand-alone runner;
3. keeps mutants that make at least one test fail, with no test timing out and the same test ids
   as the reference (the reference fix then makes all pass: it *is* the reference);
4. picks up to ``N`` per module, round-robin over operators so every kind of bug is represented;
5. writes an issue-like problem statement from the first failing test: what was called, what was
   expected and what came out.

The code run here is this package's own reference code and its mutants (never agent code), in
child processes with a timeout; generation is deterministic.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from rockroll.envs.swe.mutate import Mutation, apply_mutation, mutations
from rockroll.envs.swe.tasks import TASKS_PATH, runner_source

__all__ = ["generate", "run_tests", "problem_statement", "REFERENCE_DIR"]

REFERENCE_DIR = Path(__file__).parent / "reference"
FORMAT = 1


def run_tests(files: dict[str, str], timeout_s: float = 1.0) -> list[dict[str, Any]] | None:
    """Run the runner over ``files`` in a temporary directory; None when it hangs or breaks."""
    with tempfile.TemporaryDirectory(prefix="rockroll-swe-gen-") as tmp:
        for name, text in {**files, "run_tests.py": runner_source()}.items():
            Path(tmp, name).write_text(text, encoding="utf-8")
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-B", "run_tests.py", "--json", "--timeout", str(timeout_s)],
                cwd=tmp, capture_output=True, text=True, timeout=30,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("JSON "):
            return list(json.loads(line[5:]))
    return None


def problem_statement(module: str, results: list[dict[str, Any]]) -> str:
    """An issue-like report written from the failing tests (never from the mutation itself)."""
    failing = [r for r in results if r["outcome"] != "PASSED"]
    first = failing[0]
    detail = first["detail"] or {}
    call = detail.get("call") or "the code under test"
    if detail.get("kind") == "mismatch":
        what = f"`{call}` returns `{detail['got']}`, but `{detail['expected']}` is expected."
    elif detail.get("kind") == "false":
        what = f"`{call}` comes out as `{detail['got']}`, but it should be true."
    else:
        what = f"`{call}` raises `{detail.get('got', 'an exception')}` instead of giving the expected result."
    return (
        f"## Bug report: wrong behaviour in `{module}.py`\n\n"
        f"{what}\n\n"
        f"It shows up in the test `{first['test']}`; {len(failing)} of {len(results)} tests in "
        f"`test_{module}.py` fail.\n\n"
        "To reproduce: `python3 run_tests.py` (or `python -m pytest -q` where pytest is installed).\n\n"
        f"Please fix the bug in `{module}.py`. The tests describe the intended behaviour; do not "
        "change them (they are restored before grading)."
    )


def _module_tasks(name: str, per_module: int, log: TextIO) -> list[dict[str, Any]]:
    source = (REFERENCE_DIR / f"{name}.py").read_text(encoding="utf-8")
    tests = (REFERENCE_DIR / f"test_{name}.py").read_text(encoding="utf-8")
    test_file = f"test_{name}.py"
    reference = run_tests({f"{name}.py": source, test_file: tests})
    if not reference or any(r["outcome"] != "PASSED" for r in reference):
        raise RuntimeError(f"reference module {name} does not pass its own tests: {reference}")
    ids = [r["test"] for r in reference]
    by_operator: dict[str, list[tuple[Mutation, list[dict[str, Any]]]]] = {}
    for mutation in mutations(source):
        results = run_tests({f"{name}.py": apply_mutation(source, mutation), test_file: tests})
        if results is None or [r["test"] for r in results] != ids:
            continue
        if any("TimeoutError" in str((r["detail"] or {}).get("got", "")) for r in results):
            continue
        if all(r["outcome"] == "PASSED" for r in results):
            continue  # equivalent mutant: no test notices it
        by_operator.setdefault(mutation.operator, []).append((mutation, results))
    rng = random.Random(f"swe-{name}")
    for group in by_operator.values():
        rng.shuffle(group)
    picked: list[tuple[Mutation, list[dict[str, Any]]]] = []
    while len(picked) < per_module and any(by_operator.values()):
        for op in sorted(by_operator):
            if by_operator[op] and len(picked) < per_module:
                picked.append(by_operator[op].pop())
    picked.sort(key=lambda p: p[0].start)
    kept = sum(len(g) for g in by_operator.values()) + len(picked)
    print(f"{name}: {kept} valid mutants, {len(picked)} kept", file=log)
    tasks = []
    for i, (mutation, results) in enumerate(picked):
        tasks.append(
            {
                "task_id": f"{name}-{i:02d}",
                "module": name,
                "mutation": mutation.__dict__,
                "fail_to_pass": [r["test"] for r in results if r["outcome"] != "PASSED"],
                "pass_to_pass": [r["test"] for r in results if r["outcome"] == "PASSED"],
                "problem_statement": problem_statement(name, results),
            }
        )
    return tasks


def generate(per_module: int = 12, log: TextIO = sys.stderr) -> dict[str, Any]:
    """Build the task list (see the module docstring)."""
    names = sorted(p.stem[len("test_") :] for p in REFERENCE_DIR.glob("test_*.py"))
    modules = {
        n: {
            "source": (REFERENCE_DIR / f"{n}.py").read_text(encoding="utf-8"),
            "tests": (REFERENCE_DIR / f"test_{n}.py").read_text(encoding="utf-8"),
        }
        for n in names
    }
    tasks = [t for n in names for t in _module_tasks(n, per_module, log)]
    return {"format": FORMAT, "generator": "rockroll.envs.swe.generate", "modules": modules, "tasks": tasks}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-module", type=int, default=12, help="most tasks kept per reference module")
    parser.add_argument("--out", default=str(TASKS_PATH), help="where to write the task list")
    args = parser.parse_args(argv)
    data = generate(args.per_module)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(data['tasks'])} tasks to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
