"""The agent's hot path into a sandbox: one asyncio WebSocket per sandbox, shared by its sessions.

A data-plane step runs on the agent's event loop from the client's message to the sandbox and
back, without a worker thread and without an HTTP request per step: :class:`SandboxChannel`
talks to the in-sandbox server's channel (:mod:`rockroll.sandbox.server.channel`). Calls are
coalesced: every call made on the loop while it runs (the steps of all the sessions whose messages
arrived together, or a whole batch) goes to the sandbox in one frame ``[[id, op, args], ...]``,
sent on the loop's next turn; the sandbox answers in frames ``[[id, answer], ...]`` and each answer
wakes its own caller. So the per-message costs (a WebSocket frame, a wake-up of both processes)
are paid once per frame, not once per step. Calls are pipelined: a frame does not wait for the
answers of the one before.

Errors come back as the types a :class:`~rockroll.sandbox.session.RemoteSession` raises, for the
one call that failed: a dropped channel, another boot id, or a server that no longer knows the
session is :class:`~rockroll.sandbox.errors.SandboxLost` (and the sandbox's monitor is asked to
probe it); a call not answered in time is :class:`~rockroll.sandbox.errors.SandboxTimeout` (its
late answer is dropped; the channel stays open for the other sessions).

Where the sandbox has no channel, or one of an earlier release that takes no frames,
:meth:`Channels.get` returns None and the agent steps through the session's HTTP client on a
worker thread.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import cast

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidHandshake
from websockets.frames import Frame
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from rockroll.envs.json_types import JSONObject, JSONValue
from rockroll.sandbox.client import _to_exception
from rockroll.sandbox.errors import SandboxLost, SandboxTimeout, SessionLost, SessionNotFound
from rockroll.sandbox.server.channel import (
    BOOT_HEADER,
    CHANNEL_HEADER,
    FRAMES,
    MAX_MESSAGE_BYTES,
    channel_path,
)
from rockroll.sandbox.server.wire import dumps, loads, send_pending, whole_message
from rockroll.sandbox.session import RemoteSession

__all__ = ["CallTimeout", "ChannelClosed", "SandboxChannel", "Channels", "answer_of"]

#: the future of a call's answer (``{"result"}`` or ``{"error"}``, as the sandbox sent it)
Answer = asyncio.Future[JSONValue]

OPEN_TIMEOUT_S = 5.0
SWEEP_S = 0.25
"""How often a channel with waiting calls fails those past their deadline (their timeouts are this coarse)."""


def answer_of(remote: RemoteSession, answer: JSONValue) -> JSONValue:
    """The result of a call's ``answer`` (``{"result"}`` or ``{"error"}``), or its error raised typed."""
    if not isinstance(answer, dict):
        raise SandboxLost(remote.sandbox_id, f"the sandbox answered a call with {type(answer).__name__}")
    if "error" not in answer:
        return answer.get("result")
    error = answer["error"]
    err = _to_exception(error if isinstance(error, dict) else {})
    if isinstance(err, SessionNotFound):
        raise SandboxLost(remote.sandbox_id, "the server no longer knows this session") from err
    if isinstance(err, SessionLost):
        err.sandbox_id = err.sandbox_id or remote.sandbox_id
    raise err


class ChannelClosed(ConnectionError):
    """The channel's connection dropped (or was closed) before the answer came."""


class CallTimeout(TimeoutError):
    """No answer came in time (the call's late answer, if any, is dropped)."""


