"""Two tokens: one owner cannot see, step or delete another's sandboxes, sessions or jobs; admins can."""

from __future__ import annotations

import pytest

from rockroll.api.server.serve_proc import ServerProc
from rockroll.client.sdk import ApiClientError, Client


def _status(fn, *args, **kwargs) -> int:
    try:
        fn(*args, **kwargs)
    except ApiClientError as e:
        return e.status
    return 200


@pytest.fixture(scope="module")
def clients(server: ServerProc):
    a, b, root = (Client(server.url, server.tokens[n]) for n in ("alice", "bob", "root"))
    yield a, b, root
    for c in (a, b, root):
        c.close()


def test_sessions_are_private(clients) -> None:
    a, b, root = clients
    sid = b.create_session("FrozenLake-v0")["id"]
    b.reset(sid, seed=0)
    for call in (
        lambda: a.get_session(sid),
        lambda: a.reset(sid, seed=0),
        lambda: a.step(sid, "<answer>Up</answer>"),
        lambda: a.fork(sid),
        lambda: a.get_state(sid),
        lambda: a.set_state(sid, {"x": 1}),
        lambda: a.actions(sid),
        lambda: a.close_session(sid),
    ):
        assert _status(call) == 404
    assert a.step_many({sid: "<answer>Up</answer>"})[0]["error"]["code"] == "session_not_found"
    assert sid not in [s["id"] for s in a.list_sessions()]
    assert sid in [s["id"] for s in b.list_sessions()]
    assert root.step(sid, "<answer>Up</answer>")["observation"]
    b.close_session(sid)


def test_sandboxes_are_private(clients) -> None:
    a, b, root = clients
    sb = b.create_sandbox()["id"]
    for call in (
        lambda: a.get_sandbox(sb),
        lambda: a.exec(sb, "true"),
        lambda: a.read_file(sb, "x"),
        lambda: a.write_file(sb, "x", b"1"),
        lambda: a.restart_sandbox(sb),
        lambda: a.delete_sandbox(sb),
    ):
        assert _status(call) == 404
    assert sb not in [s["id"] for s in a.list_sandboxes()]
    assert sb in [s["id"] for s in b.list_sandboxes()]
    assert sb in [s["id"] for s in root.list_sandboxes()]
    assert root.exec(sb, "true")["exit_code"] == 0
    b.delete_sandbox(sb)


def test_jobs_are_private(clients) -> None:
    a, b, root = clients
    job = b.create_job("eval", {"env": "FrozenLake-v0", "episodes": 1})["id"]
    for call in (lambda: a.get_job(job), lambda: a.job_logs(job), lambda: a.cancel_job(job)):
        assert _status(call) == 404
    assert job not in [j["id"] for j in a.list_jobs()]
    assert job in [j["id"] for j in root.list_jobs()]
    assert b.wait_job(job, timeout_s=60)["state"] == "succeeded"


def test_no_token_is_401(server: ServerProc) -> None:
    with Client(server.url, "") as anon:
        assert _status(anon.list_envs) == 401
        assert anon.health()["status"] == "ok"


def test_overview_pools_show_only_the_callers_sandboxes(clients) -> None:
    """Hole E (issue 35): another owner's pool members and sessions stay out of the overview."""
    a, b, root = clients
    opened = [b.create_session("FrozenLake-v0")["id"] for _ in range(2)]
    sb = b.create_sandbox()["id"]
    try:
        assert sum(p["members"] for p in b.overview()["pools"]) >= 2  # bob sees his own
        assert sum(p["sessions"] for p in b.overview()["pools"]) >= 2
        theirs = a.overview()
        assert sum(p["members"] for p in theirs["pools"]) == 0, theirs["pools"]
        assert sum(p["sessions"] for p in theirs["pools"]) == 0, theirs["pools"]
        assert theirs["totals"]["sandboxes"] == 0 and not theirs["sandboxes"] and not theirs["sessions"]
        assert sum(p["sessions"] for p in root.overview()["pools"]) >= 2  # an admin sees everyone's
    finally:
        for sid in opened:
            b.close_session(sid)
        b.delete_sandbox(sb)
