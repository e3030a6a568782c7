"""The manager's side of a handover: adopting a process sandbox holds it, so it does not stop by itself.

A process sandbox handed over by a closing manager (:meth:`~rockroll.sandbox.process.ProcessBackend.release`)
waits ``adopt_timeout_s`` for the next manager, then stops (:mod:`rockroll.sandbox.server.handover`).
:func:`hold` is how a manager adopts it (reconciliation calls it): ``POST /adopt`` on the sandbox's
socket, and the connection then stays open as the sandbox's new lifeline, kept with the lifelines of
the sandboxes this process started. So the rest follows from what the backend already does with
those: :meth:`~rockroll.sandbox.process.ProcessBackend.release` hands it over again (the countdown
restarts), :meth:`~rockroll.sandbox.process.ProcessBackend.stop` lets go of it, and when this
process dies, however it dies, the kernel closes it and the countdown restarts for the next manager.

Threat model: the sandbox is untrusted; its answer is one small JSON object, read with a timeout.
Only a caller outside the sandbox may hold it (the server checks ``SO_PEERCRED``).
"""

from __future__ import annotations

import http.client
import json
import logging
import socket

from rockroll.sandbox.base import SandboxBackend, SandboxHandle
from rockroll.sandbox.process import _LIFELINES, ProcessBackend

__all__ = ["hold"]

log = logging.getLogger(__name__)
#: the largest answer to ``POST /adopt`` read
_MAX_ANSWER = 4096
_REQUEST = b"POST /adopt HTTP/1.1\r\nHost: sandbox\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def hold(backend: SandboxBackend, handle: SandboxHandle, timeout_s: float = 2.0) -> bool:
    """Adopt the sandbox of ``handle``: True when this process now holds it (its countdown stands still).

    False, with a warning when something failed, for a sandbox that has no countdown (another
    backend, a ``survive_owner`` sandbox, a server of before adoption) or did not answer in ``timeout_s``.
    """
    if not isinstance(backend, ProcessBackend):
        return False
    pid = int(handle.ref)
    if pid in _LIFELINES:  # started by this process and never handed over: held already
        return True
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec: no child inherits the hold
    held = False
    try:
        sock.settimeout(timeout_s)
        sock.connect(handle.socket_path)
        sock.sendall(_REQUEST)
        resp = http.client.HTTPResponse(sock)
        try:
            resp.begin()
            answer = json.loads(resp.read(_MAX_ANSWER) or b"{}")
        finally:
            resp.close()
        result = answer.get("result") if isinstance(answer, dict) else None
        held = resp.status == 200 and isinstance(result, dict) and result.get("held") is True
        if resp.status not in (200, 404):  # 404: a server of before adoption, without a countdown
            log.warning("sandbox %s refused adoption: %s %s", handle.sandbox_id, resp.status, answer)
    except (OSError, http.client.HTTPException, ValueError) as e:
        log.warning("cannot adopt sandbox %s: %s: %s", handle.sandbox_id, type(e).__name__, e)
    if not held:
        sock.close()
        return False
    sock.settimeout(None)
    _LIFELINES[pid] = sock.detach()  # the backend's own: release() and stop() let go of it
    return True
