"""The sandbox server's way out kills its children too: a command it has just started still runs as the
server's uid (between fork and ``setpriv``) and is not yet among its running commands, yet must not outlive it."""

from __future__ import annotations

import subprocess
import sys

from rockroll.sandbox.retry import wait_until

SCRIPT = """
import os, subprocess, sys
from rockroll.sandbox.server.__main__ import _kill_agents
os.environ.pop("ROCKROLL_AGENT_UID", None)  # no agent uids: only the child scan can find it
child = subprocess.Popen(["sleep", "300"], start_new_session=True)
print(child.pid, flush=True)
sys.stdin.readline()  # the test has seen the child and its own child running
_kill_agents(max_sessions=1)  # reaps it too
print("done", flush=True)
sys.stdin.readline()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_the_way_out_kills_a_child_not_yet_an_agent() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        pid = int(proc.stdout.readline())
        assert wait_until(lambda: _alive(pid), 20), "the child did not start"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"
        assert not _alive(pid), "the child outlived the way out"
    finally:
        proc.kill()
        proc.wait(timeout=10)
