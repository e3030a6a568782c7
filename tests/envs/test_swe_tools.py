"""SWETools-v0, SWE-v0 with tool calls: the expert fixes tasks through str_replace_editor and submit, bad calls
are error results and the episode goes on, paths stay in the workspace, ``check_env`` passes, SWE-v0's text
form is unchanged. Sandboxes run on the process backend; every env is closed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import rockroll.envhub as envhub
from rockroll.envs import check_env
from rockroll.envs.errors import EnvError
from rockroll.envs.experts import expert_for
from rockroll.envs.swe import SWEEnv, SWEToolEnv, generated_tasks
from rockroll.envs.swe.editor import EditError, numbered, occurrences, reference_edit, replace_once
from rockroll.envs.swe.executor import ExecutorError
from rockroll.envs.tools import ToolAction, ToolCall, check_tools


@pytest.fixture
def make_env() -> Iterator:
    envs: list = []

    def make(**kwargs):
        envs.append(envhub.make("SWETools-v0", backend="process", **kwargs))
        return envs[-1]

    yield make
    for env in envs:
        env.close()


def _turn(*calls: tuple[str, dict]) -> ToolAction:
    return ToolAction("", tuple(ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)))


def _edit(**args) -> ToolAction:
    return _turn(("str_replace_editor", args))


def _result(info: dict, i: int = 0) -> tuple[str, bool]:
    r = info["tool_results"][i]
    return r["content"], r["error"]


# ------------------------------------------------------------------------------ the editor's text side
def test_reference_edit_is_the_smallest_unique_replacement() -> None:
    before = "a\nx = 1\nb\nx = 1\nc\n"
    edit = reference_edit(before, "a\nx = 1\nb\nx = 2\nc\n")
    assert edit == {"command": "str_replace", "old_str": "b\nx = 1\n", "new_str": "b\nx = 2\n"}  # grown to be unique
    assert replace_once(before, edit["old_str"], edit["new_str"], "f.py")[0] == "a\nx = 1\nb\nx = 2\nc\n"
    assert reference_edit(None, "new\n") == {"command": "create", "file_text": "new\n"}
    assert reference_edit("x\nx\n", "x\n") == {"command": "str_replace", "old_str": "x\nx\n", "new_str": "x\n"}
    assert reference_edit("", "y\n")["command"] == "create"  # no span to replace: the whole file
    assert occurrences("aaa", "aa") == 2 and occurrences("abc", "d") == 0


def test_numbered_views_and_replace_errors() -> None:
    text = "one\ntwo\nthree\n"
    assert numbered(text) == "     1\tone\n     2\ttwo\n     3\tthree"
    assert numbered(text, [2, -1]) == "     2\ttwo\n     3\tthree"
    for bad in ([0, 2], [3, 2], [1, 9]):
        with pytest.raises(EditError, match="outside the file's 3 lines"):
            numbered(text, bad)
    with pytest.raises(EditError, match="not found"):
        replace_once(text, "four", "4", "f.py")
    with pytest.raises(EditError, match="more than once"):
        replace_once("x\nx\n", "x", "y", "f.py")


# ------------------------------------------------------------------------------ the env
def test_registration_tools_and_prompt() -> None:
    spec = envhub.spec("SWETools-v0")
    assert spec.supports_fork is False and {"tools", "slow", "sandbox"} <= set(spec.tags)
    env = SWEToolEnv(backend="process")  # no sandbox before reset
    check_tools(env.tools)
    assert [t.name for t in env.tools] == ["bash", "str_replace_editor", "submit"]
    prompt = env.system_prompt()
    assert "str_replace_editor" in prompt and "<answer>" not in prompt
    assert env.action_candidates() == [] and env.tool_examples() == []
    with pytest.raises(EnvError, match="reset"):
        env.reference_calls()


def test_check_env_passes(make_env) -> None:
    # determinism is checked below: the submit info reports the test run's wall time (test_run_s)
    check_env(make_env(), make=make_env, skip=("determinism",))


def test_same_seed_same_episode_but_the_wall_time(make_env) -> None:
    def play(env) -> str:
        trace = [env.reset(seed=4)]
        for call in env.unwrapped.tool_examples():
            trace.append(env.step(ToolAction("", (call,))))
        return re.sub(r'"test_run_s": [0-9.e-]+', "", json.dumps(trace, default=str))

    assert play(make_env()) == play(make_env())


@pytest.mark.parametrize("task_id", [t.task_id for t in generated_tasks()[::17]])
def test_expert_fixes_tasks_through_tool_calls(make_env, task_id: str) -> None:
    env = make_env()
    env.reset(options={"task_id": task_id})
    expert, turns = expert_for(env), []
    while True:
        turn = expert()
        assert isinstance(turn, ToolAction) and len(turn.calls) == 1
        turns.append(turn.calls[0])
        _obs, reward, terminated, truncated, info = env.step(turn)
        assert info["tool_results"][0]["error"] is False, info["tool_results"]
        if terminated or truncated:
            break
    assert terminated and reward == 1.0 and info["success"] and info["resolved"]
    assert [c.name for c in turns] == ["str_replace_editor"] * (len(turns) - 1) + ["submit"]
    assert [c.arguments["command"] for c in turns[:-1]] == ["view", "str_replace"]  # a unique span, not the file


def test_editor_views_creates_and_replaces(make_env) -> None:
    env = make_env(max_output_chars=300)
    env.reset(options={"task_id": "roman-00"})
    _obs, _r, _t, _tr, info = env.step(_edit(command="view", path="."))
    listing, error = _result(info)
    assert not error and "roman.py" in listing and "run_tests.py" in listing
    _obs, _r, _t, _tr, info = env.step(_edit(command="view", path="roman.py", view_range=[1, 3]))
    assert re.match(r"\s+1\t", _result(info)[0]) and len(_result(info)[0].splitlines()) == 3
    _obs, _r, _t, _tr, info = env.step(_edit(command="view", path="roman.py"))
    assert "give view_range to see more" in _result(info)[0]  # cut at max_output_chars
    steps = [
        _edit(command="create", path="pkg/notes.txt", file_text="alpha\nbeta\n"),
        _edit(command="str_replace", path="pkg/notes.txt", old_str="beta", new_str="gamma"),
        _turn(("bash", {"command": "cat pkg/notes.txt"})),
    ]
    for turn in steps:
        obs, reward, terminated, _tr, info = env.step(turn)
        assert not _result(info)[1] and reward == 0.0 and not terminated and info["action_is_effective"]
    assert "alpha\ngamma" in obs and "[exit code 0]" in obs
    _obs, _r, _t, _tr, info = env.step(_edit(command="str_replace", path="pkg/notes.txt", old_str="gamma\n"))
    assert "Edited pkg/notes.txt" in _result(info)[0]  # no new_str: the text is deleted
    assert env.step(_turn(("bash", {"command": "cat pkg/notes.txt"})))[0].splitlines()[1] == "alpha"


def test_bad_calls_are_error_results_and_the_episode_goes_on(make_env, tmp_path: Path) -> None:
    env = make_env(format_penalty=-0.25)
    env.reset(options={"task_id": "roman-00"})
    env.step(_turn(("bash", {"command": "ln -s /etc/passwd leak && ln -s /etc etc_dir && echo x > twice.txt"})))
    host = tmp_path / "pwned.py"
    schema_mistakes = [  # (turn, count, said): cost format_penalty
        (_turn(("edit", {"path": "roman.py"})), "unknown_tools", "unknown tool 'edit'"),
        (_turn(("bash", {})), "bad_arguments", "'command' is a required property"),
        (_edit(command="delete", path="roman.py"), "bad_arguments", "is not one of"),
        (_edit(command="view", path="roman.py", mode=1), "bad_arguments", "Additional properties"),
    ]
    for turn, count, said in schema_mistakes:
        obs, reward, terminated, truncated, info = env.step(turn)
        assert reward == -0.25 and not terminated and not truncated and info["action_is_valid"] is False
        assert info[count] == 1 and _result(info)[1] is True and said in _result(info)[0], (said, info)
    tool_mistakes = [  # (arguments, said): error results, no penalty (like the text form's refused edit)
        ({"command": "str_replace", "path": "roman.py", "old_str": "no such text", "new_str": "x"}, "not found"),
        ({"command": "str_replace", "path": "twice.txt", "old_str": "", "new_str": "y"}, "old_str is empty"),
        ({"command": "str_replace", "path": "roman.py", "old_str": "def", "new_str": "x"}, "more than once"),
        ({"command": "str_replace", "path": "roman.py"}, "needs old_str"),
        ({"command": "create", "path": "new.py"}, "needs file_text"),
        ({"command": "view", "path": "missing.py"}, "no file missing.py"),
        ({"command": "str_replace", "path": "missing.py", "old_str": "a", "new_str": "b"}, "no file missing.py"),
        ({"command": "view", "path": "../../etc/passwd"}, "without '..'"),
        ({"command": "view", "path": "/etc/passwd"}, "relative to the repository root"),
        ({"command": "create", "path": str(host), "file_text": "pwned"}, "relative to the repository root"),
        ({"command": "create", "path": "../outside.py", "file_text": "pwned"}, "without '..'"),
        ({"command": "view", "path": "leak"}, "outside the workspace"),  # a symlink out: the sandbox refuses
        ({"command": "create", "path": "etc_dir/passwd", "file_text": "pwned"}, "outside the workspace"),
        ({"command": "view", "path": "roman.py", "view_range": [50, 10]}, "view_range"),
    ]
    for args, said in tool_mistakes:
        obs, reward, terminated, _tr, info = env.step(_edit(**args))
        content, error = _result(info)
        assert error and said in content and "EditError" in content, (args, content)
        assert reward == 0.0 and not terminated and info["tool_errors"] == 1 and not info["action_is_effective"]
    assert not host.exists()
    obs, reward, terminated, *_ = env.step("I am done, I think.")  # a turn without a call: a nudge
    assert "No tool was called" in obs and reward == -0.25 and not terminated
    obs, reward, terminated, _tr, info = env.step(_turn(("submit", {})))
    assert terminated and reward == 0.0 and info["resolved"] is False  # the bug is still there


def test_submit_ends_the_turn_and_later_calls_do_not_run(make_env) -> None:
    env = make_env()
    env.reset(options={"task_id": "roman-00"})
    calls = [*env.unwrapped.reference_calls(), ToolCall("s", "submit", {}), ToolCall("b", "bash", {"command": "ls"})]
    obs, reward, terminated, _tr, info = env.step(ToolAction("one turn", tuple(calls)))
    assert terminated and reward == 1.0 and info["resolved"] and info["tool_calls"] == len(calls)
    assert info["tool_results"][-1]["content"] == "not run: you have submitted already"
    assert "[submit] Submitted." in obs and "test_run_s" in info


def test_a_dead_sandbox_is_raised_not_scored(make_env) -> None:
    env = make_env()
    env.reset(seed=0)
    ex = env.unwrapped._executor
    ex._backend.stop(ex._handle)  # the sandbox dies mid-episode: an infrastructure error, never a tool result
    with pytest.raises(ExecutorError):
        env.step(_turn(("bash", {"command": "ls"})))
    assert env.reset(seed=0)[1]["task_id"]  # the next reset starts a fresh sandbox
    assert not env.step(_turn(("bash", {"command": "ls"})))[4]["tool_results"][0]["error"]


def test_the_text_form_is_unchanged() -> None:
    env = SWEEnv(backend="process")
    try:
        obs, _ = env.reset(options={"task_id": "roman-00"})
        assert obs.endswith("Use bash to explore and test, edit to change files, submit when done.")
        for answer in env.reference_solution():
            env.step(f"<answer>{answer}</answer>")
        assert env.step("<answer>submit</answer>")[1] == 1.0
    finally:
        env.close()
