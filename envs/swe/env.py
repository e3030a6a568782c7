"""SWE-v0: fix a bug in a small Python repository, working through a sandboxed shell.

Each episode is one :class:`~rockroll.envs.swe.tasks.SWETask`, chosen with the env's seeded RNG (or named
with ``reset(options={"task_id": ...})``); ``reset(options={"test_timeout_s": T})`` gives the episode's
hidden-test run a shorter limit than the task's own ``test_timeout_s``, and
``reset(options={"test_timeouts": {task_id: T, ...}})`` does so per task, for whichever task the seed
picks (what the rollout's adaptive per-task timeouts send). The repository is written into a sandbox workspace
(an executor of :mod:`rockroll.envs.swe.executor`, by default a sandbox of
:mod:`rockroll.sandbox.swe_executor`); the agent acts with three tools, one per step:

* ``<answer>bash: <command></answer>``: run a shell command in the repository root; the
  observation is its output (stdout, then stderr) and exit code, cut to ``max_output_chars``
  with a note saying how much was left out;
* ``<answer>edit: <path>\\n<full new file content></answer>``: replace (or create) a file;
* ``<answer>submit</answer>``: restore the hidden tests, run them, score, end the episode.

Reward: 0 per step; on submit 1 when every fail-to-pass and pass-to-pass test passes, else 0
(``partial_credit=True``: the fraction of fail-to-pass tests fixed, when nothing else broke). A test
run past its limit is killed and scores 0 (the answer was too slow: the agent's outcome, reported
as ``tests_timed_out``); the submit info also reports the run's wall time, ``test_run_s``.
A malformed action costs ``format_penalty`` and says what was wrong. The episode's state lives in
the sandbox's filesystem, so the env cannot be forked: ``get_state``/``set_state`` raise
:class:`SWEForkUnsupported`. Infrastructure failures raise :class:`~rockroll.envs.swe.executor.ExecutorError`.
The same env with tool calls instead of this text form: ``SWETools-v0`` (:mod:`rockroll.envs.swe.tool_env`).
"""

from __future__ import annotations

import os
import time
import weakref
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from rockroll.envs.core import DEFAULT_FORMAT_PENALTY, StepOutcome, TextEnv, finite_number
from rockroll.envs.errors import EnvConfigError, EnvError
from rockroll.envs.exec_result import ExecResult
from rockroll.envs.swe.executor import BACKENDS, Executor, ExecutorError, make_executor
from rockroll.envs.swe.tasks import SWETask, generated_tasks, grade, load_task_file, parse_test_report

__all__ = ["SWEEnv", "Bash", "Edit", "Submit", "SWEForkUnsupported", "reference_actions"]


class SWEForkUnsupported(EnvError, NotImplementedError):
    """SWE-v0 cannot be snapshotted: its state is a sandbox's filesystem, not Python data."""


@dataclass(frozen=True)
class Bash:
    """Run ``command`` with ``/bin/sh -c`` in the repository root."""

    command: str


@dataclass(frozen=True)
class Edit:
    """Replace the file at ``path`` (relative to the repository root) with ``content``."""

    path: str
    content: str


@dataclass(frozen=True)
class Submit:
    """Run the hidden tests and end the episode."""


SWEAction = Bash | Edit | Submit

_INSTRUCTIONS = """\
You are fixing a bug in a small Python repository. You work in a sandboxed shell whose current \
directory is the repository root. Read the bug report, inspect the code, reproduce the failure, \
fix the code, check your fix, then submit. Submitting runs hidden tests (the repository's tests, \
restored to their original content) and ends the episode: the task is solved when all of them pass."""

_ACTION_FORMAT = """\
Give exactly one action per turn inside <answer>...</answer>, in one of these forms:
<answer>bash: <shell command></answer>   run a command, e.g. <answer>bash: cat README.md</answer>
<answer>edit: <relative/path.py>
<the complete new content of the file></answer>   replace (or create) a whole file
<answer>submit</answer>   run the hidden tests and finish"""


_MAX_LISTED = 40  # files named in the first observation
_DROP_BYTECODE = "find . -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null; true"


