"""The OpenEnv face's ``/mcp`` (rockroll.api.openenv.mcp_http) against the official ``mcp`` client and raw HTTP.

A real ``rockroll serve-api`` serves ``Lookup-v0``; the ``mcp`` package's Streamable HTTP client lists its tools and
plays the expert's calls to a solved episode, call for call like the env in this process. Bad calls are ``isError``
results, a text env lists no tools, another owner's token (or none) is refused, malformed JSON-RPC gets JSON-RPC's
errors, and MCP sessions count against the owner's session quota (the server runs with 2 sessions per owner).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

import rockroll.envhub as envhub
from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.envs.experts import unwrapped_as
from rockroll.envs.lookup import TOOLS, LookupEnv
from rockroll.envs.lookup.expert import next_action
from rockroll.envs.tools import ToolAction, ToolCall

mcp = pytest.importorskip("mcp")
from mcp import ClientSession  # noqa: E402
from mcp.shared.exceptions import McpError  # noqa: E402

try:
    from mcp.client.streamable_http import streamable_http_client
except ImportError:  # mcp before 1.24: only the (now deprecated) form that takes headers
    streamable_http_client = None  # type: ignore[assignment]
    from mcp.client.streamable_http import streamablehttp_client

ACCEPT = {"Accept": "application/json, text/event-stream"}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
INIT_BODY = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProc]:
    """A real server whose owners hold one sandbox of two sessions at most; tokens alice, bob and carol."""
    d = scratch_dir("mcp")
    proc = ServerProc(d, env={"ROCKROLL_MAX_SANDBOXES_PER_OWNER": "1", "ROCKROLL_MAX_SESSIONS_PER_SANDBOX": "2"})
    proc.tokens = {who: create_token(proc.db_url, who) for who in ("alice", "bob", "carol")}  # type: ignore[attr-defined]
    proc.start()
    yield proc
    proc.cleanup()
    shutil.rmtree(d, ignore_errors=True)


def mcp_url(server: ServerProc, env_id: str, seed: int | None = None) -> str:
    return f"{server.url}/openenv/{env_id}/mcp" + ("" if seed is None else f"?seed={seed}")


def auth(server: ServerProc, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.tokens[who]}"}  # type: ignore[attr-defined]


@asynccontextmanager
async def mcp_session(url: str, headers: dict[str, str]) -> AsyncIterator[tuple[ClientSession, Any]]:
    """An initialized ``ClientSession`` over Streamable HTTP, and the initialize result."""
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        if streamable_http_client is not None:
            transport = streamable_http_client(url, http_client=http)
        else:
            transport = streamablehttp_client(url, headers=headers, timeout=60)
        async with transport as (read, write, _session_id), ClientSession(read, write) as session:
            yield session, await session.initialize()


def rpc(server: ServerProc, url: str, who: str | None, body: Any, sid: str | None = None) -> httpx.Response:
    headers = {**ACCEPT, **(auth(server, who) if who else {}), **({"Mcp-Session-Id": sid} if sid else {})}
    return httpx.post(url, json=body, headers=headers, timeout=60)


def initialize(server: ServerProc, url: str, who: str, **params: Any) -> httpx.Response:
    return rpc(server, url, who, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {**INIT, **params}})


def close(server: ServerProc, url: str, who: str, sid: str) -> int:
    return httpx.delete(url, headers={**auth(server, who), "Mcp-Session-Id": sid}, timeout=60).status_code


# --------------------------------------------------------------------- the official client


def test_mcp_client_solves_a_lookup_episode_like_the_local_env(server: ServerProc) -> None:
    """Tools as declared; the expert's calls played over MCP give the local env's results, to reward 1; a bad
    call is an isError result; a call after the end is not run."""
    local = envhub.make("Lookup-v0")
    obs, _info = local.reset(seed=5)
    inner = unwrapped_as(local, LookupEnv)

    async def play() -> list[Any]:
        async with mcp_session(mcp_url(server, "Lookup-v0", seed=5), auth(server, "alice")) as (session, init):
            assert init.capabilities.tools is not None and init.serverInfo.name == "rockroll"
            assert init.instructions.endswith(obs) and init.meta["rockroll/observation"] == obs
            listed = (await session.list_tools()).tools
            assert [(t.name, t.description, t.inputSchema) for t in listed] == [
                (t.name, t.description, dict(t.parameters)) for t in TOOLS
            ]
            out = [await session.call_tool("get", {"idd": "p1"}), await session.call_tool("shout", {})]
            local.step(ToolAction("", (ToolCall("a", "get", {"idd": "p1"}),)))
            local.step(ToolAction("", (ToolCall("b", "shout", {}),)))
            while (turn := next_action(inner)) is not None:
                call = turn.calls[0]
                result: Any = await session.call_tool(call.name, dict(call.arguments))
                expected = local.step(turn)
                assert result.content[0].text == expected[4]["tool_results"][0]["content"]
                assert (result.meta["rockroll/observation"], result.meta["rockroll/reward"]) == expected[:2]
                out.append(result)
            out.append(await session.call_tool("answer", {"value": 1}))
            assert await session.send_ping() is not None
            return out

    results = asyncio.run(play())
    bad_args, unknown, *played, after_end = results
    assert bad_args.isError and "fail its schema" in bad_args.content[0].text
    assert unknown.isError and "unknown tool 'shout'" in unknown.content[0].text
    assert bad_args.meta["rockroll/reward"] == pytest.approx(-0.1)  # the env's format penalty
    assert not any(r.isError for r in played) and len(played) == inner.difficulty() + 2
    assert played[-1].meta["rockroll/reward"] == 1.0 and played[-1].meta["rockroll/terminated"] is True
    assert after_end.isError and "episode has ended" in after_end.content[0].text
    assert httpx.get(f"{server.url}/v1/sessions", headers=auth(server, "alice")).json()["sessions"] == []  # DELETEd


def test_a_text_env_lists_no_tools_and_refuses_calls(server: ServerProc) -> None:
    async def play() -> tuple[list[Any], str]:
        async with mcp_session(mcp_url(server, "FrozenLake-v0"), auth(server, "alice")) as (session, init):
            assert "Question" not in init.instructions and init.meta["rockroll/session_id"].startswith("se-")
            tools = (await session.list_tools()).tools
            with pytest.raises(McpError) as e:
                await session.call_tool("move", {"to": "Up"})
            return tools, e.value.error.message

    tools, message = asyncio.run(play())
    assert tools == [] and "FrozenLake-v0 has no tools" in message


# --------------------------------------------------------------------- auth, sessions, quotas, errors


def test_mcp_sessions_are_their_owners(server: ServerProc) -> None:
    """Another owner's token with alice's session id is 404 (as an unknown id is), no token 401; the id does not
    reach another env's /mcp; a missing header is 400; DELETE ends it. The seed may come in ``params._meta``."""
    url = mcp_url(server, "Lookup-v0")
    first = initialize(server, url, "alice", _meta={"seed": 9})
    sid = first.headers["mcp-session-id"]
    assert first.status_code == 200 and first.json()["result"]["protocolVersion"] == "2025-06-18"
    meta = first.json()["result"]["_meta"]
    assert meta["rockroll/observation"] == envhub.make("Lookup-v0").reset(seed=9)[0] and meta["rockroll/seed"] == 9
    tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert rpc(server, url, "alice", tools_list, sid).json()["result"]["tools"][0]["name"] == "find"
    assert rpc(server, url, "bob", tools_list, sid).status_code == 404
    assert close(server, url, "bob", sid) == 404
    assert rpc(server, url, "alice", tools_list, "se-0000000000000000").status_code == 404
    assert rpc(server, mcp_url(server, "FrozenLake-v0"), "alice", tools_list, sid).status_code == 404
    assert rpc(server, url, None, tools_list, sid).status_code == 401
    assert rpc(server, url, None, INIT_BODY).status_code == 401
    assert rpc(server, url, "alice", tools_list).status_code == 400
    assert rpc(server, url, "alice", {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid).status_code == 202
    assert httpx.get(url, headers={**auth(server, "alice"), "Mcp-Session-Id": sid}).status_code == 405
    assert close(server, url, "alice", sid) == 204
    assert rpc(server, url, "alice", tools_list, sid).status_code == 404


def test_mcp_sessions_count_against_the_owners_session_quota(server: ServerProc) -> None:
    url = mcp_url(server, "Lookup-v0")
    sids = [initialize(server, url, "carol").headers["mcp-session-id"] for _ in range(2)]
    full = initialize(server, url, "carol")
    assert "mcp-session-id" not in full.headers
    assert full.json()["error"]["code"] == -32000 and full.json()["error"]["data"]["status"] == 429
    assert close(server, url, "carol", sids.pop()) == 204
    sids.append(initialize(server, url, "carol").headers["mcp-session-id"])  # room again
    assert [close(server, url, "carol", sid) for sid in sids] == [204, 204]


def test_malformed_json_rpc_gets_json_rpc_errors(server: ServerProc) -> None:
    url = mcp_url(server, "Lookup-v0")
    sid = initialize(server, url, "bob").headers["mcp-session-id"]
    headers = {**ACCEPT, **auth(server, "bob"), "Mcp-Session-Id": sid}
    try:
        parse = httpx.post(url, content=b'{"jsonrpc": ', headers=headers)
        assert (parse.status_code, parse.json()["error"]["code"]) == (200, -32700)
        cases = [
            ({}, -32600),  # what `openenv validate` posts
            ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], -32600),
            ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, -32600),
            ({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}, -32601),
            ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get", "arguments": "p1"}}, -32602),
            ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}}}, -32602),
            ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}, -32602),
        ]
        for body, code in cases:
            r = rpc(server, url, "bob", body, sid)
            assert (r.status_code, r.json()["error"]["code"]) == (200, code), (body, r.text)
            readable = isinstance(body, dict) and isinstance(body.get("id"), int)
            assert r.json()["id"] == (body["id"] if readable else None), r.text  # type: ignore[index]
        seeded = rpc(server, url + "?seed=x", "bob", INIT_BODY)
        assert seeded.json()["error"]["code"] == -32602 and "mcp-session-id" not in seeded.headers
        wrong_version = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                   headers={**headers, "MCP-Protocol-Version": "1999-01-01"})  # fmt: skip
        assert wrong_version.status_code == 400
        assert rpc(server, url, "bob", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid).json()["result"] == {}
    finally:
        assert close(server, url, "bob", sid) == 204


