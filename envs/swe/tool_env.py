"""``SWETools-v0``: SWE-v0 played with tool calls (``bash``, ``str_replace_editor``, ``submit``).

The same tasks, sandbox, hidden tests and reward as :class:`~rockroll.envs.swe.env.SWEEnv` (its settings too:
``backend``, ``partial_credit``, ``task_ids``, ``task_file``, ``max_output_chars``, ``command_timeout_s``,
``format_penalty``); only the action interface differs: OpenAI function calls instead of
``<answer>bash: ...</answer>`` text (``SWE-v0`` keeps the text form). The tools:

* ``bash(command)``: run a shell command in the repository root; the result is its output and exit code, cut
  to ``max_output_chars`` (a command that runs out of time is killed and says so);
* ``str_replace_editor(command, path, ...)``: ``view`` a file with line numbers (``view_range``: some lines)
  or a directory's files, ``create`` a file (``file_text``: its whole content; an existing file is
  replaced), ``str_replace`` the one occurrence of ``old_str`` by ``new_str``;
* ``submit()``: restore the hidden tests, run them, score, end the episode (the step's ``info`` is the text
  form's submit info: ``resolved``, ``tests_timed_out``, ``test_run_s``, ...).

Paths are relative to the repository root: an absolute path or one with ``..`` is refused before anything
runs, and every read and write goes through the task's executor (the sandbox), which refuses paths that
resolve outside its workspace (symlinks included). A mistake (no such file, ``old_str`` absent or not
unique, a bad path) is an error result and the episode goes on; calls the schemas refuse cost
``format_penalty`` (:class:`~rockroll.envs.tool_env.ToolEnv`), as does a turn without a call (a nudge that
runs nothing). An infrastructure failure (the sandbox died: :class:`~rockroll.envs.swe.executor.ExecutorError`)
is raised from ``step``, never turned into the agent's result. Like SWE-v0 it cannot be forked.
"""

from __future__ import annotations

import shlex
from typing import Any

from rockroll.envs.core import StepOutcome
from rockroll.envs.errors import EnvError
from rockroll.envs.swe.editor import EditError, numbered, reference_edit, replace_once, snippet
from rockroll.envs.swe.env import _INSTRUCTIONS, SWEEnv, _check_path
from rockroll.envs.swe.executor import ExecutorError
from rockroll.envs.swe.tasks import SWETask
from rockroll.envs.tool_env import ToolEnv, render_results
from rockroll.envs.tools import Tool, ToolAction, ToolCall, ToolResult

__all__ = ["SWEToolEnv", "TOOLS", "reference_calls"]

