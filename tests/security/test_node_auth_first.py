"""Auth before bodies (issue 48 item 5): a node agent checks a token in the ``Authorization`` header before
it reads a byte of a ``POST /v1/node/step`` body, so unauthenticated bodies cost it no memory; a chunked
body over a limit is refused (413) at the limit, not read to its end, by both body-limit middlewares.

A real standalone agent (``rockroll serve-node``) on 127.0.0.1 with its default 32 MiB limit: the
attack's 30 MiB bodies pass the length check and meet the token check.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rockroll.api.server.body_limit import BodyLimit as ApiBodyLimit
from rockroll.api.server.raw_http import post_stream
from rockroll.sandbox.node.client import BatchStepper, DataPlaneError
from rockroll.sandbox.node.tokens import SessionTokens
from tests.cluster.standalone_agent import Agent, standalone_agent

MIB = 1024 * 1024
BODY = 30 * MIB
RIGHT = "<answer>Right</answer>"


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ROCKROLL_NODE_MAX_BODY_BYTES", raising=False)  # the default limit: 32 MiB
        with standalone_agent("auth-first") as a:
            yield a


def vm_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_unauthenticated_bodies_are_refused_unread(agent: Agent) -> None:
    """8 parallel 30 MiB bodies, without a header, with a bad one, with another deployment's token (and
    one to an admin route without the secret): each is answered 401 (connection closed) before it is
    sent, and the agent's RSS barely moves."""
    foreign, _ = SessionTokens(secrets.token_urlsafe(32)).issue("se-00", "alice", agent.proc.node_id)
    heads = ["", "Authorization: Bearer not-a-token\r\n", f"Authorization: Bearer {foreign}\r\n", ""] * 2
    paths = ["/v1/node/step"] * 7 + ["/v1/node/admin/sessions"]
    before, peak, done = vm_rss_kib(agent.pid), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], vm_rss_kib(agent.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        with ThreadPoolExecutor(len(heads)) as pool:
            posts = pool.map(lambda h, p: post_stream(agent.endpoint, h, BODY, chunked=False, path=p), heads, paths)
            results = list(posts)
    finally:
        done.set()
        sampler.join(timeout=5)
    peak[0] = max(peak[0], vm_rss_kib(agent.pid))
    for answer, sent in results:
        assert answer.startswith((b"HTTP/1.1 401", b"HTTP/1.1 403")), answer[:300]
        assert b"connection: close" in answer.lower(), answer[:300]
        assert sent < BODY // 2, f"{sent} bytes went out before the refusal"
    grown_mib = (peak[0] - before) / 1024
    print(f"agent RSS {before / 1024:.0f} MiB -> peak {peak[0] / 1024:.0f} MiB under {len(heads)} x 30 MiB")
    assert grown_mib <= 50, f"the agent grew by {grown_mib:.0f} MiB refusing unauthenticated bodies"


def test_a_chunked_body_over_the_limit_is_refused_at_the_limit(agent: Agent) -> None:
    token, _ = SessionTokens(agent.secret).issue("se-00", "alice", agent.proc.node_id)
    total = 96 * MIB  # three times the limit: the generator still has data when the agent answers
    answer, sent = post_stream(agent.endpoint, f"Authorization: Bearer {token}\r\n", total, chunked=True)
    assert answer.startswith(b"HTTP/1.1 413") and b"too_large" in answer, answer[:300]
    assert sent < 2 * 32 * MIB, f"{sent} bytes went out before the 413"


def test_the_authenticated_path_still_steps(agent: Agent) -> None:
    sid, token = agent.open_session()
    expired, _ = SessionTokens(agent.secret).issue(sid, "alice", agent.proc.node_id, ttl_s=-5)
    stepper = BatchStepper(agent.endpoint)  # shows one of the batch's tokens in its header
    try:
        assert "observation" in stepper.step([{"token": token, "op": "reset", "seed": 1}])[0]
        out = stepper.step([{"token": expired, "seq": 1, "action": RIGHT}, {"token": token, "seq": 1, "action": RIGHT}])
        assert out[0]["status"] == 401 and out[1]["seq"] == 1, out  # an item's bad token answers it alone
        alone = stepper.step([{"token": expired, "seq": 2, "action": RIGHT}])  # refused at the header: per item
        assert (alone[0]["status"], alone[0]["error"]["code"]) == (401, "token_expired"), alone
        others = [SessionTokens(agent.secret).issue(sid, "alice", agent.proc.node_id, ttl_s=-n)[0] for n in range(5, 9)]
        with pytest.raises(DataPlaneError) as e:  # more bad tokens than the stepper shows: the 401 is raised
            stepper.step([{"token": t, "seq": 2, "action": RIGHT} for t in others])
        assert (e.value.status, e.value.code) == (401, "token_expired")
    finally:
        stepper.close()
    url = f"{agent.endpoint}/v1/node/step"  # an older client: the token in the body's first bytes only
    resp = httpx.post(url, json={"steps": [{"token": token, "seq": 2, "action": RIGHT}]}, timeout=60)
    assert resp.status_code == 200 and resp.json()["results"][0]["seq"] == 2, resp.text
    resp = httpx.post(url, content=b'{"steps": 3}', timeout=30)
    assert resp.status_code == 401 and resp.headers["connection"] == "close", resp.text
    assert "Traceback" not in agent.log(), agent.log()[-3000:]


async def _drain(request: Request) -> JSONResponse:
    n = 0
    async for chunk in request.stream():
        n += len(chunk)
    return JSONResponse({"n": n})


@pytest.fixture
def api_limited() -> Iterator[str]:
    """A route behind the control plane's body limit (1 MiB), served by uvicorn on a thread."""
    app = Starlette(routes=[Route("/v1/node/step", _drain, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(ApiBodyLimit(app, lambda _scope: MIB), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_the_control_planes_limit_stops_a_chunked_body_at_the_limit(api_limited: str) -> None:
    answer, sent = post_stream(api_limited, "", 64 * MIB, chunked=True, timeout_s=10)
    assert answer.startswith(b"HTTP/1.1 413") and b"too_large" in answer, answer[:300]
    assert b"connection: close" in answer.lower(), answer[:300]  # closed, not drained to the end
    assert sent < 8 * MIB, f"{sent} bytes went out before the 413"
