"""Server restarts, through real ``rockroll serve`` processes: old sessions answer 410 with the reason, after
a graceful stop as after a crash; a second server on the same database refuses to start."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest

from rockroll.api.server.serve_proc import ROCKROLL, ROOT, ServerProc, create_token, scratch_dir
from rockroll.client.sdk import ApiClientError, Client


def _lost(c: Client, session_id: str) -> ApiClientError:
    with pytest.raises(ApiClientError) as e:
        c.step(session_id, "<answer>Down</answer>")
    return e.value


@pytest.mark.slow
def test_sessions_answer_410_after_a_graceful_restart_and_after_a_crash() -> None:
    srv = ServerProc(scratch_dir("restart410"))
    token = create_token(srv.db_url, "gina")
    try:
        srv.start()
        with Client(srv.url, token) as c:
            kept = c.create_session("FrozenLake-v0")["id"]
            c.reset(kept, seed=1)
            c.step(kept, "<answer>Down</answer>")
            closed = c.create_session("FrozenLake-v0")["id"]
            c.close_session(closed)
        srv.stop()  # SIGINT: a graceful shutdown
        srv.start()
        with Client(srv.url, token) as c:
            err = _lost(c, kept)
            assert (err.status, err.code) == (410, "sandbox_lost"), err
            assert "restarted" in err.message and err.details["reason"] == "server_restart"
            assert err.details["session_id"] == kept
            with pytest.raises(ApiClientError) as e:
                c.get_session(kept)
            assert e.value.status == 410
            with pytest.raises(ApiClientError) as e:  # a session its client closed is simply gone
                c.step(closed, "<answer>Down</answer>")
            assert (e.value.status, e.value.code) == (404, "session_not_found")
            assert c.list_sessions() == []
            crashed = c.create_session("FrozenLake-v0")["id"]
            c.reset(crashed, seed=2)
        assert srv.proc is not None
        os.killpg(srv.proc.pid, signal.SIGKILL)  # a crash: nothing runs on the way out
        srv.proc.wait(timeout=30)
        srv.proc = None
        srv.start()  # at once: the dead server's lease is taken over
        with Client(srv.url, token) as c:
            crash, graceful = _lost(c, crashed), _lost(c, kept)
            assert (crash.status, crash.code, crash.details["reason"]) == (410, "sandbox_lost", "server_restart")
            assert (graceful.status, graceful.message) == (410, err.message)  # the same answer both ways
    finally:
        srv.cleanup()


def test_a_second_server_on_one_database_refuses_to_start() -> None:
    srv = ServerProc(scratch_dir("twice"))
    try:
        srv.start()
        cmd = ROCKROLL + ["serve", "--port", "0", "--backend", "process", "--db", srv.db_url, "--dev"]
        cmd += ["--sandbox-state-dir", str(srv.data_dir / "sb2")]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert out.returncode != 0
        assert "already running" in out.stdout + out.stderr, out.stdout + out.stderr
        assert srv.proc is not None and srv.proc.poll() is None  # the first one serves on
    finally:
        srv.cleanup()


@pytest.mark.parametrize("when", ["loading", "starting", "serving"])
def test_sigint_stops_serve_api_without_a_traceback(when: str) -> None:
    """SIGINT (a ^C) while the commands load, while the app starts up, or while it serves: a quiet stop."""
    for _attempt in range(3):
        proc, err = _interrupted_serve(when)
        # a ^C sent at once can land inside the interpreter's own start (importing ``site``), before any of
        # rockroll's code runs: Python itself prints that traceback, so the press is tried again
        if when != "loading" or "init_import_site" not in err:
            break
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    # 130: stopped while loading; -SIGINT: before the interpreter took the signal; 0: a graceful stop
    assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err[-2000:])


def _interrupted_serve(when: str) -> tuple[subprocess.Popen[str], str]:
    """``serve-api`` sent SIGINT at ``when``; the process (ended) and its standard error."""
    d = scratch_dir(f"sigint-{when}")
    cmd = ROCKROLL + ["serve-api", "--port", "0", "--backend", "process", "--db", f"sqlite:///{d}/rockroll.db"]
    cmd += ["--sandbox-state-dir", str(d / "sb"), "--dev"]
    env = {**os.environ, "ROCKROLL_STOP_SANDBOXES_ON_EXIT": "true"}  # handed over, its sandboxes would outlive the test
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True, env=env)  # fmt: skip
    marker = {"loading": None, "starting": "Waiting for application startup", "serving": "rockroll listening on"}[when]
    stream = proc.stdout if when == "serving" else proc.stderr
    seen = []
    try:
        while marker is not None:  # the line that says the server got that far (bounded by its output)
            line = stream.readline()  # type: ignore[union-attr]
            seen.append(line)
            if not line or marker in line:
                break
        assert marker is None or marker in seen[-1], "".join(seen)
        proc.send_signal(signal.SIGINT)
        for _press in range(3):  # a ^C can be swallowed (Python drops a KeyboardInterrupt raised in a finalizer,
            try:  # and one that lands mid-import under load): pressed again, as a user would, at most 3 times
                out, err = proc.communicate(timeout=30)
                break
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
        else:
            out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        shutil.rmtree(d, ignore_errors=True)
    return proc, err
