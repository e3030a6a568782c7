"""The client's retry policy against the real app (uvicorn on 127.0.0.1, process sandboxes).

A middleware lets the app handle a request to the end (a step is applied), sends the answer's
headers, then drops the connection before its body: the client cannot tell whether the step
happened. A step (``POST``) must then raise and stay applied once; a read (``GET``) is resent.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from rockroll.api.server.app import create_app
from rockroll.api.server.serve_proc import scratch_dir
from rockroll.client.sdk import AsyncClient, Client
from rockroll.sandbox.retry import wait_until
from tests.api.conftest import make_settings


class DropAfterApply:
    """ASGI wrapper: counts requests; the next one matching :meth:`arm` is handled, then its connection dropped."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: Counter[tuple[str, str]] = Counter()
        self._armed: tuple[str, str] | None = None

    def arm(self, method: str, path: str) -> None:
        self._armed = (method, path)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = (scope["method"], scope["path"])
        self.seen[key] += 1
        if key != self._armed:
            await self.app(scope, receive, send)
            return
        self._armed = None

        async def headers_only(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                await send(message)

        await self.app(scope, receive, headers_only)  # the request is applied in full
        raise ConnectionAbortedError("test: the connection drops before the answer's body")


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, DropAfterApply]]:
    """The app on a free loopback port, wrapped in :class:`DropAfterApply`."""
    data = scratch_dir("retries")
    app = create_app(make_settings(data, dev_mode=True))
    dropper = DropAfterApply(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(dropper, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started, 60), "uvicorn did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", dropper
    finally:
        rr = getattr(app.state, "rr", None)
        for sb in rr.placement.list() if rr is not None else []:
            rr.placement.delete(sb.id)
        server.should_exit = True
        thread.join(30)
        sock.close()
        shutil.rmtree(data, ignore_errors=True)


def test_a_step_whose_connection_drops_is_applied_once(live: tuple[str, DropAfterApply]) -> None:
    url, dropper = live
    with Client(url, retries=3) as c, c.env("FrozenLake-v0", transport="http", is_slippery=False) as env:
        env.reset(seed=0)
        path = f"/v1/sessions/{env.session_id}/step"
        dropper.arm("POST", path)
        with pytest.raises(httpx.TransportError):
            env.step("<answer>Right</answer>")
        assert dropper.seen["POST", path] == 1  # not resent
        assert c.get_session(env.session_id)["steps"] == 1
        assert env.get_state()["elapsed_steps"] == 1  # applied once
        env.step("<answer>Right</answer>")  # the client carries on
        assert env.get_state()["elapsed_steps"] == 2


def test_async_client_does_not_resend_a_step(live: tuple[str, DropAfterApply]) -> None:
    url, dropper = live

    async def main() -> None:
        async with AsyncClient(url, retries=3) as c:
            sid = (await c.create_session("FrozenLake-v0", {"is_slippery": False}))["id"]
            await c.reset(sid, seed=0)
            dropper.arm("POST", f"/v1/sessions/{sid}/step")
            with pytest.raises(httpx.TransportError):
                await c.step(sid, "<answer>Down</answer>")
            assert dropper.seen["POST", f"/v1/sessions/{sid}/step"] == 1
            assert (await c.get_session(sid))["steps"] == 1
            await c.close_session(sid)

    asyncio.run(main())


def test_a_read_whose_connection_drops_is_resent(live: tuple[str, DropAfterApply]) -> None:
    url, dropper = live
    with Client(url, retries=3) as c:
        sid = c.create_session("FrozenLake-v0")["id"]
        dropper.arm("GET", f"/v1/sessions/{sid}")
        assert c.get_session(sid)["id"] == sid
        assert dropper.seen["GET", f"/v1/sessions/{sid}"] == 2
        c.close_session(sid)
