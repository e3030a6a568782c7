"""The agent's hot path into a sandbox: one asyncio WebSocket per session to the sandbox's channel.

A data-plane step runs on the agent's event loop from the client's message to the sandbox and
back, without a worker thread and without an HTTP request per step: :class:`SessionChannel`
talks to the in-sandbox server's channel (:mod:`rockroll.sandbox.server.channel`), pinned to the
boot id of the incarnation the session lives in. Errors come back as the types a
:class:`~rockroll.sandbox.session.RemoteSession` raises: a dropped channel, another boot id, or a
server that no longer knows the session is :class:`~rockroll.sandbox.errors.SandboxLost` (and the
sandbox's monitor is asked to probe it).

Where the sandbox has no channel (an image without ``websockets``), :func:`open_channel`
returns None and the agent steps through the session's HTTP client on a worker thread.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.asyncio.client import ClientConnection, unix_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from rockroll.sandbox.client import _to_exception
from rockroll.sandbox.errors import SandboxLost, SandboxTimeout, SessionLost, SessionNotFound
from rockroll.sandbox.server.channel import BOOT_HEADER, MAX_MESSAGE_BYTES, channel_path
from rockroll.sandbox.session import RemoteSession

__all__ = ["SessionChannel", "open_channel"]

OPEN_TIMEOUT_S = 5.0


class SessionChannel:
    """One session's WebSocket to its sandbox (use from one event loop; one call at a time)."""

    def __init__(self, remote: RemoteSession, ws: ClientConnection) -> None:
        self.remote = remote
        self._ws = ws
        self._generation = remote.sandbox.generation
        self._loop = asyncio.get_running_loop()

    async def call(self, op: str, timeout_s: float = 60.0, **args: Any) -> Any:
        """Run ``op`` on the session (``session_id`` is added); its result, or its error raised typed."""
        remote = self.remote
        if remote.closed:
            raise SessionNotFound(remote.session_id)
        if remote.sandbox.generation != self._generation or remote.sandbox.deleted:
            raise SandboxLost(remote.sandbox_id, "the sandbox was restarted or deleted")
        text = json.dumps({"op": op, "args": {"session_id": remote.session_id, **args}}, separators=(",", ":"))
        try:
            async with asyncio.timeout(timeout_s):  # no task per call, unlike wait_for
                await self._ws.send(text)
                answer = json.loads(await self._ws.recv())
        except ConnectionClosed as e:
            remote.sandbox.report_failure()
            raise SandboxLost(remote.sandbox_id, f"the sandbox's channel dropped during {op}") from e
        except TimeoutError as e:
            await self.close()
            raise SandboxTimeout(
                f"sandbox {remote.sandbox_id} did not answer {op} within {timeout_s:.1f}s",
                sandbox_id=remote.sandbox_id, timeout_s=timeout_s,
            ) from e  # fmt: skip
        if "error" in answer:
            err = _to_exception(answer["error"])
            if isinstance(err, SessionNotFound):
                raise SandboxLost(remote.sandbox_id, "the server no longer knows this session") from err
            if isinstance(err, SessionLost):
                err.sandbox_id = err.sandbox_id or remote.sandbox_id
            raise err
        return answer.get("result")

    async def close(self) -> None:
        await self._ws.close()

    def close_soon(self) -> None:
        """Close from any thread (the session was detached): scheduled on the channel's loop."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(self.close()))


async def open_channel(remote: Any) -> SessionChannel | None:
    """A channel for ``remote`` (a :class:`RemoteSession`), or None where its sandbox has none."""
    if not isinstance(remote, RemoteSession):
        return None
    client = remote._client
    try:
        ws = await unix_connect(
            channel_path(client.socket_path), uri="ws://sandbox/", compression=None,
            max_size=MAX_MESSAGE_BYTES, open_timeout=OPEN_TIMEOUT_S, ping_interval=None,
        )  # fmt: skip
    except (OSError, InvalidHandshake, TimeoutError):
        return None
    boot = ws.response.headers.get(BOOT_HEADER, "") if ws.response is not None else ""
    if client.boot_id and boot != client.boot_id:
        await ws.close()
        raise SandboxLost(remote.sandbox_id, "the sandbox was replaced by a new server")
    return SessionChannel(remote, ws)
