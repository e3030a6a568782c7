"""A client of several control-plane replicas (``Client("URL,URL")``), sync and async alike (one state machine,
:class:`rockroll.client.replicas.Attempts`): a refused connection goes to the next replica, a stalled request too
when it may be resent, a ``409 session_elsewhere`` asks the next, and a round of refusals backs off and repeats."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from rockroll.client.sdk import ApiClientError, AsyncClient, Client

URLS = "http://a:1,http://b:1"
Behaviour = Callable[[httpx.Request], httpx.Response]


def _ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"at": request.url.host})


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("refused", request=request)


def _stall(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("no answer", request=request)


def _elsewhere(request: httpx.Request) -> httpx.Response:
    return httpx.Response(409, json={"error": {"code": "session_elsewhere", "message": "not here"}})


def _transport(hosts: dict[str, Behaviour], asked: list[str]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.host)
        return hosts[request.url.host](request)

    return httpx.MockTransport(handle)


def _sync(hosts: dict[str, Behaviour], asked: list[str], **kw: Any) -> Client:
    c = Client(URLS, "t", **kw)
    c._http = httpx.Client(transport=_transport(hosts, asked))
    return c


def _async(hosts: dict[str, Behaviour], asked: list[str], **kw: Any) -> AsyncClient:
    c = AsyncClient(URLS, "t", **kw)
    c._http = httpx.AsyncClient(transport=_transport(hosts, asked))
    return c


def _both(hosts: dict[str, Behaviour], method: str, **kw: Any) -> list[tuple[Any, list[str], str]]:
    """``(answer or error, hosts asked, url after)`` of the sync client, then of the async one."""
    out = []
    for make in (_sync, _async):
        asked: list[str] = []
        c = make(hosts, asked, **kw)
        try:
            call = c.request(method, "/v1/x")
            answer: Any = asyncio.run(call) if asyncio.iscoroutine(call) else call
        except httpx.HTTPError as e:
            answer = type(e)
        except ApiClientError as e:
            answer = e.code
        out.append((answer, asked, c.url))
    return out


def test_a_refused_connection_goes_to_the_next_replica_whatever_the_method() -> None:
    for method in ("GET", "POST"):
        for answer, asked, url in _both({"a": _refuse, "b": _ok}, method):
            assert (answer, asked, url) == ({"at": "b"}, ["a", "b"], "http://b:1")


def test_a_stalled_request_goes_on_only_when_it_may_be_resent() -> None:
    for answer, asked, url in _both({"a": _stall, "b": _ok}, "GET"):
        assert (answer, asked, url) == ({"at": "b"}, ["a", "b"], "http://b:1")
    for answer, asked, url in _both({"a": _stall, "b": _ok}, "POST"):  # maybe applied: raised, not resent
        assert (answer, asked, url) == (httpx.ReadTimeout, ["a"], "http://b:1")  # the next starts at b
    for answer, asked, _ in _both({"a": _stall, "b": _stall}, "GET"):  # each replica once
        assert (answer, asked) == (httpx.ReadTimeout, ["a", "b"])


def test_a_session_elsewhere_asks_the_next_replica_and_the_last_answer_stands() -> None:
    for answer, asked, url in _both({"a": _elsewhere, "b": _ok}, "POST"):
        assert (answer, asked, url) == ({"at": "b"}, ["a", "b"], "http://b:1")
    for answer, asked, url in _both({"a": _elsewhere, "b": _elsewhere}, "POST"):  # no replica left to ask
        assert (answer, asked, url) == ("session_elsewhere", ["a", "b"], "http://b:1")


def test_every_replica_refusing_backs_off_between_rounds_then_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import rockroll.client.sdk as sdk

    slept: list[float] = []
    monkeypatch.setattr(sdk.time, "sleep", slept.append)
    for answer, asked, _ in _both({"a": _refuse, "b": _refuse}, "GET", retries=2):
        assert (answer, asked) == (httpx.ConnectError, ["a", "b"] * 3)
    assert slept == [0.2, 0.4]  # the sync client's; the async one awaits the same delays
