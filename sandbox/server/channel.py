"""The in-sandbox server's WebSocket channel: the node agent's calls, many sessions' calls per message.

The node agent's data plane steps env sessions here (:mod:`rockroll.sandbox.node.channel`) over
one WebSocket per sandbox, on a second unix socket next to the HTTP one (``s.sock`` ->
``s.ws.sock``), served on an event loop of its own thread (uvloop where installed) by the
``websockets`` library's sans-I/O protocol driven straight from an asyncio protocol: no task, queue
or thread hand-off per message. The handshake's answer carries the server's boot id in
``X-Rockroll-Boot`` and ``X-Rockroll-Channel: frames``, which tells the agent that this server
takes frames:

* a frame is a list of calls ``[[id, op, args], ...]`` (any sessions, ids chosen by the agent);
  its answers come back as frames ``[[id, answer], ...]``, where an answer is ``{"result": ...}``
  or ``{"error": {...}}`` exactly as the HTTP socket answers (:meth:`SandboxServer.dispatch`): an
  error answers its own call only;
* the steps and resets of a session whose calls are quick (:meth:`SessionStore.quick`: an
  in-process env whose recent calls of that op took under 2 ms and that no other call holds) run
  at once on the channel's thread, and the frame's answers go back in one message: a step costs
  a dictionary lookup and the env's own work, and the per-message costs (the WebSocket frame,
  a wake-up of each process) are shared by all the calls of a frame;
* every other call (a session's first step and reset, a slow env, a custom env's worker, other
  ops) runs on a thread pool and is answered in a later frame once done, so a slow session does
  not hold up the others; answers done in the same turn of the loop share a frame;
* the calls of one session run one at a time, in the order they arrived.

The price of running quick calls inline: a call that was quick before and is slow this once (or
hangs, a bug of a built-in env) holds up the channel's other sessions for that long; its session
is not quick any more afterwards. Custom envs' calls never run inline.

A message that is one call ``{"op", "args"}`` (an agent of an earlier release) is answered
``{"result": ...}`` or ``{"error": ...}``, one at a time, on the pool.

The channel is optional: where ``websockets`` is missing (an image built without it) or the path
is too long for a unix socket, the server runs without it and clients use the HTTP socket.

Threat model: the same as the HTTP socket's (:mod:`rockroll.sandbox.server.app`): the socket file
has the same mode and owner; messages are size-capped JSON (the protocol refuses larger ones); a
malformed call is answered with an error and spoils no other call of its frame.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, cast
from typing import Protocol as Interface

from rockroll.envs.json_types import JSONValue
from rockroll.sandbox.server.wire import Answer, bad_request, dumps, loads, send_pending, whole_message

if TYPE_CHECKING:
    from rockroll.sandbox.server.agents import Agents
    from rockroll.sandbox.server.sessions import SessionStore


class SandboxServer(Interface):
    """What the channel needs of the in-sandbox server (:class:`rockroll.sandbox.server.app.SandboxServer`)."""

    boot_id: str
    agents: Agents
    sessions: SessionStore

    def dispatch(self, op: str, args: Mapping[str, object]) -> tuple[int, Answer]: ...


try:
    from websockets.frames import Frame
    from websockets.http11 import Request
    from websockets.server import ServerProtocol
except ImportError:  # pragma: no cover - an image without websockets: no channel
    _WEBSOCKETS = False
else:
    _WEBSOCKETS = True

__all__ = [
    "ChannelServer",
    "channel_path",
    "serve_channel",
    "dumps",
    "loads",
    "send_pending",
    "whole_message",
    "MAX_MESSAGE_BYTES",
    "BOOT_HEADER",
    "CHANNEL_HEADER",
]

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 32 * 1024 * 1024
BOOT_HEADER = "X-Rockroll-Boot"
CHANNEL_HEADER = "X-Rockroll-Channel"
FRAMES = "frames"
QUICK_OPS = frozenset({"env.step", "env.reset"})
"""Ops that may run on the channel's thread (when their session is quick); any other op runs on the pool."""

#: a call's arguments (a JSON object; the op's function checks them)
Args = dict[str, JSONValue]
#: a call waiting for its session's running one: (call id, op, arguments)
_Call = tuple[object, str, Args]


def channel_path(socket_path: str) -> str:
    """The channel's socket next to the HTTP socket ``socket_path``."""
    return socket_path[: -len(".sock")] + ".ws.sock" if socket_path.endswith(".sock") else socket_path + ".ws"


