"""SWE-v0: fix a bug in a small Python repository inside a sandbox.

* :mod:`rockroll.envs.swe.env`: the env (:class:`SWEEnv`), its actions and the reference-solution helper;
* :mod:`rockroll.envs.swe.tool_env`: ``SWETools-v0``, the same env played with tool calls (:class:`SWEToolEnv`),
  and :mod:`rockroll.envs.swe.editor`, the text side of its file editor;
* :mod:`rockroll.envs.swe.tasks`: the task type, the shipped generated tasks, the SWE-bench-style loader,
  test-report parsing and grading;
* :mod:`rockroll.envs.swe.executor`: where commands run: the executor protocol and registry, and a weaker
  local fallback (the sandbox kinds live in :mod:`rockroll.sandbox.swe_executor`);
* :mod:`rockroll.envs.swe.mutate` and :mod:`rockroll.envs.swe.generate`: bug injection and task generation;
* :mod:`rockroll.envs.swe.runner`: the stand-alone test runner copied into each task as ``run_tests.py``.
"""

from rockroll.envs.swe.env import Bash, Edit, Submit, SWEEnv, SWEForkUnsupported, reference_actions
from rockroll.envs.swe.executor import (
    EXECUTOR_KINDS,
    ExecResult,
    Executor,
    ExecutorError,
    LocalExecutor,
    UnknownExecutorError,
    make_executor,
    register_executor,
)
from rockroll.envs.swe.tasks import (
    Grade,
    SWETask,
    TaskFileError,
    generated_tasks,
    grade,
    load_task_file,
    parse_test_report,
)
from rockroll.envs.swe.tool_env import SWEToolEnv, reference_calls

__all__ = [
    "SWEEnv",
    "SWEToolEnv",
    "reference_calls",
    "Bash",
    "Edit",
    "Submit",
    "SWEForkUnsupported",
    "reference_actions",
    "Executor",
    "ExecResult",
    "ExecutorError",
    "UnknownExecutorError",
    "LocalExecutor",
    "EXECUTOR_KINDS",
    "register_executor",
    "make_executor",
    "SWETask",
    "Grade",
    "TaskFileError",
    "generated_tasks",
    "load_task_file",
    "parse_test_report",
    "grade",
]