def _check_path(path: str) -> str | None:
    """Why ``path`` is not an acceptable file path for an edit, or None when it is."""
    if not path:
        return "the edit names no file (write 'edit: path' then the content on the next lines)"
    if "\x00" in path or len(path) > 255:
        return "the file path is invalid"
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts:
        return "the file path must be relative to the repository root, without '..'"
    return None


def reference_actions(task: SWETask) -> list[str]:
    """Answers (without tags) that apply ``task``'s reference fix, one ``edit:`` per file."""
    return [f"edit: {path}\n{content}" for path, content in sorted(task.reference_files.items())]


class SWEEnv(TextEnv[SWEAction]):
    """Bug fixing in a sandbox (see the module docstring).

    Args:
        backend: ``auto`` (Docker when usable, else a process sandbox), ``docker``, ``process``,
            or ``local`` (the weaker fallback of :class:`~rockroll.envs.swe.executor.LocalExecutor`).
        partial_credit: reward the fraction of fail-to-pass tests fixed instead of 0/1.
        task_ids: only these tasks (ids of the generated set, or of ``task_file``).
        task_file: a SWE-bench-style task file (see :mod:`rockroll.envs.swe.tasks`) instead of the
            generated tasks.
        max_output_chars: longest command output shown to the agent.
        command_timeout_s: wall-clock limit of one ``bash`` command.
        format_penalty: reward of a malformed action.
    """

    instructions = _INSTRUCTIONS
    action_format = _ACTION_FORMAT
    #: the last line of the first observation: how to act
    next_steps = "Use bash to explore and test, edit to change files, submit when done."

    def __init__(
        self,
        *,
        backend: str = "auto",
        partial_credit: bool = False,
        task_ids: list[str] | tuple[str, ...] | None = None,
        task_file: str | os.PathLike[str] | None = None,
        max_output_chars: int = 4000,
        command_timeout_s: float = 30.0,
        format_penalty: float = DEFAULT_FORMAT_PENALTY,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(format_penalty=format_penalty, render_mode=render_mode)
        name = type(self).__name__
        if backend not in BACKENDS:
            raise EnvConfigError(
                f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}", env=name, param="backend"
            )
        if not isinstance(partial_credit, bool):
            raise EnvConfigError(
                f"partial_credit must be a bool, got {partial_credit!r}", env=name, param="partial_credit"
            )
        if (
            isinstance(max_output_chars, bool)
            or not isinstance(max_output_chars, int)
            or not 200 <= max_output_chars <= 1_000_000
        ):
            raise EnvConfigError(
                f"max_output_chars must be an int in [200, 1000000], got {max_output_chars!r}",
                env=name,
                param="max_output_chars",
            )
        if (
            isinstance(command_timeout_s, bool)
            or not isinstance(command_timeout_s, (int, float))
            or not 0 < command_timeout_s <= 600
        ):
            raise EnvConfigError(
                f"command_timeout_s must be a number in (0, 600], got {command_timeout_s!r}",
                env=name,
                param="command_timeout_s",
            )
        if task_file is not None and not isinstance(task_file, (str, os.PathLike)):
            raise EnvConfigError(f"task_file must be a path or None, got {task_file!r}", env=name, param="task_file")
        tasks = load_task_file(task_file) if task_file is not None else generated_tasks()
        if task_ids is not None:
            if isinstance(task_ids, str) or not isinstance(task_ids, (list, tuple)) or not task_ids:
                raise EnvConfigError(
                    "task_ids must be a non-empty list of task ids or None", env=name, param="task_ids"
                )
            by_id = {t.task_id: t for t in tasks}
            unknown = [t for t in task_ids if t not in by_id]
            if unknown:
                raise EnvConfigError(
                    f"unknown task id(s): {', '.join(map(str, unknown[:5]))}", env=name, param="task_ids"
                )
            tasks = tuple(by_id[t] for t in dict.fromkeys(task_ids))
        self.tasks: tuple[SWETask, ...] = tuple(tasks)
        self.backend = backend
        self.partial_credit = partial_credit
        self.max_output_chars = max_output_chars
        self.command_timeout_s = float(command_timeout_s)
        self.task: SWETask | None = None
        self.test_timeout_s = 0.0  # the current episode's limit of the hidden-test run
        self._executor: Executor | None = None
        self._finalizer: weakref.finalize[[], SWEEnv] | None = None
        self._obs = ""

    # ------------------------------------------------------------ executor
    def _ensure_executor(self) -> Executor:
        if self._executor is None:
            self._executor = make_executor(self.backend)
            self._finalizer = weakref.finalize(self, self._executor.close)
        return self._executor

    def close(self) -> None:
        """Stop the sandbox (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()
        self._executor = self._finalizer = None

    @property
    def executor_name(self) -> str:
        """The backend actually in use (``docker``, ``process`` or ``local``), empty before reset."""
        return "" if self._executor is None else str(self._executor.name)

    # ---------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        wanted = options.get("task_id")
        if wanted is not None:
            matches = [t for t in self.tasks if t.task_id == wanted]
            if not matches:
                raise EnvConfigError(f"options['task_id']={wanted!r} is not one of this env's tasks", param="options")
            self.task = matches[0]
        else:
            self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self.test_timeout_s = self._test_timeout(
            options.get("test_timeout_s"), self._from_table(options.get("test_timeouts"), self.task), self.task
        )
        try:
            self._ensure_executor().reset(self.task.files)
        except ExecutorError:
            self.close()  # the sandbox may have died: start a fresh one, once
            self._ensure_executor().reset(self.task.files)
        paths = sorted(self.task.files)
        listing = "\n".join(f"  {p}" for p in paths[:_MAX_LISTED])
        if len(paths) > _MAX_LISTED:
            listing += f"\n  ... and {len(paths) - _MAX_LISTED} more (use bash to look around)"
        self._obs = f"{self.task.problem_statement.strip()}\n\nRepository files:\n{listing}\n\n{self.next_steps}"
        return {"task_id": self.task.task_id}

    def _parse_action(self, answer: str) -> SWEAction | None:
        head, _, rest = answer.partition(":")
        tool = head.strip().lower()
        if answer.strip().lower() == "submit":
            return Submit()
        if tool == "bash" and rest.strip():
            return Bash(rest.strip())
        if tool == "edit":
            path_line, newline, content = rest.partition("\n")
            path = path_line.strip()
            if _check_path(path) is None and newline:
                return Edit(path, content if content.endswith("\n") or not content else content + "\n")
        return None

    def _step(self, action: SWEAction) -> StepOutcome[SWEAction]:
        ex = self._ensure_executor()
        if isinstance(action, Bash):
            result = ex.run(action.command, self.command_timeout_s)
            self._obs = self._format_output(f"$ {action.command}", result)
            return StepOutcome(self._obs, 0.0, False, effective=not result.timed_out, success=False)
        if isinstance(action, Edit):
            try:
                ex.write_file(action.path, action.content)
            except (OSError, ValueError) as e:  # a path the workspace refuses: the agent's problem, not an error
                self._obs = f"Could not write {action.path}: {e}"
                return StepOutcome(self._obs, 0.0, False, effective=False, success=False)
            lines = action.content.count("\n")
            self._obs = f"Wrote {action.path} ({lines} lines, {len(action.content)} characters)."
            return StepOutcome(self._obs, 0.0, False, effective=True, success=False)
        return self._submit()

    def _submit(self) -> StepOutcome[SWEAction]:
        assert self.task is not None  # reset() ran: the base class guarantees it
        ex = self._ensure_executor()
        for path, content in self.task.test_files.items():
            ex.write_file(path, content)
        ex.run(_DROP_BYTECODE, 30.0)  # no stale or planted .pyc may stand in for the sources
        started = time.monotonic()
        result = ex.run(self.task.test_command, self.test_timeout_s)
        run_s = time.monotonic() - started
        outcomes = parse_test_report(result.stdout + "\n" + result.stderr)
        g = grade(self.task, outcomes, partial_credit=self.partial_credit)
        verdict = "All hidden tests pass: the task is solved." if g.resolved else "The task is not solved."
        summary = (
            f"Submitted. Hidden tests: fail-to-pass {g.f2p_passed}/{g.f2p_total} passed, "
            f"pass-to-pass {g.p2p_passed}/{g.p2p_total} passed. {verdict} Reward: {g.reward:g}."
        )
        self._obs = self._format_output(summary + "\n\nTest output:", result, self.test_timeout_s)
        info = {
            **g.as_info(), "tests_timed_out": result.timed_out, "test_run_s": round(run_s, 4),
            "test_timeout_s": self.test_timeout_s,
        }  # fmt: skip
        return StepOutcome(self._obs, g.reward, True, effective=True, success=g.resolved, info=info)

    @staticmethod
    def _from_table(table: object, task: SWETask) -> float | None:
        """The chosen task's limit in ``options["test_timeouts"]`` (``{task_id: seconds}``, capped at the
        task's own ``test_timeout_s``), or None when the table has no entry for it."""
        if table is None:
            return None
        if not isinstance(table, dict) or not all(
            isinstance(k, str) and finite_number(v) and v > 0 for k, v in table.items()
        ):
            raise EnvConfigError(
                "options['test_timeouts'] must map task ids to numbers of seconds > 0, e.g. {'roman-00': 2.5}",
                env="SWEEnv",
                param="options",
            )
        value = table.get(task.task_id)
        return None if value is None else min(float(value), float(task.test_timeout_s))

    @staticmethod
    def _test_timeout(value: object, tabled: float | None, task: SWETask) -> float:
        """The episode's test-run limit: ``options["test_timeout_s"]`` (a number in (0, the task's
        ``test_timeout_s``]), else the task's entry in ``options["test_timeouts"]``, else the task's own."""
        if value is None:
            return float(task.test_timeout_s) if tabled is None else tabled
        if not finite_number(value) or not 0 < value <= task.test_timeout_s:
            raise EnvConfigError(
                f"options['test_timeout_s'] must be a number in (0, {task.test_timeout_s:g}] (task "
                f"{task.task_id}'s test_timeout_s), got {value!r}",
                env="SWEEnv",
                param="options",
            )
        return float(value)

    def _format_output(self, header: str, result: ExecResult, timeout_s: float | None = None) -> str:
        text = result.stdout
        if result.stderr:
            text += ("" if not text or text.endswith("\n") else "\n") + result.stderr
        limit = self.max_output_chars
        if len(text) > limit:
            head, tail = text[: limit // 2], text[-(limit // 2) :]
            text = f"{head}\n[... output truncated: {len(text) - len(head) - len(tail)} characters omitted ...]\n{tail}"
        elif result.truncated:
            text += "\n[... output truncated by the sandbox ...]"
        status = f"[exit code {result.exit_code}]"
        if result.timed_out:
            waited = self.command_timeout_s if timeout_s is None else timeout_s
            status = f"[command timed out after {waited:g}s and was killed]"
        return f"{header}\n{text.rstrip() or '(no output)'}\n{status}"

    def _render(self) -> str:
        return self._obs

    def _invalid_observation(self, answer: str | None) -> str:
        if answer is None:
            why = "no <answer>...</answer> block was found"
        else:
            tool = answer.partition(":")[0].strip().lower()
            if tool == "bash":
                why = "the bash command is empty"
            elif tool == "edit":
                path_line, newline, _ = answer.partition(":")[2].partition("\n")
                why = _check_path(path_line.strip()) or (
                    "the edit has no content: put the complete new file on the lines after 'edit: path'"
                    if not newline
                    else ""
                )
            else:
                why = f"unknown action {answer[:40]!r}; the tools are bash, edit and submit"
        return f"Invalid action: {why}. Nothing was run.\n\n{_ACTION_FORMAT}"

    def _get_state(self) -> dict[str, Any]:
        raise SWEForkUnsupported("SWE-v0 cannot be forked: its state is the sandbox's filesystem (supports_fork=False)")

    def _set_state(self, data: dict[str, Any]) -> None:
        raise SWEForkUnsupported("SWE-v0 cannot be restored from a snapshot (supports_fork=False)")

    def action_candidates(self) -> list[str]:
        """A representative sample of actions (the action space is open-ended)."""
        return [
            "bash: ls",
            "bash: cat run_tests.py | head -n 20",
            "bash: python3 run_tests.py",
            "bash: python -m pytest -q",
            "submit",
        ]

    def _extra_info(self) -> dict[str, Any]:
        return {"task_id": None if self.task is None else self.task.task_id, "backend": self.executor_name}

    def reference_solution(self) -> list[str]:
        """Answers that apply the current task's reference fix (for tests, benchmarks, demos)."""
        if self.task is None:
            raise EnvError("reset() first: there is no current task")
        return reference_actions(self.task)
