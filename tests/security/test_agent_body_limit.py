"""A node agent reads request bodies under its limit: an oversized body is refused (413) while it
streams, the agent's memory does not grow with it, and it serves steps afterwards (issue 35, hole A)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from rockroll.api.server.raw_http import post_stream
from rockroll.sandbox.node.tokens import SessionTokens
from tests.cluster.standalone_agent import Agent, standalone_agent

LIMIT = 1024 * 1024
BODY = 64 * 1024 * 1024


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


def stream_until_answered(agent: Agent, *, chunked: bool) -> tuple[bytes, int]:
    """POST ``BODY`` bytes of JSON to ``/v1/node/step`` with a token, stopping once an answer arrives:
    ``(the answer's head, body bytes sent)``."""
    head = "Content-Type: application/json\r\n" + "".join(f"{k}: {v}\r\n" for k, v in auth(agent).items())
    return post_stream(agent.endpoint, head, BODY, chunked=chunked, head_only=True, timeout_s=60.0)


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_an_oversized_body_is_refused_while_it_streams(agent: Agent, chunked: bool) -> None:
    before = memory_kib(agent.pid)
    answer, sent = stream_until_answered(agent, chunked=chunked)
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