class _Link(asyncio.Protocol):
    """One agent's connection: the WebSocket protocol (the ``websockets`` library's sans-I/O
    ``ServerProtocol``, driven from this asyncio protocol: no task and no queue per message) and
    its calls: quick ones run at once, the rest on the pool; answers go back in frames.

    Used on the channel's event loop only (the pool hands its answers back with ``call_soon_threadsafe``).
    """

    def __init__(self, state: SandboxServer, pool: ThreadPoolExecutor, handle: ChannelServer) -> None:
        self.state, self.pool, self.handle, self.loop = state, pool, handle, handle.loop
        self.proto = ServerProtocol(max_size=MAX_MESSAGE_BYTES)
        self.quick = state.sessions.quick
        self.transport: asyncio.Transport | None = None
        self.parts: list[bytes] = []  # the fragments of a message not complete yet
        self.out: list[tuple[object, Answer]] = []  # answers not sent yet: (call id, answer)
        self.busy: dict[object, deque[_Call]] = {}  # session -> calls waiting for its running one
        self.flush_soon = False
        self.closing = False  # the closing handshake began
        self.closed = False

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a unix socket's stream transport (uvloop's is no subclass of asyncio.Transport)
        self.transport = cast(asyncio.Transport, transport)
        self.handle.links.add(self)

    def data_received(self, data: bytes) -> None:
        proto = self.proto
        proto.receive_data(data)
        for event in proto.events_received():
            if type(event) is not Frame:  # the handshake's request
                if isinstance(event, Request):
                    self._accept(event)
            else:
                message = whole_message(event, self.parts)
                if message is not None:
                    self._message(message)
        if self.out:
            proto.send_text(_encode_answers(self._take_out()))
        self._write()

    def eof_received(self) -> bool:
        self.proto.receive_eof()
        self._write()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.handle.links.discard(self)

    # ------------------------------------------------------------ the protocol
    def _accept(self, request: Request) -> None:
        response = self.proto.accept(request)
        if response.status_code == 101:
            response.headers[BOOT_HEADER] = self.state.boot_id
            response.headers[CHANNEL_HEADER] = FRAMES
        self.proto.send_response(response)

    def _write(self) -> None:
        """Send what the protocol has to send (answers, pongs, the closing handshake)."""
        transport = self.transport
        if transport is None:
            return
        send_pending(self.proto, transport)
        if not self.closing and self.proto.close_expected():
            self.closing = True
            self.loop.call_later(1.0, transport.close)  # if the agent has not closed it by then

    def _take_out(self) -> list[tuple[object, Answer]]:
        out, self.out = self.out, []
        return out

    def _flush(self) -> None:
        """Send the answers the pool gave back since the last time (one frame)."""
        self.flush_soon = False
        if self.out and not self.closed:
            self.proto.send_text(_encode_answers(self._take_out()))
            self._write()

    # ------------------------------------------------------------ calls
    def _message(self, message: bytes) -> None:
        try:
            msg = loads(message)
        except ValueError as e:
            self._send_one(bad_request(f"not JSON: {e}"))
            return
        if type(msg) is list:
            self.take(msg)
            return
        # one call (an agent of an earlier release): answered alone, one at a time
        op, args = (msg.get("op"), msg.get("args") or {}) if isinstance(msg, dict) else (None, None)
        if not isinstance(op, str) or not isinstance(args, dict):
            self._send_one(bad_request("a message is {'op': str, 'args': object}"))
            return
        waiting = self.busy.get(_ONE)
        if waiting is not None:  # the previous one still runs
            waiting.append((None, op, args))
        else:
            self._run(_ONE, None, op, args)

    def _send_one(self, payload: Answer) -> None:
        self.proto.send_text(dumps(payload))
        self._write()

    def take(self, frame: list[JSONValue]) -> None:
        """Run or queue the calls of ``frame``; their answers go to :attr:`out` (or later, from the pool)."""
        dispatch, out, busy, quick = self.state.dispatch, self.out, self.busy, self.quick
        for item in frame:
            if type(item) is not list or len(item) != 3:
                out.append((item[0] if type(item) is list and item else None, bad_request("a call is [id, op, args]")))
                continue
            cid, op, args = item
            if type(op) is not str or type(args) is not dict:
                out.append((cid, bad_request("a call is [id, op: str, args: object]")))
                continue
            sid = args.get("session_id")
            if type(sid) is not str:
                sid = None
            waiting = busy.get(sid)
            if waiting is not None:  # the session's earlier call still runs: this one goes after it
                waiting.append((cid, op, args))
            elif op in QUICK_OPS and quick(sid, op):
                out.append((cid, dispatch(op, args)[1]))
            else:
                self._run(sid, cid, op, args)

    def _run(self, sid: object, cid: object, op: str, args: Args) -> None:
        """Run a call on the pool; the session's next calls wait for it."""
        self.busy[sid] = deque()
        self._submit(sid, cid, op, args)

    def _submit(self, sid: object, cid: object, op: str, args: Args) -> None:
        try:
            self.pool.submit(self._work, sid, cid, op, args)
        except RuntimeError:  # the pool is shut down: the server is closing
            self.busy.pop(sid, None)
            self.closed = True
            if self.transport is not None:
                self.transport.abort()

    def _work(self, sid: object, cid: object, op: str, args: Args) -> None:
        """On a pool thread: run one call and hand its answer to the loop."""
        payload: Answer
        try:
            payload = self.state.dispatch(op, args)[1]
        except BaseException as e:  # noqa: BLE001 - dispatch answers errors itself; this is a last resort
            payload = {"error": {"type": type(e).__name__, "message": str(e), "attrs": {}}}
        try:
            self.loop.call_soon_threadsafe(self._done, sid, cid, payload)
        except RuntimeError:  # the loop is closed: the server is going away
            pass

    def _done(self, sid: object, cid: object, payload: Answer) -> None:
        if self.closed:
            return
        waiting = self.busy.get(sid)
        if waiting:
            self._submit(sid, *waiting.popleft())
        else:
            self.busy.pop(sid, None)
        if sid is _ONE:
            self._send_one(payload)
            return
        self.out.append((cid, payload))
        if not self.flush_soon:  # answers done in the same turn of the loop go in one frame
            self.flush_soon = True
            self.loop.call_soon(self._flush)


