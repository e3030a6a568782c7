"""A node agent reads request bodies under its limit: an oversized body is refused (413) while it
streams, the agent's memory does not grow with it, and it serves steps afterwards (issue 35, hole A)."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from rockroll.sandbox.node.tokens import SessionTokens
from tests.cluster.standalone_agent import Agent, standalone_agent

LIMIT = 1024 * 1024
BODY = 64 * 1024 * 1024
CHUNK = 64 * 1024
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROCKROLL_NODE_MAX_BODY_BYTES", str(LIMIT))
        with standalone_agent("body-limit") as a:
            yield a


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` (now) and ``VmHWM`` (peak) of ``pid``, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def auth(agent: Agent) -> dict[str, str]:
    """An ``Authorization`` header the agent takes (a session token of it: it reads no body before one)."""
    token, _ = SessionTokens(agent.secret).issue("se-00", "alice", agent.proc.node_id)
    return {"Authorization": f"Bearer {token}"}


def stream_until_answered(
    endpoint: str, *, chunked: bool, headers: dict[str, str], timeout_s: float = 60.0
) -> tuple[bytes, int]:
    """POST ``BODY`` bytes (made lazily, a chunk at a time) to ``/v1/node/step`` and stop sending as soon
    as an answer arrives: ``(the answer's head, body bytes sent)``."""
    url = urlsplit(endpoint)
    sock = socket.create_connection((url.hostname, url.port), timeout=timeout_s)
    framing = b"Transfer-Encoding: chunked" if chunked else f"Content-Length: {BODY}".encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
    sock.sendall(b"POST /v1/node/step HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 + head + framing + b"\r\n\r\n")  # fmt: skip
    sent, deadline = 0, time.monotonic() + timeout_s
    chunk = b" " * CHUNK
    frame = f"{CHUNK:x}\r\n".encode() + chunk + b"\r\n" if chunked else chunk
    try:
        while sent < BODY and time.monotonic() < deadline:  # at most BODY / CHUNK sends
            if select.select([sock], [], [], 0)[0]:
                break
            if not select.select([], [sock], [], 1.0)[1]:
                continue  # the agent reads no more: wait for its answer
            sock.sendall(frame)
            sent += CHUNK
    except (BrokenPipeError, ConnectionResetError):
        pass  # the agent answered and closed: its answer may still be there to read
    answer = b""
    try:
        while b"\r\n\r\n" not in answer and time.monotonic() < deadline:
            if select.select([sock], [], [], 1.0)[0]:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return answer, sent


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_an_oversized_body_is_refused_while_it_streams(agent: Agent, chunked: bool) -> None:
    before = memory_kib(agent.pid)
    answer, sent = stream_until_answered(agent.endpoint, chunked=chunked, headers=auth(agent))
    after = memory_kib(agent.pid)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert sent < BODY // 2, f"the whole body went out ({sent} bytes) before the answer"
    grown_mib = max(after["VmRSS"] - before["VmRSS"], after["VmHWM"] - before["VmHWM"]) / 1024
    assert grown_mib < 8, f"the agent grew by {grown_mib:.1f} MiB reading a refused body"


def test_the_agent_still_steps_after_refusals_and_bad_json_is_a_4xx(agent: Agent) -> None:
    url = f"{agent.endpoint}/v1/node/step"
    for bad in (b'{"steps": [', b"[" * 100_000, b"\xff\xfe", b'{"steps": 3}'):
        resp = httpx.post(url, content=bad, headers={"Content-Type": "application/json"} | auth(agent), timeout=30)
        assert resp.status_code == 422 and resp.json()["error"]["code"] == "validation_error", resp.text
    _sid, token = agent.open_session()
    answers = []
    for item in ({"op": "reset", "seed": 3}, {"op": "step", "seq": 1, "action": "<answer>Right</answer>"}):
        resp = httpx.post(url, content=json.dumps({"steps": [item | {"token": token}]}), timeout=60)
        assert resp.status_code == 200, resp.text
        answers += resp.json()["results"]
    assert "observation" in answers[0] and answers[1]["seq"] == 1 and "observation" in answers[1], answers
    assert "Traceback" not in agent.log(), agent.log()[-3000:]
