"""The in-sandbox server reads request bodies under its limit: a chunked body is cut at the limit with
413, a malformed length or chunk is a 400, never a traceback (issue 35, hole A)."""

from __future__ import annotations

import re
import select
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest

import rockroll.sandbox.server.app as server_app
from rockroll.sandbox.server.app import SandboxServer, make_httpd

LIMIT = 1024 * 1024
BODY = 64 * 1024 * 1024
CHUNK = 64 * 1024


@pytest.fixture
def sock_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(server_app, "MAX_REQUEST_BYTES", LIMIT)
    d = tempfile.mkdtemp(prefix="rr-body-", dir="/tmp")  # a short path: unix socket paths are limited
    state = SandboxServer(f"{d}/ws", max_sessions=2)
    path = f"{d}/s.sock"
    httpd = make_httpd(path, state)
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield path
    finally:
        httpd.shutdown()
        httpd.server_close()
        state.sessions.close_all()
        shutil.rmtree(d, ignore_errors=True)


def post(path: str, head: bytes, frames: Iterator[bytes], timeout_s: float = 30.0) -> tuple[bytes, int]:
    """Send ``POST /health`` with ``head`` (header lines) and then ``frames`` until an answer arrives:
    ``(the answer, bytes of frames sent)``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    s.connect(path)
    s.sendall(b"POST /health HTTP/1.1\r\nHost: sandbox\r\n" + head + b"\r\n")
    sent, deadline = 0, time.monotonic() + timeout_s
    try:
        for frame in frames:  # each generator below is bounded
            if select.select([s], [], [], 0)[0] or time.monotonic() > deadline:
                break
            if select.select([], [s], [], 1.0)[1]:
                s.sendall(frame)
                sent += len(frame)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server stopped reading and closed: its answer is still there to read
    try:
        return read_answer(s, deadline), sent
    finally:
        s.close()


def read_answer(s: socket.socket, deadline: float) -> bytes:
    """The answer's head and its ``Content-Length`` bytes of body (what came before the deadline)."""
    answer = b""
    while time.monotonic() < deadline:
        head, sep, body = answer.partition(b"\r\n\r\n")
        if sep and len(body) >= int(re.search(rb"Content-Length: (\d+)", head).group(1)):
            break
        if select.select([s], [], [], 1.0)[0]:
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            answer += data
    return answer


def chunks(total: int) -> Iterator[bytes]:
    frame = f"{CHUNK:x}\r\n".encode() + b" " * CHUNK + b"\r\n"
    for _ in range(total // CHUNK):
        yield frame


def test_a_chunked_body_past_the_limit_is_cut_with_413(sock_path: str) -> None:
    answer, sent = post(sock_path, b"Transfer-Encoding: chunked\r\n", chunks(BODY))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert sent < BODY // 2


def test_a_chunked_body_under_the_limit_is_read(sock_path: str) -> None:
    body = b'{"x": 1}'  # health takes no argument: a typed 400 naming it, so the body was read and parsed
    frames = iter([f"{len(body):x}\r\n".encode() + body + b"\r\n", b"0\r\n\r\n"])
    answer, _ = post(sock_path, b"Transfer-Encoding: chunked\r\n", frames)
    assert answer.startswith(b"HTTP/1.1 400") and b"health" in answer, answer[:300]
    answer, _ = post(sock_path, b"Transfer-Encoding: chunked\r\n", iter([b"0\r\n\r\n"]))
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]


@pytest.mark.parametrize(
    ("head", "frames"),
    [
        (b"Content-Length: lots\r\n", []),
        (b"Content-Length: -5\r\n", []),
        (b"Transfer-Encoding: chunked\r\n", [b"zz\r\n"]),
        (b"Transfer-Encoding: chunked\r\n", [b"1_0\r\n"]),
        (b"Transfer-Encoding: gzip\r\n", []),
        (b"Content-Length: 5\r\n", [b"[[[[["]),
    ],
)
def test_a_malformed_body_is_a_400_without_a_traceback(
    sock_path: str, head: bytes, frames: list[bytes], capfd: pytest.CaptureFixture[str]
) -> None:
    answer, _ = post(sock_path, head, iter(frames))
    assert answer.startswith(b"HTTP/1.1 400"), answer[:300]
    assert "Traceback" not in capfd.readouterr().err
