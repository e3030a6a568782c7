"""Item 8: a second ``rockroll serve`` on the same database must not touch the live server's work.

The attack: while a session of the live server is open, start another server on its database.
Before the lease, the second server adopted the first one's sandboxes and restarted them (the
session answered 410) and leaked containers.
"""

from __future__ import annotations

import subprocess

from rockroll.api.server.serve_proc import ROCKROLL, ROOT, ServerProc, scratch_dir
from rockroll.client.sdk import Client


def test_second_server_on_the_database_leaves_the_live_sessions_alone() -> None:
    srv = ServerProc(scratch_dir("second"), dev=True)
    try:
        srv.start()
        with Client(srv.url, None) as c:
            sid = c.create_session("FrozenLake-v0")["id"]
            c.reset(sid, seed=3)
            before = c.get_state(sid)
            cmd = ROCKROLL + ["serve", "--port", "0", "--backend", "process", "--db", srv.db_url, "--dev"]
            cmd += ["--sandbox-state-dir", str(srv.data_dir / "sb2")]
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
            assert out.returncode != 0, out.stdout + out.stderr
            assert "already running" in out.stdout + out.stderr
            # the live session was not restarted: same state, and it still steps
            assert c.get_state(sid) == before
            c.step(sid, "Right")
            assert c.get_session(sid)["steps"] == 1
        assert not (srv.data_dir / "sb2").exists() or not any((srv.data_dir / "sb2").rglob("*.sock"))
    finally:
        srv.cleanup()
