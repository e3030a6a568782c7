"""The ``code`` reward through real process sandboxes: passes, failures, and answers that misbehave.

Looping, sleeping, forking without end, filling the disk and reaching for the network are the
agent's failures (tests not passed score 0); the sandbox keeps serving afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rockroll.agentrl.rewards.code import CodeConfig, CodeReward, extract_code
from rockroll.agentrl.rewards.errors import RewardError

TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]
GOOD = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\n"


@pytest.fixture(scope="module")
def reward() -> Iterator[CodeReward]:
    r = CodeReward(CodeConfig(sandboxes=2, runs_per_sandbox=2, t_max_s=4, t_min_s=1, per_test_s=1))
    yield r
    r.close()
    assert r.manager.list() == []


def score(r: CodeReward, code: str, key: str) -> tuple[float, dict]:
    out = r("q", code, {"tests": TESTS, "task_id": key})
    return out.score, out.details


def test_extract_code_takes_the_last_block() -> None:
    assert extract_code("a\n```python\nx = 1\n```\nb\n```\ny = 2\n```") == "y = 2\n"
    assert extract_code("def f(): pass") == "def f(): pass"


def test_passing_and_partly_failing_code(reward: CodeReward) -> None:
    s, d = score(reward, GOOD, "pass")
    assert s == 1.0 and d["passed"] == 3 and not d["timed_out"]
    s, d = score(reward, "def add(a, b):\n    return a * b if a < 0 else a + b", "partial")
    assert s == pytest.approx(2 / 3) and list(d["errors"]) == [1]
    s, d = score(reward, "def add(a, b) return a", "syntax")
    assert s == 0.0 and "SyntaxError" in d["errors"][0]


def test_printing_pass_does_not_pass(reward: CodeReward) -> None:
    s, d = score(reward, "import os\nprint('PASS 0 1')\nos._exit(0)", "fake")
    assert s == 0.0 and d["passed"] == 0


def test_a_loop_is_stopped_per_test_and_the_others_still_count(reward: CodeReward) -> None:
    code = "def add(a, b):\n    while a == 2:\n        pass\n    return a + b"
    s, d = score(reward, code, "loop-one")
    assert s == pytest.approx(2 / 3) and "TimeoutError" in d["errors"][2]


def test_a_run_past_its_limit_is_killed_and_scores_zero(reward: CodeReward) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(60)\ndef add(a, b): return a + b"
    s, d = score(reward, code, "sleep")
    assert s == 0.0 and d["timed_out"] and d["timeout_s"] == 4.0 and d["run_s"] < 10


def test_the_adaptive_timeout_shrinks_after_a_correct_run(reward: CodeReward) -> None:
    assert score(reward, GOOD, "adapt")[1]["timeout_s"] == 4.0  # t_max_s before any correct run
    s, d = score(reward, "import time\ntime.sleep(0.5)\nwhile True: pass", "adapt")
    assert s == 0.0 and d["timed_out"] and d["timeout_s"] == 1.0  # t_min_s once a correct run is known
    assert reward.metric_counts()["adaptive_cutoffs"] >= 1


def test_a_fork_bomb_is_contained(reward: CodeReward) -> None:
    bomb = "import os\ndef add(a, b):\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass"
    s, _ = score(reward, bomb, "fork")
    assert s == 0.0
    assert score(reward, GOOD, "after-fork")[0] == 1.0  # the sandbox still serves


def test_filling_the_disk_or_memory_fails_the_tests(reward: CodeReward) -> None:
    disk = "def add(a, b):\n    with open('big', 'wb') as f:\n        while True:\n            f.write(b'x' * 2**20)"
    s, d = score(reward, disk, "disk")
    assert s == 0.0 and "File too large" in d["errors"][0]
    s, d = score(reward, "x = bytearray(8 * 2**30)\ndef add(a, b): return a + b", "mem")
    assert s == 0.0 and "MemoryError" in d["errors"][0]


def test_no_network_and_no_writes_outside_the_workspace(reward: CodeReward) -> None:
    net = "import socket\ndef add(a, b):\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    return a + b"
    s, d = score(reward, net, "net")
    assert s == 0.0 and "unreachable" in d["errors"][0].lower()
    escape = "def add(a, b):\n    open('/etc/rr_escape', 'w').write('x')\n    return a + b"
    s, d = score(reward, escape, "escape")
    assert s == 0.0 and ("Read-only" in d["errors"][0] or "Permission" in d["errors"][0])


def test_an_empty_test_list_is_an_error_not_a_zero(reward: CodeReward) -> None:
    with pytest.raises(RewardError):
        reward("q", GOOD, {"tests": []})
