"""SWE tasks: the task type, the shipped generated tasks, a SWE-bench-style loader and grading.

A :class:`SWETask` is a small repository snapshot with a bug, a problem statement, hidden tests
(written into the workspace just before grading, so editing the visible tests does not help), a
test command, the fail-to-pass and pass-to-pass test ids, and the reference fix as full file
contents.

Generated tasks live in ``data/tasks.json`` (made by ``python -m envs.swe.generate``): reference
modules embedded once, and per task a single-site mutation plus its validated test ids.

SWE-bench-style task files (``.json``: a list or ``{"tasks": [...]}``; ``.jsonl``: one task per
line) hold records with these fields:

* ``instance_id`` and ``problem_statement`` (required);
* ``repo_snapshot`` (``{path: content}``) or ``repo_dir`` (a folder, relative to the task file);
* ``test_command`` (required): a shell command run in the repository root that prints pytest
  ``-rA``-style result lines (``PASSED <test id>`` / ``FAILED <test id> - ...``);
* ``FAIL_TO_PASS`` (required, non-empty) and ``PASS_TO_PASS``: lists of test ids, or JSON strings
  holding such lists as in SWE-bench;
* ``test_files`` (``{path: content}``): hidden tests written before grading (optional);
* ``reference_files`` (``{path: content}``): the gold fix as full new file contents (optional);
* ``test_timeout_s`` (optional, default 120).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from rockroll.envs.errors import EnvConfigError
from rockroll.envs.swe.mutate import Mutation, apply_mutation

__all__ = [
    "SWETask",
    "Grade",
    "TaskFileError",
    "generated_tasks",
    "load_task_file",
    "parse_test_report",
    "grade",
    "runner_source",
    "TASKS_PATH",
    "GENERATED_TEST_COMMAND",
]

TASKS_PATH = Path(__file__).parent / "data" / "tasks.json"
RUNNER_PATH = Path(__file__).parent / "runner.py"
#: how generated tasks run their tests (``-I``: ignore PYTHON* variables and user site-packages)
GENERATED_TEST_COMMAND = "python3 -I -B run_tests.py --timeout 10"
_RESULT_RE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+)", re.MULTILINE)
_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".venv", "node_modules"}
_MAX_SNAPSHOT_BYTES = 8 * 1024 * 1024


class TaskFileError(EnvConfigError):
    """A task file is missing, malformed, or a task in it lacks a required field."""

    def __init__(self, message: str) -> None:
        super().__init__(message, env="SWEEnv", param="task_file")


@dataclass(frozen=True)
class SWETask:
    """One bug-fixing task (see the module docstring)."""

    task_id: str
    problem_statement: str
    files: dict[str, str]
    test_command: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    test_files: dict[str, str] = field(default_factory=dict)
    reference_files: dict[str, str] = field(default_factory=dict)
    test_timeout_s: float = 120.0
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Grade:
    """The outcome of running the hidden tests."""

    reward: float
    resolved: bool
    f2p_passed: int
    f2p_total: int
    p2p_passed: int
    p2p_total: int

    def as_info(self) -> dict[str, Any]:
        return {
            "resolved": self.resolved,
            "fail_to_pass": f"{self.f2p_passed}/{self.f2p_total}",
            "pass_to_pass": f"{self.p2p_passed}/{self.p2p_total}",
        }


@lru_cache(maxsize=1)
def runner_source() -> str:
    """The text of the stand-alone runner written into generated tasks as ``run_tests.py``."""
    return RUNNER_PATH.read_text(encoding="utf-8")


@lru_cache(maxsize=4)
def generated_tasks(path: str = str(TASKS_PATH)) -> tuple[SWETask, ...]:
    """The shipped generated tasks, in file order (cached)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        modules = data["modules"]
        return tuple(_generated_task(rec, modules[rec["module"]]) for rec in data["tasks"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TaskFileError(
            f"cannot read generated SWE tasks from {path}: {e}; rerun `python -m envs.swe.generate`"
        ) from e


def _generated_task(rec: dict[str, Any], module: dict[str, str]) -> SWETask:
    name = rec["module"]
    source, tests = module["source"], module["tests"]
    buggy = apply_mutation(source, Mutation(**rec["mutation"]))
    test_name = f"test_{name}.py"
    return SWETask(
        task_id=rec["task_id"],
        problem_statement=rec["problem_statement"],
        files={f"{name}.py": buggy, test_name: tests, "run_tests.py": runner_source()},
        test_command=GENERATED_TEST_COMMAND,
        fail_to_pass=tuple(rec["fail_to_pass"]),
        pass_to_pass=tuple(rec["pass_to_pass"]),
        test_files={test_name: tests, "run_tests.py": runner_source()},
        reference_files={f"{name}.py": source},
        test_timeout_s=60.0,
        meta={"source": "generated", "module": name, "operator": rec["mutation"]["operator"]},
    )


def _test_list(value: Any, what: str, task_id: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise TaskFileError(f"task {task_id}: {what} is a string but not a JSON list") from e
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise TaskFileError(f"task {task_id}: {what} must be a list of test ids")
    return tuple(value)


def _files(value: Any, what: str, task_id: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TaskFileError(f"task {task_id}: {what} must map relative paths to file contents")
    for path in value:
        if path.startswith("/") or ".." in Path(path).parts or not path:
            raise TaskFileError(f"task {task_id}: {what} has a path outside the repository: {path!r}")
    return dict(value)


def _read_repo_dir(root: Path, task_id: str) -> dict[str, str]:
    if not root.is_dir():
        raise TaskFileError(f"task {task_id}: repo_dir {root} is not a directory")
    files: dict[str, str] = {}
    total = 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir() or path.is_symlink() or _SKIP_DIRS & set(rel.parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files are not part of a text snapshot
        total += len(text)
        if total > _MAX_SNAPSHOT_BYTES:
            raise TaskFileError(f"task {task_id}: repo_dir {root} is larger than {_MAX_SNAPSHOT_BYTES} bytes of text")
        files[rel.as_posix()] = text
    return files


def _task_from_record(rec: Any, base: Path) -> SWETask:
    if not isinstance(rec, dict):
        raise TaskFileError(f"each task must be a JSON object, got {type(rec).__name__}")
    task_id = rec.get("instance_id")
    if not isinstance(task_id, str) or not task_id:
        raise TaskFileError("a task lacks a string 'instance_id'")
    for key in ("problem_statement", "test_command"):
        if not isinstance(rec.get(key), str) or not rec[key].strip():
            raise TaskFileError(f"task {task_id}: missing or empty {key!r}")
    if "repo_snapshot" in rec:
        files = _files(rec["repo_snapshot"], "repo_snapshot", task_id)
    elif isinstance(rec.get("repo_dir"), str):
        files = _read_repo_dir((base / rec["repo_dir"]).resolve(), task_id)
    else:
        raise TaskFileError(f"task {task_id}: needs 'repo_snapshot' (path -> content) or 'repo_dir'")
    f2p = _test_list(rec.get("FAIL_TO_PASS", []), "FAIL_TO_PASS", task_id)
    if not f2p:
        raise TaskFileError(f"task {task_id}: FAIL_TO_PASS must name at least one test")
    timeout = rec.get("test_timeout_s", 120.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise TaskFileError(f"task {task_id}: test_timeout_s must be a number in (0, 3600]")
    return SWETask(
        task_id=task_id,
        problem_statement=rec["problem_statement"],
        files=files,
        test_command=rec["test_command"],
        fail_to_pass=f2p,
        pass_to_pass=_test_list(rec.get("PASS_TO_PASS", []), "PASS_TO_PASS", task_id),
        test_files=_files(rec.get("test_files", {}), "test_files", task_id),
        reference_files=_files(rec.get("reference_files", {}), "reference_files", task_id),
        test_timeout_s=float(timeout),
        meta={"source": "task_file"},
    )


def load_task_file(path: str | os.PathLike[str]) -> tuple[SWETask, ...]:
    """Read a SWE-bench-style task file (see the module docstring); raise :class:`TaskFileError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise TaskFileError(f"cannot read task file {p}: {e}") from e
    try:
        if p.suffix == ".jsonl":
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = json.loads(text)
            records = data["tasks"] if isinstance(data, dict) and "tasks" in data else data
    except ValueError as e:
        raise TaskFileError(f"task file {p} is not valid JSON: {e}") from e
    if not isinstance(records, list) or not records:
        raise TaskFileError(f"task file {p} holds no tasks (expected a non-empty list)")
    tasks = tuple(_task_from_record(rec, p.parent) for rec in records)
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise TaskFileError(f"task file {p} has duplicate instance_id values")
    return tasks


def parse_test_report(output: str) -> dict[str, str]:
    """Map test id -> outcome from pytest ``-rA``-style lines (the last report of a test wins)."""
    return {m.group(2): m.group(1) for m in _RESULT_RE.finditer(output)}


def grade(task: SWETask, outcomes: dict[str, str], *, partial_credit: bool = False) -> Grade:
    """Score a run of the hidden tests.

    Resolved (reward 1) when every fail-to-pass and pass-to-pass test passed; a test missing from
    the report counts as failed. With ``partial_credit`` an unresolved task earns the fraction of
    fail-to-pass tests that now pass, but only when no pass-to-pass test broke (else 0).
    """
    f2p = sum(outcomes.get(t) in ("PASSED", "XPASS") for t in task.fail_to_pass)
    p2p = sum(outcomes.get(t) in ("PASSED", "XPASS") for t in task.pass_to_pass)
    n_f2p, n_p2p = len(task.fail_to_pass), len(task.pass_to_pass)
    resolved = f2p == n_f2p and p2p == n_p2p
    if resolved:
        reward = 1.0
    elif partial_credit and p2p == n_p2p and n_f2p:
        reward = f2p / n_f2p
    else:
        reward = 0.0
    return Grade(reward, resolved, f2p, n_f2p, p2p, n_p2p)
