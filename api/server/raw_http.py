"""A raw HTTP POST over a socket, for probing a server's body limits (used by tests/security and bench/security).

An HTTP client sends a whole body before it reads the answer; a body-limit probe must stop sending as
soon as the server answers (or closes), so :func:`post_stream` writes the request by hand on a plain
socket, a chunk at a time, and then reads what came back. Every loop is bounded by the body's size and
one deadline; it only ever talks to the ``endpoint`` it is given (the tests and benches use 127.0.0.1).
"""

from __future__ import annotations

import select
import socket
import time
from urllib.parse import urlsplit

__all__ = ["CHUNK", "MAX_ANSWER", "post_stream"]

CHUNK = 64 * 1024  #: body bytes per send
MAX_ANSWER = 1 << 20  #: reading stops once the answer holds more than this many bytes


def post_stream(
    endpoint: str,
    head: str,
    total: int,
    path: str = "/v1/node/step",
    *,
    chunked: bool = False,
    head_only: bool = False,
    timeout_s: float = 20.0,
) -> tuple[bytes, int]:
    """POST a body of ``total`` bytes (made lazily, :data:`CHUNK` at a time) to ``path`` on ``endpoint`` and
    stop sending once an answer arrives or the peer closes.

    ``head`` holds extra header lines, each ending in ``\\r\\n``; the body is framed by ``Content-Length``,
    or with ``chunked`` by ``Transfer-Encoding: chunked`` (never finished: the peer must refuse it first).
    Returns ``(what it answered until it closed, the deadline, MAX_ANSWER bytes or, with head_only, the end
    of the answer's head; body bytes sent)``.
    """
    url = urlsplit(endpoint)
    sock = socket.create_connection((url.hostname, url.port), timeout=timeout_s)
    try:
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}{framing}\r\n\r\n".encode())
        deadline = time.monotonic() + timeout_s
        sent = _send_body(sock, total, chunked, deadline)
        return _read_answer(sock, deadline, head_only), sent
    finally:
        sock.close()


def _send_body(sock: socket.socket, total: int, chunked: bool, deadline: float) -> int:
    """Send up to ``total`` body bytes until the peer answers, closes or the deadline passes: bytes sent."""
    frame = f"{CHUNK:x}\r\n".encode() + b" " * CHUNK + b"\r\n" if chunked else b" " * CHUNK
    sent = 0
    try:
        while sent < total and time.monotonic() < deadline:  # at most total / CHUNK sends
            if select.select([sock], [], [], 0)[0]:
                break  # answered (or closed) while the body was still going out
            if select.select([], [sock], [], 0.5)[1]:
                sock.sendall(frame)
                sent += CHUNK
    except (BrokenPipeError, ConnectionResetError):
        pass  # answered and closed: the answer is still there to read
    return sent


def _read_answer(sock: socket.socket, deadline: float, head_only: bool) -> bytes:
    """What the peer answers until it closes, the deadline, :data:`MAX_ANSWER` or (``head_only``) a whole head."""
    answer = b""
    try:
        while time.monotonic() < deadline and not (head_only and b"\r\n\r\n" in answer):
            if not select.select([sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break  # the deadline passed with nothing more to read
            data = sock.recv(65536)
            if not data or len(answer) > MAX_ANSWER:
                break  # closed by the peer, or enough
            answer += data
    except ConnectionResetError:
        pass
    return answer