_PATH = {"type": "string", "minLength": 1, "maxLength": 255, "description": "relative to the repository root"}
TOOLS = (
    Tool(
        "bash",
        "Run a shell command (/bin/sh -c) in the repository root; returns its output and exit code.",
        {
            "type": "object",
            "properties": {"command": {"type": "string", "minLength": 1, "maxLength": 20_000}},
            "required": ["command"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "str_replace_editor",
        "View, create or edit a file of the repository. command 'view': the file with line numbers (view_range "
        "[start, end] for some lines, end -1: to the last) or a directory's files; 'create': write file_text as "
        "the whole file; 'str_replace': replace old_str, which must occur exactly once, with new_str.",
        {
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": ["view", "create", "str_replace"]},
                "path": _PATH,
                "file_text": {"type": "string", "description": "create: the complete content of the file"},
                "old_str": {"type": "string", "description": "str_replace: the exact text to replace"},
                "new_str": {"type": "string", "description": "str_replace: the text to put in its place"},
                "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
            },
            "required": ["command", "path"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "submit",
        "Run the hidden tests on your fix and end the episode.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    ),
)

_TOOL_FORMAT = """\
Act by calling the tools (one or more calls per turn):
bash(command)   run a shell command in the repository root, e.g. bash(command="python3 run_tests.py")
str_replace_editor(command, path, ...)   view a file (command="view"), create one (command="create", \
file_text=...) or replace a unique piece of it (command="str_replace", old_str=..., new_str=...)
submit()   run the hidden tests and finish
Paths are relative to the repository root. A turn without a tool call runs nothing."""

_NUDGE = "No tool was called, so nothing ran. Call bash, str_replace_editor or submit."
_MAX_LISTED = 200  # files named by a view of a directory


def reference_calls(task: SWETask, *, view: bool = False) -> list[ToolCall]:
    """``str_replace_editor`` calls that apply ``task``'s reference fix (a unique replacement per file where one
    exists, else the whole file), in path order; ``view``: each file the task has is viewed before its edit.
    ``submit`` is not included."""
    calls = []
    for i, (path, content) in enumerate(sorted(task.reference_files.items())):
        if view and path in task.files:
            calls.append(ToolCall(f"view{i + 1}", "str_replace_editor", {"command": "view", "path": path}))
        args = {"path": path, **reference_edit(task.files.get(path), content)}
        calls.append(ToolCall(f"fix{i + 1}", "str_replace_editor", {"command": args.pop("command"), **args}))
    return calls


class SWEToolEnv(ToolEnv, SWEEnv):  # type: ignore[misc]  # ToolEnv's hooks replace SWEEnv's text ones
    """SWE-v0 with tool calls (see the module docstring); the constructor is :class:`SWEEnv`'s."""

    tools = TOOLS
    instructions = _INSTRUCTIONS
    action_format = _TOOL_FORMAT
    next_steps = "Call bash to explore and test, str_replace_editor to view and change files, submit when done."
    _outcome: StepOutcome[Any] | None = None  # the submit's outcome, once submitted
    _broken: ExecutorError | None = None  # the sandbox failed during this turn's calls

    # ---------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self._outcome = self._broken = None
        return SWEEnv._reset(self, options)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._outcome is not None:
            return "not run: you have submitted already"
        try:
            if name == "bash":
                command = str(arguments["command"])
                result = self._ensure_executor().run(command, self.command_timeout_s)
                return self._format_output(f"$ {command}", result)
            if name == "str_replace_editor":
                return self._edit(arguments)
            if name == "submit":
                self._outcome = self._submit()
                return self._outcome.observation
        except ExecutorError as e:  # the infrastructure's failure: raised from step, after the turn
            self._broken = e
            raise
        raise LookupError(f"SWEToolEnv declares no tool {name!r}")  # check_call keeps undeclared names out

    def _after_calls(self, results: list[ToolResult]) -> StepOutcome[ToolAction]:
        if self._broken is not None:
            broken, self._broken = self._broken, None
            raise broken
        self._obs = render_results(results)
        if self._outcome is not None:
            out = self._outcome
            return StepOutcome(self._obs, out.reward, True, effective=True, success=out.success, info=out.info)
        effective = any(not r.error for r in results)
        return StepOutcome(self._obs, 0.0, False, effective=effective, success=False)

    def _no_call(self, text: str) -> StepOutcome[ToolAction]:
        self._obs = _NUDGE
        return StepOutcome(self._obs, self.format_penalty, False, effective=False, success=False)

    # ------------------------------------------------------------ the editor
    def _edit(self, args: dict[str, Any]) -> str:
        path, command = str(args["path"]).strip(), str(args["command"])
        problem = _check_path(path)
        if problem is not None:
            raise EditError(f"{path!r}: {problem}")
        if command == "view":
            return self._view(path, args.get("view_range"))
        if command == "create":
            if "file_text" not in args:
                raise EditError("command 'create' needs file_text: the complete content of the file")
            text = str(args["file_text"])
            self._write(path, text)
            return f"Wrote {path} ({text.count(chr(10))} lines, {len(text)} characters)."
        if "old_str" not in args:
            raise EditError("command 'str_replace' needs old_str (the exact text to replace) and new_str")
        old, new = str(args["old_str"]), str(args.get("new_str", ""))
        edited, line = replace_once(self._read(path), old, new, path)
        self._write(path, edited)
        return f"Edited {path}. The lines around the edit:\n{snippet(edited, line, new)}"

    def _read(self, path: str) -> str:
        try:
            return self._ensure_executor().read_file(path)
        except (OSError, ValueError) as e:  # the workspace refuses the path (outside it, not a regular file, ...)
            if isinstance(e, FileNotFoundError) or getattr(e, "reason", "") == "no such file":  # local, sandbox
                raise EditError(f"no file {path} (command 'create' makes one)") from e
            raise EditError(f"cannot read {path}: {e}") from e

    def _write(self, path: str, text: str) -> None:
        try:
            self._ensure_executor().write_file(path, text)
        except (OSError, ValueError) as e:  # a path the workspace refuses: the agent's mistake, not an error
            raise EditError(f"cannot write {path}: {e}") from e

    def _view(self, path: str, view_range: list[int] | None) -> str:
        try:
            text = self._read(path)
        except EditError:
            listing = self._ensure_executor().run(
                f"cd {shlex.quote(path)} 2>/dev/null && find . -mindepth 1 -maxdepth 2 -not -path '*/.*' | sort", 10.0
            )
            if listing.exit_code != 0 or listing.timed_out:
                raise
            names = [line.removeprefix("./") for line in listing.stdout.splitlines()]
            more = f"\n... and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else ""
            return f"Files in {path} (two levels deep):\n" + "\n".join(names[:_MAX_LISTED]) + more
        shown = numbered(text, view_range)
        if len(shown) > self.max_output_chars:
            cut = shown[: self.max_output_chars].rpartition("\n")[0]
            shown = f"{cut}\n[... cut at {self.max_output_chars} characters: give view_range to see more ...]"
        return shown

    # ------------------------------------------------------------ public API
    def tool_examples(self) -> list[ToolCall]:
        """One valid call of each tool in the current episode (none before ``reset``)."""
        if self.task is None:
            return []
        path = sorted(self.task.files)[0]
        return [
            ToolCall("example-bash", "bash", {"command": "ls"}),
            ToolCall("example-view", "str_replace_editor", {"command": "view", "path": path}),
            ToolCall("example-submit", "submit", {}),
        ]

    def action_candidates(self) -> list[str]:
        """None: this env's actions are tool calls (:meth:`tool_examples`), not answer text."""
        return []

    def reference_calls(self) -> list[ToolCall]:
        """Calls that apply the current task's reference fix (see :func:`reference_calls`)."""
        if self.task is None:
            raise EnvError("reset() first: there is no current task")
        return reference_calls(self.task)