class SandboxChannel(asyncio.Protocol):
    """One WebSocket to a sandbox's channel, for the calls of all its sessions (use from its event loop).

    It drives the ``websockets`` library's sans-I/O ``ClientProtocol`` (handshake, masked frames,
    closing handshake) straight from this asyncio protocol: a frame is written when it is made
    and answers wake their callers from :meth:`data_received`, with no task or queue per message.
    """

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.proto = ClientProtocol(parse_uri("ws://sandbox/"), max_size=MAX_MESSAGE_BYTES)
        self.opened: asyncio.Future[None] = self.loop.create_future()
        self.boot = ""
        self.frames = False  # the server takes frames (an earlier release's does not)
        self.transport: asyncio.Transport | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[Answer, float]] = {}  # id -> its caller's future, deadline
        self._sweeper: asyncio.TimerHandle | None = None
        self._outbox: list[tuple[int, str, JSONObject]] = []  # calls for the next frame: (id, op, args)
        self._flush_soon = False
        self._paused = False  # the transport's buffer is full: frames wait
        self._parts: list[bytes] = []  # the fragments of a message not complete yet
        self._closing = False  # the closing handshake began
        self.closed = False
        self.on_close: Callable[[SandboxChannel], object] | None = None  # called once when it is done

    # ------------------------------------------------------------ calls
    def submit(self, op: str, args: JSONObject, timeout_s: float = 60.0) -> Answer:
        """Queue one call for the next frame (sent on the loop's next turn, with every call queued
        until then); a future of its answer ``{"result"}`` or ``{"error"}``, or of :class:`ChannelClosed`,
        or of :class:`CallTimeout` when no answer came within about ``timeout_s`` (its late answer
        is dropped)."""
        future = self._enter(op, args, timeout_s)
        if not self._flush_soon:
            self._flush_soon = True
            self.loop.call_soon(self._flush)
        return future

    def send_now(self, op: str, args: JSONObject, timeout_s: float = 60.0) -> Answer:
        """:meth:`submit`, sent at once (with whatever is queued): for a call that finds the channel idle."""
        future = self._enter(op, args, timeout_s)
        self._flush()
        return future

    async def call(self, remote: RemoteSession, op: str, timeout_s: float = 60.0, **args: JSONValue) -> JSONValue:
        """Run ``op`` on ``remote``'s session (``session_id`` is added); its result, or its error raised typed."""
        remote.check()
        args["session_id"] = remote.session_id
        try:
            if self._waiting or self._outbox:
                future = self.submit(op, args, timeout_s)
            else:  # an idle channel: this call goes at once, without a turn of the loop to gather others
                future = self.send_now(op, args, timeout_s)
            answer = await future
        except ChannelClosed as e:
            remote.sandbox.report_failure()
            raise SandboxLost(remote.sandbox_id, f"the sandbox's channel dropped during {op}") from e
        except CallTimeout as e:
            raise SandboxTimeout(
                f"sandbox {remote.sandbox_id} did not answer {op} within {timeout_s:.1f}s",
                sandbox_id=remote.sandbox_id, timeout_s=timeout_s,
            ) from e  # fmt: skip
        except asyncio.CancelledError:
            self.forget(future)
            raise
        return answer_of(remote, answer)

    def forget(self, future: Answer) -> None:
        """Drop a call whose caller gave up (its answer, if it comes, is ignored)."""
        for cid in [cid for cid, (f, _deadline) in self._waiting.items() if f is future]:
            del self._waiting[cid]

    def _enter(self, op: str, args: JSONObject, timeout_s: float) -> Answer:
        if self.closed:
            raise ChannelClosed("the sandbox's channel is closed")
        cid = next(self._ids)
        future: Answer = self.loop.create_future()
        self._waiting[cid] = (future, self.loop.time() + timeout_s)
        self._outbox.append((cid, op, args))
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)
        return future

    def _sweep(self) -> None:
        """Fail the calls past their deadline (a timer while calls wait: none per call)."""
        self._sweeper = None
        now = self.loop.time()
        late = [cid for cid, (_f, deadline) in self._waiting.items() if deadline <= now]
        for cid in late:
            future, _deadline = self._waiting.pop(cid)
            if not future.done():
                future.set_exception(CallTimeout(f"call {cid} was not answered in time"))
        if self._waiting and not self.closed:
            self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)

    def _flush(self) -> None:
        self._flush_soon = False
        if self._outbox and not self.closed and not self._paused:
            frame, self._outbox = self._outbox, []
            self.proto.send_text(dumps(frame))
            self._write()

    def _answers(self, message: bytes) -> None:
        waiting = self._waiting
        try:
            frame = loads(message)
            if not isinstance(frame, list):
                raise ValueError("a frame is a list of [id, answer]")
            for pair in frame:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ValueError("an answer is [id, answer]")
                cid, answer = pair
                found = waiting.pop(cid, None) if isinstance(cid, int) else None
                if found is not None and not found[0].done():
                    found[0].set_result(answer)
        except ValueError:  # not a frame of answers: the server is not one to trust further
            self.abort()

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a unix socket's stream transport (uvloop's is no subclass of asyncio.Transport)
        self.transport = cast(asyncio.Transport, transport)
        self.proto.send_request(self.proto.connect())
        self._write()

    def data_received(self, data: bytes) -> None:
        proto = self.proto
        proto.receive_data(data)
        for event in proto.events_received():
            if type(event) is not Frame:  # the handshake's response
                if isinstance(event, Response):
                    self._handshake(event)
            else:
                message = whole_message(event, self._parts)
                if message is not None:
                    self._answers(message)
        self._write()
        if proto.state is not State.OPEN and self.opened.done():  # closing: no answer comes any more
            self._fail()

    def eof_received(self) -> bool:
        self.proto.receive_eof()
        self._write()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail()
        if not self.opened.done():
            self.opened.set_exception(ChannelClosed(f"the sandbox's channel closed during its handshake: {exc}"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._flush()

    def _handshake(self, response: Response) -> None:
        if self.opened.done():
            return
        if self.proto.handshake_exc is not None:
            self.opened.set_exception(self.proto.handshake_exc)
            return
        self.boot = response.headers.get(BOOT_HEADER, "")
        self.frames = response.headers.get(CHANNEL_HEADER, "") == FRAMES
        self.opened.set_result(None)

    def _write(self) -> None:
        """Send what the protocol has to send (frames, pongs, the closing handshake)."""
        transport = self.transport
        if transport is None:
            return
        send_pending(self.proto, transport)
        if not self._closing and self.proto.close_expected():
            self._closing = True
            self.loop.call_later(1.0, transport.close)  # if the server has not closed it by then

    def _fail(self) -> None:
        """The channel is done: every waiting call fails with :class:`ChannelClosed`."""
        if not self.closed and self.on_close is not None:
            self.on_close(self)
        self.closed = True
        waiting, self._waiting = self._waiting, {}
        self._outbox = []
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for future, _deadline in waiting.values():
            if not future.done():
                future.set_exception(ChannelClosed("the sandbox's channel dropped before the answer came"))

    def abort(self) -> None:
        """Drop the connection now (its waiting calls fail)."""
        self._fail()
        if self.transport is not None:
            self.transport.abort()

    async def close(self) -> None:
        """Close the connection with the closing handshake (its waiting calls fail)."""
        if self.transport is None or self.transport.is_closing():
            self._fail()
            return
        if self.proto.state is State.OPEN:
            self.proto.send_close()
            self._write()
        self._fail()
        self.transport.close()


class Channels:
    """The channels of one event loop, one per sandbox incarnation (socket path and boot id).

    A sandbox without a channel that takes frames is remembered as such (its sessions use HTTP).
    A closed channel (the sandbox went away) is replaced at the next call.
    """

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._open: dict[tuple[str, str], SandboxChannel | asyncio.Future[SandboxChannel | None] | None] = {}

    async def get(self, remote: object) -> SandboxChannel | None:
        """The channel of ``remote``'s sandbox (a :class:`RemoteSession`), or None where it has none."""
        if not isinstance(remote, RemoteSession):
            return None
        client = remote.client
        key = (client.socket_path, client.boot_id)
        while True:
            found = self._open.get(key, False)
            if isinstance(found, SandboxChannel) and not found.closed:
                return found
            if found is None:
                return None
            if not isinstance(found, asyncio.Future):
                break
            try:  # another call is opening it
                return await asyncio.shield(found)
            except asyncio.CancelledError:
                if not found.cancelled():  # this caller was cancelled, not the opening
                    raise
        opening: asyncio.Future[SandboxChannel | None] = self.loop.create_future()
        self._open[key] = opening
        try:
            channel = await _connect(remote)
        except BaseException as e:
            self._open.pop(key, None)
            if isinstance(e, asyncio.CancelledError):
                opening.cancel()  # the waiters try again themselves
            else:
                opening.set_exception(e)
                opening.exception()  # retrieved: no warning when nobody else waited
            raise
        self._open[key] = channel
        if channel is not None:
            channel.on_close = lambda c: self._open.pop(key, None) if self._open.get(key) is c else None
        opening.set_result(channel)
        return channel


async def _connect(remote: RemoteSession) -> SandboxChannel | None:
    client = remote.client
    channel: SandboxChannel | None = None
    try:
        async with asyncio.timeout(OPEN_TIMEOUT_S):
            _transport, channel = await asyncio.get_running_loop().create_unix_connection(
                SandboxChannel, channel_path(client.socket_path)
            )
            await channel.opened
    except (OSError, InvalidHandshake, TimeoutError):  # no channel here (ChannelClosed is an OSError)
        if channel is not None:
            channel.abort()
        return None
    if client.boot_id and channel.boot != client.boot_id:
        channel.abort()
        raise SandboxLost(remote.sandbox_id, "the sandbox was replaced by a new server")
    if not channel.frames:  # a server of an earlier release: one call per message
        await channel.close()
        return None
    return channel
