"""SWE-v0: task generation, grading, the loader, and the env's contract inside real sandboxes.

SWE-v0 is tagged ``slow`` (it starts a sandbox), so the generic conformance test skips it; the
equivalent checks live here. Sandbox tests run on the process backend, and on Docker (marked
``docker``) when a daemon answers and the image is built. Every env is closed: its sandbox stops.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import rockroll.envhub as envhub
from rockroll.envs.errors import EnvConfigError, EnvError
from rockroll.envs.swe import SWEEnv, generated_tasks, grade, load_task_file, parse_test_report
from rockroll.envs.swe.env import Bash, Edit, Submit
from rockroll.envs.swe.executor import ExecutorError, LocalExecutor
from rockroll.envs.swe.generate import _module_tasks, problem_statement, run_tests
from rockroll.envs.swe.mutate import Mutation, apply_mutation, mutations
from rockroll.envs.swe.tasks import SWETask, TaskFileError, runner_source

REQUIRED_INFO = {"action_is_valid", "action_is_effective", "success"}


def _docker_problem() -> str | None:
    try:
        from rockroll.sandbox.base import DEFAULT_IMAGE
        from rockroll.sandbox.docker_backend import DockerBackend

        return None if DockerBackend().has_image(DEFAULT_IMAGE) else f"image {DEFAULT_IMAGE} is not built"
    except Exception as e:  # noqa: BLE001 - any reason means: no Docker here
        return str(e)


@pytest.fixture(params=["process", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker" and (why := _docker_problem()):
        pytest.skip(f"no Docker: {why}")
    return request.param


@pytest.fixture
def make_env(backend: str) -> Iterator:
    envs: list[SWEEnv] = []
    yield lambda **kwargs: envs.append(SWEEnv(backend=backend, **kwargs)) or envs[-1]
    for env in envs:
        env.close()


def _act(answer: str) -> str:
    return f"Let me think. <answer>{answer}</answer>"


# --------------------------------------------------------------- mutation and generation
OPERATOR_CASES = [
    ("x = a < b\n", "compare", "a <= b"), ("x = a and b\n", "boolop", "a or b"), ("x = a + b\n", "arith", "a - b"),
    ("x = 3\n", "off_by_one", "4"), ("x = 3\n", "off_by_one", "2"), ("x = not a\n", "negation", "a"),
    ("for i in range(n):\n    pass\n", "range_bound", "range(n + 1)"),
    ("def f():\n    return True\n", "return_flip", "False"),
]  # fmt: skip


def test_each_operator_makes_its_mutant() -> None:
    for source, operator, new in OPERATOR_CASES:
        found = [m for m in mutations(source) if m.operator == operator and m.new == new]
        assert found, (operator, [m.description for m in mutations(source)])
        buggy = apply_mutation(source, found[0])
        assert buggy != source and new in buggy


def test_mutations_respect_precedence_and_skip_docstrings() -> None:
    source = 'def f(a, b, c):\n    """Doc 1."""\n    return c - a * b\n'
    for m in mutations(source):
        compile(apply_mutation(source, m), "<m>", "exec")
        assert "Doc 1." in apply_mutation(source, m)
    assert any(m.new == "(a + b)" for m in mutations(source)), "a*b -> a+b must keep its grouping"
    with pytest.raises(ValueError):
        apply_mutation("x = 1\n", Mutation("off_by_one", 1, 4, 5, "2", "3"))


def test_runner_reports_call_expected_and_got() -> None:
    files = {"m.py": "def sq(x):\n    return x + x\n", "test_m.py": "from m import sq\n\ndef test_sq():\n    assert sq(3) == 9\n"}  # fmt: skip
    results = run_tests(files)
    assert results is not None and results[0]["outcome"] == "FAILED"
    detail = results[0]["detail"]
    assert (detail["call"], detail["got"], detail["expected"]) == ("sq(3)", "6", "9")
    assert "`sq(3)` returns `6`, but `9` is expected" in problem_statement("m", results)


def test_shipped_tasks_match_a_fresh_generation() -> None:
    shipped = [t for t in generated_tasks() if t.meta["module"] == "stack_queue"]
    fresh = _module_tasks("stack_queue", 12, io.StringIO())
    assert [t.task_id for t in shipped] == [t["task_id"] for t in fresh]
    assert [t.problem_statement for t in shipped] == [t["problem_statement"] for t in fresh]
    assert [t.fail_to_pass for t in shipped] == [tuple(t["fail_to_pass"]) for t in fresh]


def test_generated_tasks_are_many_varied_and_consistent() -> None:
    tasks = generated_tasks()
    assert len(tasks) >= 50
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert len({t.meta["module"] for t in tasks}) >= 8
    assert len({t.meta["operator"] for t in tasks}) >= 5
    for t in tasks:
        assert t.fail_to_pass and not set(t.fail_to_pass) & set(t.pass_to_pass)
        module_file = f"{t.meta['module']}.py"
        assert t.files[module_file] != t.reference_files[module_file]
        assert module_file in t.problem_statement and t.test_files


# ------------------------------------------------------------------- grading and loading
def test_parse_report_and_grade_with_partial_credit() -> None:
    out = parse_test_report("PASSED t.py::a\nFAILED t.py::b - boom\nnoise\nERROR t.py::c\n")
    assert out == {"t.py::a": "PASSED", "t.py::b": "FAILED", "t.py::c": "ERROR"}
    task = SWETask("t", "p", {}, "true", fail_to_pass=("t.py::a", "t.py::b"), pass_to_pass=("t.py::d",))
    outcomes = {"t.py::a": "PASSED", "t.py::d": "PASSED"}
    assert grade(task, outcomes).reward == 0.0
    assert grade(task, outcomes, partial_credit=True).reward == 0.5
    broken = {"t.py::a": "PASSED"}  # a pass-to-pass test is missing: it counts as failed
    assert grade(task, broken, partial_credit=True).reward == 0.0
    full = grade(task, {**outcomes, "t.py::b": "PASSED"}, partial_credit=True)
    assert full.reward == 1.0 and full.resolved


def _write_task_file(tmp_path: Path, **overrides) -> Path:
    rec = {
        "instance_id": "demo-1",
        "problem_statement": "add() and mul() are both wrong",
        "repo_snapshot": {
            "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n",
            "test_calc.py": "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
            "run_tests.py": runner_source(),
        },
        "test_command": "python3 -I -B run_tests.py",
        "FAIL_TO_PASS": json.dumps(["test_calc.py::test_add", "test_calc.py::test_mul"]),  # SWE-bench style
        "reference_files": {"calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"},
    }
    rec.update(overrides)
    (tmp_path / "tasks.jsonl").write_text(json.dumps(rec) + "\n")
    return tmp_path / "tasks.jsonl"


def test_task_file_loader_reads_snapshots_and_repo_dirs(tmp_path: Path) -> None:
    (task,) = load_task_file(_write_task_file(tmp_path))
    assert task.fail_to_pass == ("test_calc.py::test_add", "test_calc.py::test_mul")
    for rel in ("repo/pkg/a.py", "repo/.git/HEAD"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    rec = {"instance_id": "d", "problem_statement": "p", "repo_dir": "repo", "test_command": "t", "FAIL_TO_PASS": ["x"]}
    (tmp_path / "f.json").write_text(json.dumps({"tasks": [rec]}))
    (task,) = load_task_file(tmp_path / "f.json")
    assert task.files == {"pkg/a.py": "x = 1\n"}


@pytest.mark.parametrize(
    "overrides",
    [{"FAIL_TO_PASS": []}, {"test_command": ""}, {"repo_snapshot": {"../evil.py": "x"}}, {"FAIL_TO_PASS": "not json"}],
)
def test_bad_task_files_raise_config_errors(tmp_path: Path, overrides: dict) -> None:
    with pytest.raises(TaskFileError) as err:
        load_task_file(_write_task_file(tmp_path, **overrides))
    assert err.value.param == "task_file" and isinstance(err.value, EnvConfigError)
    with pytest.raises(TaskFileError):
        load_task_file(tmp_path / "missing.json")


# --------------------------------------------------------------------- env configuration
BAD_KWARGS = [
    ({"backend": "vm"}, "backend"), ({"partial_credit": 1}, "partial_credit"), ({"task_ids": ["no-such"]}, "task_ids"),
    ({"task_ids": "roman-00"}, "task_ids"), ({"task_file": 3}, "task_file"), ({"task_file": "/no/t.json"}, "task_file"),
    ({"max_output_chars": 10}, "max_output_chars"), ({"command_timeout_s": 0}, "command_timeout_s"),
    ({"command_timeout_s": True}, "command_timeout_s"), ({"format_penalty": float("nan")}, "format_penalty"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "param"), BAD_KWARGS)
def test_invalid_kwargs_raise_env_config_error(kwargs: dict, param: str) -> None:
    with pytest.raises(EnvConfigError) as err:
        envhub.make("SWE-v0", **kwargs)
    assert err.value.param == param


def test_action_parsing_and_registration() -> None:
    spec = envhub.spec("SWE-v0")
    assert spec.supports_fork is False and "slow" in spec.tags
    env = SWEEnv(backend="process")  # no sandbox starts before reset
    assert env._parse_action("submit") == Submit()
    assert env._parse_action("bash:  ls -la ") == Bash("ls -la")
    assert env._parse_action("edit: a/b.py\nx = 1") == Edit("a/b.py", "x = 1\n")
    assert env._parse_action("EDIT: c.py\n") == Edit("c.py", "")
    bad = ("bash:", "bash: ", "edit: x.py", "edit: ../x.py\n1", "edit: /etc/passwd\n1", "edit:\nx", "rm -rf /", "", "x")  # fmt: skip
    for text in bad:
        assert env._parse_action(text) is None, text
    assert "bash: ls" in env.action_candidates() and "submit" in env.action_candidates()
    env.close()


# -------------------------------------------------------------------- env in a sandbox
def test_reset_and_step_follow_the_contract(make_env) -> None:
    env = make_env()
    assert "bash" in env.system_prompt() and "submit" in env.system_prompt()
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and "Bug report" in obs and REQUIRED_INFO <= set(info)
    json.dumps(info)
    for answer in ("bash: ls", "bash: python3 run_tests.py", "edit: notes.txt\nhello", "bash: cat notes.txt", "submit"):
        obs, reward, terminated, truncated, info = env.step(_act(answer))
        assert isinstance(obs, str) and isinstance(reward, float)
        assert isinstance(terminated, bool) and isinstance(truncated, bool) and truncated is False
        assert REQUIRED_INFO <= set(info) and info["action_is_valid"] is True
        json.dumps(info)
    assert terminated and reward == 0.0 and info["success"] is False
    env.reset(seed=1)
    for answer in env.action_candidates()[:-1]:  # every sample but submit, whatever the image has
        obs, reward, terminated, _, info = env.step(_act(answer))
        assert info["action_is_valid"] and not terminated and "[exit code" in obs
    assert env.action_candidates()[-1] == "submit"


def test_edited_tests_and_workspace_modules_cannot_fool_the_grader(make_env) -> None:
    env = make_env()
    env.reset(options={"task_id": "roman-00"})
    env.step(_act("edit: test_roman.py\ndef test_nothing():\n    pass\n"))  # editing the tests does not help
    obs, reward, terminated, _, info = env.step(_act("submit"))
    assert terminated and reward == 0.0 and not info["resolved"]
    env.reset(options={"task_id": "roman-00"})
    env.step(_act("edit: json.py\nraise SystemExit('hijacked')\n"))
    env.step(_act("edit: traceback.py\nraise SystemExit('hijacked')\n"))
    for answer in env.reference_solution():
        env.step(_act(answer))
    obs, reward, *_ = env.step(_act("submit"))
    assert reward == 1.0, obs


def test_same_seed_same_task_and_observations(make_env) -> None:
    a, b = make_env(), make_env()
    for seed in (0, 7, 123):
        assert a.reset(seed=seed) == b.reset(seed=seed)
        assert a.step(_act("bash: python3 run_tests.py"))[0] == b.step(_act("bash: python3 run_tests.py"))[0]
    ids = {a.reset(seed=s)[1]["task_id"] for s in range(12)}
    assert len(ids) > 5, "different seeds should pick different tasks"
    assert a.reset(options={"task_id": "roman-00"})[1]["task_id"] == "roman-00"
    with pytest.raises(EnvConfigError):
        a.reset(options={"task_id": "nope"})


def test_bad_actions_give_feedback_never_exceptions(make_env) -> None:
    env = make_env(format_penalty=-0.25)
    env.reset(seed=1)
    bad = ["no tags at all", "<answer></answer>", "<answer>bash:</answer>", "<answer>edit: x.py</answer>",
           "<answer>edit: ../../etc/passwd\nroot</answer>", "<answer>edit: /tmp/x\n1</answer>", "<answer>dance</answer>"]  # fmt: skip
    for text in bad:
        obs, reward, terminated, truncated, info = env.step(text)
        assert reward == -0.25 and not terminated and info["action_is_valid"] is False, text
        assert obs.startswith("Invalid action:") and "<answer>bash:" in obs, text
    # well-formed actions the workspace refuses are the agent's problem, not errors
    env.step(_act("bash: mkdir adir && ln -s /etc escape"))
    for answer in ("edit: adir\nx", "edit: escape/passwd\nx"):
        obs, reward, terminated, _, info = env.step(_act(answer))
        assert info["action_is_valid"] is True and info["action_is_effective"] is False and not terminated
        assert obs.startswith("Could not write")
    obs, *_ = env.step(_act("bash: exit 3"))
    assert "[exit code 3]" in obs


def test_no_fork_max_steps_and_close_through_envhub(backend: str) -> None:
    env = envhub.make("SWE-v0", backend=backend, max_steps=2)
    try:
        env.reset(seed=0)
        with pytest.raises(EnvError, match="cannot be forked"):
            env.get_state()
        snapshot = {"format": 1, "env": "SWEEnv", "rng": {}, "data": {}, "needs_reset": False, "success": False}
        with pytest.raises(EnvError):
            env.unwrapped.set_state(snapshot)
        assert env.step(_act("bash: ls"))[3] is False
        assert env.step(_act("bash: ls"))[3] is True  # MaxSteps owns truncation
        env.reset(seed=0)
        ex = env.unwrapped._executor
        ex._backend.stop(ex._handle)  # the sandbox dies mid-episode: an infrastructure error...
        with pytest.raises(ExecutorError):
            env.step(_act("bash: ls"))
        assert env.reset(seed=0)[1]["task_id"]  # ...and the next reset starts a fresh sandbox
        workdir = env.unwrapped._executor._handle.extra.get("dir")
    finally:
        env.close()
        env.close()  # idempotent
    assert env.unwrapped._executor is None
    assert not workdir or not Path(workdir).exists(), "the sandbox's directory must be gone"


def test_agent_commands_never_touch_host_files(make_env, backend: str, tmp_path: Path) -> None:
    host_file = tmp_path / "host.txt"
    host_file.write_text("original\n")
    probe = Path.home() / f".rockroll-swe-probe-{uuid.uuid4().hex}"
    env = make_env()
    env.reset(seed=0)
    try:
        cmd = f"echo pwned > {host_file}; echo pwned >> {host_file}; touch {probe}; rm -f {host_file}; ls {tmp_path}"
        obs, *_ = env.step(_act(f"bash: {cmd}"))
        assert host_file.read_text() == "original\n", obs
        assert not probe.exists(), obs
        obs, *_ = env.step(_act("bash: pwd"))
        assert obs.splitlines()[1] != os.getcwd()
    finally:
        probe.unlink(missing_ok=True)
    sock = "/var/run/docker.sock"  # reaching the host's Docker daemon is reaching the host
    obs, *_ = env.step(
        _act(f"bash: python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('{sock}')\" && echo REACHED")
    )
    assert "\nREACHED" not in obs


def test_output_is_truncated_with_a_note_and_timeouts_are_results(make_env) -> None:
    env = make_env(max_output_chars=500, command_timeout_s=1.0)
    env.reset(seed=0)
    obs, *_ = env.step(_act("bash: python3 -c \"print('x' * 5000)\""))
    assert "output truncated: " in obs and len(obs) < 800
    obs, reward, terminated, _, info = env.step(_act("bash: sleep 5; echo never"))
    assert "timed out after 1s" in obs and "\nnever" not in obs and not terminated
    assert info["action_is_effective"] is False


def test_reset_option_test_timeout_s_cuts_off_slow_test_runs(make_env) -> None:
    env = make_env()
    own = next(t.test_timeout_s for t in env.tasks if t.task_id == "roman-00")
    # the fast run's explicit limit is half the task's own (60 s): a fixed 20 s did not fit at load ~10
    for limit, slow in ((1.0, True), (own / 2, False), (None, False)):
        options = {"task_id": "roman-00"} | ({} if limit is None else {"test_timeout_s": limit})
        env.reset(options=options)
        assert env.test_timeout_s == (limit or env.task.test_timeout_s)
        for answer in env.reference_solution():  # the fix; the slow one also sleeps at import
            path, _, content = answer.partition("\n")
            env.step(_act(f"{path}\nimport time\ntime.sleep(30)\n{content}" if slow else answer))
        obs, reward, terminated, _, info = env.step(_act("submit"))
        assert terminated and info["tests_timed_out"] is slow and reward == (0.0 if slow else 1.0)
        if slow:  # killed at the limit: scored 0, the agent's outcome
            assert 0.9 <= info["test_run_s"] < 10 and "timed out after 1s" in obs and not info["resolved"]
        else:
            assert 0 < info["test_run_s"] < env.test_timeout_s


@pytest.mark.parametrize("value", [0, -1.0, "5", True, float("nan"), float("inf"), 60.5, [1]])
def test_bad_test_timeout_options_raise_env_config_error(value: object) -> None:
    env = SWEEnv(backend="process")  # checked before the sandbox starts
    with pytest.raises(EnvConfigError, match="test_timeout_s") as err:
        env.reset(options={"task_id": "roman-00", "test_timeout_s": value})
    assert err.value.param == "options" and env._executor is None
    env.close()


def test_reset_option_test_timeouts_applies_the_chosen_tasks_entry() -> None:
    env = SWEEnv(backend="process")  # the limit is set at reset, before any command runs
    try:
        own = env.tasks[0].test_timeout_s
        table = {env.tasks[0].task_id: 1.5, "no-such-task": 0.1}
        env.reset(options={"task_id": env.tasks[0].task_id, "test_timeouts": table})
        assert env.test_timeout_s == 1.5
        env.reset(options={"task_id": env.tasks[1].task_id, "test_timeouts": table})
        assert env.test_timeout_s == env.tasks[1].test_timeout_s  # no entry: the task's own limit
        env.reset(options={"task_id": env.tasks[0].task_id, "test_timeouts": {env.tasks[0].task_id: own * 10}})
        assert env.test_timeout_s == own  # capped at the task's own limit
    finally:
        env.close()


@pytest.mark.parametrize("table", [[1.0], {"roman-00": 0}, {"roman-00": "2"}, {1: 2.0}, {"roman-00": float("nan")}])
def test_bad_test_timeouts_tables_raise_env_config_error(table: object) -> None:
    env = SWEEnv(backend="process")
    with pytest.raises(EnvConfigError, match="test_timeouts") as err:
        env.reset(options={"task_id": "roman-00", "test_timeouts": table})
    assert err.value.param == "options"
    env.close()


def test_stale_or_planted_bytecode_cannot_shadow_the_sources(make_env) -> None:
    task = next(t for t in generated_tasks() if t.meta["operator"] == "off_by_one" and t.meta["module"] != "roman")
    env = make_env()
    env.reset(options={"task_id": task.task_id})
    obs, *_ = env.step(
        _act(f"bash: python3 -c \"import py_compile; py_compile.compile('{task.meta['module']}.py')\"; ls *")
    )
    assert "__pycache__" in obs
    for answer in env.reference_solution():  # same size, same second: only the mtime/size check guards the pyc
        env.step(_act(answer))
    obs, *_ = env.step(_act("bash: python3 run_tests.py"))
    assert "0 failed" in obs
    assert env.step(_act("submit"))[1] == 1.0


def test_partial_credit_and_task_file_episode(make_env, tmp_path: Path) -> None:
    path = _write_task_file(tmp_path)
    half_fix = "edit: calc.py\ndef add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"
    for partial, want in ((True, 0.5), (False, 0.0)):
        env = make_env(task_file=str(path), partial_credit=partial)
        env.reset(seed=0)
        env.step(_act(half_fix))
        _, reward, terminated, _, info = env.step(_act("submit"))
        assert terminated and reward == want and info["fail_to_pass"] == "1/2"
    env.reset(seed=0)
    for answer in env.reference_solution() + ["submit"]:
        _, reward, *_ = env.step(_act(answer))
    assert reward == 1.0


@pytest.mark.slow
def test_reference_fix_scores_one_and_unchanged_code_zero_on_every_task(backend: str) -> None:
    ids = [t.task_id for t in generated_tasks()[:: 2 if backend == "process" else 13]]
    assert backend != "process" or len(ids) >= 50
    env = SWEEnv(backend=backend)
    try:
        for task_id in ids:
            env.reset(options={"task_id": task_id})
            for answer in env.reference_solution():
                assert env.step(_act(answer))[4]["action_is_effective"]
            _, reward, terminated, _, info = env.step(_act("submit"))
            assert (reward, terminated, info["success"]) == (1.0, True, True), (task_id, info)
            env.reset(options={"task_id": task_id})
            _, reward, terminated, _, info = env.step(_act("submit"))
            assert (reward, terminated, info["success"]) == (0.0, True, False), (task_id, info)
    finally:
        env.close()


def test_local_fallback_runs_in_a_temp_dir_and_cleans_up(tmp_path: Path) -> None:
    ex = LocalExecutor()
    root = ex.root
    try:
        ex.reset({"a.txt": "hi\n"})
        assert ex.run("cat a.txt; pwd", 10).stdout.splitlines() == ["hi", root]
        if ex.isolation == "bwrap":
            assert (
                ex.run(f"echo x > {tmp_path / 'host.txt'}", 10).exit_code != 0 and not (tmp_path / "host.txt").exists()
            )
            assert ex.run("ls /var/run/docker.sock", 10).exit_code != 0  # daemon sockets are hidden
        with pytest.raises(ValueError):
            ex.write_file("../escape.txt", "x")
    finally:
        ex.close()
    assert not os.path.exists(root)
