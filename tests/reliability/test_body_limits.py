"""Oversized bodies and uploads are refused with 413 before they are read whole (a real server).

* a ``Content-Length`` over the limit is answered at once, although the body is never sent (a
  server that read the body first would wait for it);
* a chunked body is refused once it passes the limit, while the client is still sending;
* an env upload whose decoded source exceeds ``max_upload_bytes`` gets 413 ``too_large``.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from rockroll.api.routes.sandboxes import MAX_FILE_BYTES
from rockroll.api.server.body_limit import body_limit_for
from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.api.server.settings import Settings

LIMIT = body_limit_for(Settings().max_upload_bytes, MAX_FILE_BYTES)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[ServerProc, str]]:
    srv = ServerProc(scratch_dir("limits"), extra=["--pool-size", "0", "--no-train-jobs"])
    token = create_token(srv.db_url, "limits")
    srv.start()
    yield srv, token
    srv.cleanup()


def _answer(sock: socket.socket) -> tuple[int, dict]:
    """Status and JSON body of the answer (``Content-Length`` or chunked, read until complete)."""
    data = b""
    for _ in range(1000):  # bounded
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            headers = head.decode(errors="replace").lower()
            if "content-length:" in headers:
                n = int(headers.split("content-length:")[1].split()[0])
                if len(body) >= n:
                    return int(head.split()[1]), json.loads(body[:n])
            elif body.endswith(b"0\r\n\r\n"):
                size, _, rest = body.partition(b"\r\n")
                return int(head.split()[1]), json.loads(rest[: int(size, 16)])
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    raise AssertionError(f"incomplete answer: {data[:300]!r}")


def _connect(url: str) -> socket.socket:
    u = urlparse(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=10)
    return sock


@pytest.mark.parametrize(
    "method,path", [("POST", "/v1/envs"), ("PUT", "/v1/sandboxes/sb-x/files?path=a"), ("POST", "/v1/sessions")]
)
def test_declared_length_over_the_limit_is_refused_unread(
    server: tuple[ServerProc, str], method: str, path: str
) -> None:
    srv, token = server
    with _connect(srv.url) as sock:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {LIMIT + 1}\r\n\r\n"
        )
        sock.sendall(head.encode() + b"{")  # one byte of the body, then nothing
        status, body = _answer(sock)
    assert status == 413 and body["error"]["code"] == "too_large"


def test_chunked_body_is_refused_while_being_sent(server: tuple[ServerProc, str]) -> None:
    srv, token = server
    chunk = b"a" * (1 << 20)
    sent = 0
    with _connect(srv.url) as sock:
        head = (
            f"POST /v1/envs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        sock.sendall(head.encode())
        try:
            while sent < 4 * LIMIT:  # bounded: a server that buffers everything would take it all
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
                sock.settimeout(0.001)
                try:
                    if sock.recv(1, socket.MSG_PEEK):
                        break
                except (TimeoutError, BlockingIOError):
                    pass
                finally:
                    sock.settimeout(10)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, body = _answer(sock)
    assert status == 413 and body["error"]["code"] == "too_large"
    assert sent < 4 * LIMIT  # refused while the client was still sending


def test_env_upload_over_max_upload_bytes(server: tuple[ServerProc, str]) -> None:
    from rockroll.client.sdk import ApiClientError, Client

    srv, token = server
    source = b"#" * (Settings().max_upload_bytes + 1)
    body = {"id": "Big-v0", "kind": "source", "entry_point": "big:Big", "source_name": "big.py",
            "source_b64": base64.b64encode(source).decode()}  # fmt: skip
    with Client(srv.url, token) as c:
        with pytest.raises(ApiClientError) as e:
            c.request("POST", "/v1/envs", json=body)
        assert e.value.status == 413 and e.value.code == "too_large"
        assert c.health()["status"] == "ok"
