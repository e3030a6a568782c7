"""Item 3: one owner stalls the control plane with long execs, FIFO reads or huge files.

Attacks: bob floods his sandbox with more concurrent long execs than the server has threads for
its sync routes (before the fix, ``/v1/health`` and alice's session waited for his ``sleep``s);
bob reads and writes a FIFO through the files API (before, a worker thread hung on it); bob reads
and writes files over the size cap. Each refusal is asserted: 429 naming the quota, a 4xx "not a
regular file" in well under the call timeout, 413 naming the cap; and alice is answered at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from rockroll.api.sandboxes.owner_limits import CallLimits
from rockroll.api.server.app import create_app
from rockroll.api.server.errors import ApiError
from rockroll.api.server.serve_proc import ServerProc
from rockroll.client.sdk import ApiClientError, Client
from tests.api.conftest import make_settings

FLOOD = 48  # more than the 40 threads Starlette's shared pool has for sync routes
SLEEP_S = 15
QUICK_S = 1.0  # generous on a loaded CI machine; the 100 ms bar is bench/security/stall_bench.py's


@pytest.fixture(scope="module")
def bob(server: ServerProc) -> Iterator[tuple[Client, str]]:
    c = Client(server.url, server.tokens["bob"])
    sb = c.create_sandbox()["id"]
    yield c, sb
    c.delete_sandbox(sb)
    c.close()


def _flood(
    url: str, token: str, sandbox_id: str, n: int, cmd: str, out: list[tuple[int, float, dict[str, Any]]]
) -> None:
    """``n`` concurrent execs of ``cmd``; appends ``(status, seconds to answer, body)`` as each answers (60 s at most)."""
    lock = threading.Lock()
    limits = httpx.Limits(max_connections=n + 4, max_keepalive_connections=n + 4)
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60.0, limits=limits)

    def one() -> None:
        t0 = time.monotonic()
        try:
            r = http.post(f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": cmd, "timeout_s": 60})
            row = (r.status_code, time.monotonic() - t0, r.json())
        except httpx.HTTPError as e:
            row = (0, time.monotonic() - t0, {"error": str(e)})
        with lock:
            out.append(row)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    http.close()


@pytest.mark.slow
def test_exec_flood_gets_429_naming_the_quota_and_others_are_answered_at_once(server: ServerProc, bob) -> None:
    b, sb = bob
    with Client(server.url, server.tokens["alice"]) as a:
        sid = a.create_session("FrozenLake-v0")["id"]
        a.reset(sid, seed=0)
        rows: list[tuple[int, float, dict[str, Any]]] = []
        flood = threading.Thread(
            target=_flood, args=(server.url, server.tokens["bob"], sb, FLOOD, f"sleep {SLEEP_S}", rows), daemon=True
        )
        t_flood = time.monotonic()
        flood.start()
        # the flood is in once the refusals are back (before the fix none came: every worker thread waited)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(rows) < FLOOD - 8:
            time.sleep(0.1)
        slow: list[tuple[str, float]] = []
        for name, call in (
            ("health", a.health),
            ("session step", lambda: a.step(sid, "Right")),
            ("list sandboxes", a.list_sandboxes),
            ("health again", a.health),
        ):
            t0 = time.monotonic()
            call()
            slow.append((name, time.monotonic() - t0))
        inside_sleeps = time.monotonic() - t_flood < SLEEP_S
        flood.join(SLEEP_S + 60)
        a.close_session(sid)
    assert inside_sleeps, "alice's calls ran after bob's execs ended: the check proves nothing"
    assert all(s < QUICK_S for _, s in slow), f"alice waited on bob's execs: {slow}"
    assert len(rows) == FLOOD
    refused = [r for r in rows if r[0] == 429]
    ran = [r for r in rows if r[0] == 200]
    assert len(ran) == 8 and len(refused) == FLOOD - 8, sorted(r[0] for r in rows)
    for _, seconds, body in refused:
        err = body["error"]
        assert err["code"] == "capacity" and "max_sandbox_calls_per_owner=8" in err["message"], err
        assert err["details"]["limit"] == 8
        assert seconds < SLEEP_S / 2, f"a refusal waited {seconds:.1f}s: it was queued, not refused"
    assert all(body["exit_code"] == 0 and not body["timed_out"] for _, _, body in ran)
    # every slot came back: bob runs again
    assert b.exec(sb, "echo back")["stdout"] == "back\n"


def test_fifo_read_and_write_are_refused_at_once_and_nothing_hangs(server: ServerProc, bob) -> None:
    b, sb = bob
    assert b.exec(sb, "rm -f pipe && mkfifo pipe && echo ok > plain.txt && echo made")["stdout"] == "made\n"
    for call in (lambda: b.read_file(sb, "pipe"), lambda: b.write_file(sb, "pipe", b"x")):
        t0 = time.monotonic()
        with pytest.raises(ApiClientError) as e:
            call()
        took = time.monotonic() - t0
        assert e.value.status == 400 and "not a regular file" in e.value.message, e.value
        assert took < 5.0, f"the FIFO call took {took:.1f}s: it blocked on the pipe"
    # a symlink to the FIFO is refused the same way
    b.exec(sb, "ln -sf pipe link")
    with pytest.raises(ApiClientError) as e:
        b.read_file(sb, "link")
    assert e.value.status == 400 and "not a regular file" in e.value.message
    # nothing was left hanging: more calls than the quota, one after another, all answer
    for _ in range(10):
        assert b.read_file(sb, "plain.txt") == b"ok\n"
    assert b.exec(sb, "test -p pipe && echo still-a-fifo")["stdout"] == "still-a-fifo\n"


@pytest.fixture()
def capped(data_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(data_dir, dev_mode=True, max_file_bytes=65536))) as c:
        yield c
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)


def test_files_over_the_size_cap_are_refused_naming_it(capped: TestClient) -> None:
    r = capped.post("/v1/sandboxes", json={})
    assert r.status_code == 201, r.text
    sb = r.json()["id"]
    ex = capped.post(
        f"/v1/sandboxes/{sb}/exec", json={"cmd": "head -c 65536 /dev/zero > at && head -c 65537 /dev/zero > over"}
    )
    assert ex.status_code == 200 and ex.json()["exit_code"] == 0, ex.text
    assert len(capped.get(f"/v1/sandboxes/{sb}/files", params={"path": "at"}).content) == 65536
    r = capped.get(f"/v1/sandboxes/{sb}/files", params={"path": "over"})
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert err["code"] == "too_large" and "65536" in err["message"] and "max_file_bytes" in err["message"], err
    assert err["details"] == {"path": "over", "size": 65537, "limit": 65536}
    r = capped.put(f"/v1/sandboxes/{sb}/files", params={"path": "up"}, content=b"\0" * 65537)
    assert r.status_code == 413 and "max_file_bytes" in r.json()["error"]["message"], r.text
    ok = capped.put(f"/v1/sandboxes/{sb}/files", params={"path": "up"}, content=b"\0" * 65536)
    assert ok.status_code == 200 and ok.json()["size"] == 65536, ok.text


def test_a_caller_that_hangs_up_keeps_its_slot_until_the_work_ends() -> None:
    """Cancelling requests (a client disconnecting) must not let an owner run more than the quota."""
    limits = CallLimits(per_owner=2, total=3)
    release = threading.Event()

    async def attack() -> list[int]:
        calls = [asyncio.create_task(limits.run("bob", release.wait, 10)) for _ in range(2)]
        await asyncio.sleep(0.1)
        for c in calls:
            c.cancel()  # bob hangs up; his two calls still run
        await asyncio.gather(*calls, return_exceptions=True)
        statuses = []
        for owner in ("bob", "alice", "carol"):
            try:
                await limits.run(owner, lambda: None)
                statuses.append(200)
            except ApiError as e:
                statuses.append(e.status)
        return statuses

    try:
        # bob is refused (his quota), alice runs, carol runs (the total counts alice only while she runs)
        assert asyncio.run(attack()) == [429, 200, 200]
        assert limits.running("bob") == 2
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while limits.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert limits.running() == 0