def test_openenv_ws_mcp_frames_call_the_sockets_episode(dev_client: Any) -> None:
    """OpenEnv's ``mcp`` frame on ``/ws`` lists and calls the tools of the socket's own episode."""
    local = envhub.make("Lookup-v0")
    local.reset(seed=2)
    with dev_client.websocket_connect("/openenv/Lookup-v0/ws") as ws:
        ws.send_json({"type": "reset", "data": {"seed": 2}})
        assert ws.receive_json()["data"]["observation"]["text"] == local.reset(seed=2)[0]
        ws.send_json({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}})
        assert [t["name"] for t in ws.receive_json()["data"]["result"]["tools"]] == ["find", "get", "answer"]
        turn = next_action(unwrapped_as(local, LookupEnv))
        assert turn is not None
        call = {"name": turn.calls[0].name, "arguments": dict(turn.calls[0].arguments)}
        ws.send_json({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}})
        answer = ws.receive_json()
        assert answer["type"] == "mcp" and answer["data"]["id"] == 2
        assert answer["data"]["result"]["content"][0]["text"] == local.step(turn)[4]["tool_results"][0]["content"]
        ws.send_json({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 3, "method": "nope"}})
        assert ws.receive_json()["data"]["error"]["code"] == -32601
        ws.send_json({"type": "state"})
        assert ws.receive_json()["data"]["env_id"] == "Lookup-v0"