_ONE = object()
"""The queue of the calls sent one per message (an agent of an earlier release)."""


def _encode_answers(answers: list[tuple[object, Answer]]) -> bytes:
    """The frame's text (``[[id, answer], ...]``); an answer that is not JSON becomes an error answer of its call
    alone."""
    try:
        return dumps(answers)
    except (TypeError, ValueError):
        pass
    fixed: list[tuple[object, Answer]] = []
    for cid, payload in answers:
        try:
            dumps(payload)
        except (TypeError, ValueError) as e:
            payload = {"error": {"type": "BadResponse", "message": f"the answer is not JSON: {e}", "attrs": {}}}
        fixed.append((cid, payload))
    return dumps(fixed)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def serve_channel(socket_path: str, state: SandboxServer) -> ChannelServer | None:
    """Start the channel for ``state`` (a ``SandboxServer``) on a daemon thread; None when it cannot run."""
    if not _WEBSOCKETS:
        log.info("no websockets library: the channel is off, the HTTP socket serves every call")
        return None
    path = channel_path(socket_path)
    if os.path.exists(path):
        os.unlink(path)
    isolated = state.agents.mode == "uid"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177 if isolated else 0o111)
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        log.warning("the channel cannot listen on %s (%s): the HTTP socket serves every call", path, e)
        return None
    finally:
        os.umask(old)
    owner = os.environ.get("ROCKROLL_SOCKET_UID", "")
    if isolated and owner:
        os.chown(path, int(owner), -1)

    # slow calls each hold a pool thread while they run, as the threads of the HTTP socket do
    pool = ThreadPoolExecutor(max_workers=max(4, min(64, state.sessions.max_sessions)), thread_name_prefix="channel")
    loop = _new_loop()
    handle = ChannelServer(loop, pool)

    async def main() -> None:
        handle.server = await loop.create_unix_server(lambda: _Link(state, pool, handle), sock=sock)
        handle.started.set()
        await handle.server.serve_forever()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(main())
        except asyncio.CancelledError:  # closed
            pass
        except Exception:  # noqa: BLE001 - reported; the HTTP socket still serves every call
            log.exception("the channel stopped")
        finally:
            handle.started.set()
            loop.run_until_complete(asyncio.sleep(0))  # the closed connections' transports finish
            loop.close()

    threading.Thread(target=run, name="channel", daemon=True).start()
    handle.started.wait(30)
    return handle if handle.server is not None else None


class ChannelServer:
    """A running channel (what :func:`serve_channel` returns): :meth:`close` stops it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor) -> None:
        self.loop, self.pool = loop, pool
        self.server: asyncio.Server | None = None
        self.links: set[_Link] = set()  # the open connections
        self.started = threading.Event()

    def close(self) -> None:
        """Stop listening and drop every connection (from any thread)."""
        if self.server is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self._close)
            except RuntimeError:  # the loop is already closed
                pass
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _close(self) -> None:
        for link in list(self.links):
            if link.transport is not None:
                link.transport.close()
        if self.server is not None:
            self.server.close()
