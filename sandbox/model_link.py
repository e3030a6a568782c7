"""A sandbox's one opening: the agent's model endpoint, through a Unix socket, nothing else.

An agent program in a sandbox calls an OpenAI-compatible endpoint, yet a sandbox has no network (a fresh net
namespace, or Docker's ``none``). The link has two ends, joined by a Unix socket in a folder that both see:

* :class:`HostRelay`, on the host: listens on the socket and relays each connection to the model service's
  TCP address (loopback). It is the only thing the socket reaches: the agent cannot name another address.
  It lies in the sandbox's ``link`` folder (:func:`make_link_dir`), which the sandbox sees read-only at
  :data:`~rockroll.sandbox.confine.LINK_DIR` (:func:`link_socket` gives both paths).
* the forwarder, in the sandbox (``python -m rockroll.sandbox.model_link --socket PATH -- CMD ...``): listens
  on the sandbox's own loopback (a free port), relays each connection to the socket, and runs ``CMD`` with
  ``OPENAI_BASE_URL`` pointing at that port (``OPENAI_API_KEY`` comes from the caller: the episode's key).
  It exits with ``CMD``'s status, and the port dies with it.

Both ends bound what they carry: at most :data:`MAX_CONNECTIONS` connections open at once (more wait), and a
connection idle for :data:`IDLE_S` seconds is closed. The service behind still checks the key of every
request (:mod:`rockroll.agentrl.serving.guard`): the link opens a path, the key says whose calls they are.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rockroll.sandbox.confine import LINK_DIR, LINK_SUBDIR

if TYPE_CHECKING:
    from rockroll.sandbox.base import SandboxHandle

__all__ = ["HostRelay", "MAX_CONNECTIONS", "IDLE_S", "SOCKET_NAME", "make_link_dir", "link_socket", "main"]

MAX_CONNECTIONS = 64
IDLE_S = 600.0
CHUNK = 65536

SOCKET_NAME = "model.sock"

Opener = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


def make_link_dir(sandbox_dir: Path) -> Path:
    """The ``link`` folder of a sandbox's host directory (0755: the sandbox's agent uids may reach its socket;
    bound read-only at :data:`~rockroll.sandbox.confine.LINK_DIR`, so they cannot replace it)."""
    d = Path(sandbox_dir) / LINK_SUBDIR
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o755)
    return d


def link_socket(handle: SandboxHandle) -> tuple[Path, str]:
    """Where the host's relay of sandbox ``handle`` listens, and the path the sandbox knows that socket by."""
    host_dir = Path(handle.extra.get("dir") or os.path.dirname(handle.socket_path))
    inside = LINK_DIR if handle.backend == "docker" or handle.extra.get("isolation") == "bwrap" else None
    return host_dir / LINK_SUBDIR / SOCKET_NAME, f"{inside or host_dir / LINK_SUBDIR}/{SOCKET_NAME}"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await asyncio.wait_for(reader.read(CHUNK), IDLE_S):
            writer.write(data)
            await writer.drain()
    except (TimeoutError, OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


def _relay(open_target: Opener, slots: asyncio.Semaphore) -> Callable[..., Awaitable[None]]:
    """A connection handler that joins each client to a new connection of ``open_target``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with slots:
            try:
                up_reader, up_writer = await asyncio.wait_for(open_target(), 30)
            except (TimeoutError, OSError):
                writer.close()
                return
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return handle


class HostRelay:
    """The host's end (see the module docstring): ``socket_path`` -> ``target`` (host, port), in a thread.

    The socket is made connectable by any uid (mode 0666: the sandbox's agent uid is not the host's); what keeps
    others off it is the folder it lies in, which only that sandbox sees.
    """

    def __init__(self, socket_path: str | Path, target: tuple[str, int], max_connections: int = MAX_CONNECTIONS):
        self.path = Path(socket_path)
        self.target = target
        self.max_connections = max_connections
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> HostRelay:
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                slots = asyncio.Semaphore(self.max_connections)
                handler = _relay(lambda: asyncio.open_connection(*self.target), slots)
                self.path.unlink(missing_ok=True)
                self._server = loop.run_until_complete(asyncio.start_unix_server(handler, str(self.path)))
                os.chmod(self.path, 0o666)
            except BaseException as e:  # noqa: BLE001 - handed to start()
                failed.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            self._server.close()
            loop.run_until_complete(self._server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=run, name=f"model-link {self.path.name}", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failed:
            raise failed[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> HostRelay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _forwarder(socket_path: str, max_connections: int) -> tuple[int, asyncio.AbstractEventLoop]:
    """Start the sandbox's end on 127.0.0.1 (a free port) in a thread; returns the port and its loop."""
    found: list[int] = []
    ready = threading.Event()
    loop = asyncio.new_event_loop()

    def run() -> None:
        asyncio.set_event_loop(loop)
        slots = asyncio.Semaphore(max_connections)
        handler = _relay(lambda: asyncio.open_unix_connection(socket_path), slots)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        server = loop.run_until_complete(asyncio.start_server(handler, sock=sock))
        found.append(int(sock.getsockname()[1]))
        ready.set()
        loop.run_forever()
        server.close()

    threading.Thread(target=run, name="model-link forwarder", daemon=True).start()
    if not ready.wait(30):
        raise RuntimeError("the model link's forwarder did not start")
    return found[0], loop


def main(argv: list[str] | None = None) -> int:
    """The sandbox's end: forward, run the command, exit with its status (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m rockroll.sandbox.model_link", description=__doc__.splitlines()[0])
    ap.add_argument("--socket", required=True, help="the Unix socket of the host's relay")
    ap.add_argument("--path", default="/v1", help="the endpoint's path on the service (OPENAI_BASE_URL's tail)")
    ap.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS)
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the agent's command")
    args = ap.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("give the agent's command after --")
    if not Path(args.socket).exists():
        print(f"model link: no socket at {args.socket} (is the host's relay up?)", file=sys.stderr)
        return 2
    port, loop = _forwarder(args.socket, args.max_connections)
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}{args.path}"}
    try:
        return subprocess.call(cmd, env=env)
    finally:
        loop.call_soon_threadsafe(loop.stop)


if __name__ == "__main__":
    raise SystemExit(main())
