"""``python -m rockroll.sandbox.server --socket PATH --workspace DIR [--max-sessions N] [--lifeline FD]
[--adopt-timeout-s S] [--private-pids]``.

The server ends promptly: SIGTERM (or the close of its ``--lifeline``, the pipe whose write end the
process backend's manager holds: :mod:`rockroll.sandbox.process`) closes its sessions for at most
:data:`GRACE_S`, then kills what its agents still run (every running command's process group, its children
and every process of its agent uids, which would otherwise keep a bwrap pid namespace alive) and exits
without waiting for busy threads: a data-plane step or a command in flight never holds it up.

A sandbox handed over on its lifeline (``k``) that no manager adopts within ``--adopt-timeout-s``
ends the same way (:mod:`rockroll.sandbox.server.handover`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType

from rockroll.sandbox.server.agents import AGENT_UID_ENV
from rockroll.sandbox.server.app import serve
from rockroll.sandbox.server.execs import kill_running
from rockroll.sandbox.server.handover import ADOPT_TIMEOUT_S, Handover

#: seconds the server may spend closing its sessions after SIGTERM before it exits regardless
GRACE_S = 2.0


def _children_and_agents(uids: range) -> list[int]:
    """This server's direct children (a command still between fork and its agent uid) and every process
    of the agent uids, as this server's pid namespace shows them."""
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            with open(f"{entry.path}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            if ppid == me or os.stat(entry.path).st_uid in uids:
                found.append(int(entry.name))
    return found


def _reap() -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _kill_agents(max_sessions: int, patience_s: float = 2.0) -> None:
    """SIGKILL every running command's group, this server's children and every process of the agent
    uids, until a pass over ``/proc`` finds none.

    The children count because a command just started runs as the server's uid until ``setpriv``
    changes it, and is not yet among the running commands: missed, it would outlive the server and
    hold a bwrap pid namespace open. A process forked during a pass has a parent that pass kills,
    so the next pass sees it."""
    kill_running()
    first = int(os.environ.get(AGENT_UID_ENV) or 0)
    uids = range(first, first + max_sessions + 1)
    if first <= 0 or os.geteuid() in uids:
        uids = range(0)
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        found = False
        _reap()
        for pid in _children_and_agents(uids):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                found = True
        if not found:
            break
        _reap()
        time.sleep(0.002)


def _end(code: int, max_sessions: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        _kill_agents(max_sessions)
    os._exit(code)


def _on_term(max_sessions: int) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the rest of the way out is not interrupted
        try:  # the way out below closes the sessions; this deadline ends the server if that hangs
            threading.Timer(GRACE_S, _end, (128 + signum, max_sessions)).start()
        except RuntimeError:  # no thread to be had (a full pids limit): end now
            _end(128 + signum, max_sessions)
        raise SystemExit(128 + signum)

    return handler


def _watch_lifeline(fd: int, handover: Handover) -> None:
    """SIGTERM this server when the lifeline closes, unless its holder handed the sandbox over (``k``):
    then the handover's countdown starts."""
    try:
        data = os.read(fd, 1)
    except OSError:
        data = b""
    if data != b"k":
        _sigterm()
    else:
        handover.handed_over()


def _sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m rockroll.sandbox.server", description=__doc__)
    p.add_argument("--socket", default=os.environ.get("ROCKROLL_SOCKET", "/run/rockroll/server.sock"))
    p.add_argument("--workspace", default=os.environ.get("ROCKROLL_WORKSPACE", "/workspace"))
    p.add_argument("--max-sessions", type=int, default=int(os.environ.get("ROCKROLL_MAX_SESSIONS", "16")))
    p.add_argument("--label", action="append", default=[], help="key=value, for finding the process (ignored)")
    p.add_argument("--lifeline", type=int, default=-1, help="a pipe's read end: exit when it closes")
    p.add_argument(
        "--adopt-timeout-s", type=float, default=ADOPT_TIMEOUT_S,
        help="after a handover on the lifeline, exit when no manager holds the sandbox this long (0: never)",
    )  # fmt: skip
    p.add_argument("--private-pids", action="store_true", help="this server has a pid namespace of its own")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term(args.max_sessions))
    handover = None
    if args.lifeline >= 0:
        os.set_inheritable(args.lifeline, False)  # agent commands do not hold it
        handover = Handover(args.adopt_timeout_s, private_pids=args.private_pids, expire=_sigterm)
        watch = threading.Thread(target=_watch_lifeline, args=(args.lifeline, handover), name="lifeline", daemon=True)
        watch.start()
    code = 1
    try:
        serve(args.socket, args.workspace, args.max_sessions, handover)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - said, then the way out below ends the process
        traceback.print_exc()
    finally:
        _end(code, args.max_sessions)


if __name__ == "__main__":
    main()
