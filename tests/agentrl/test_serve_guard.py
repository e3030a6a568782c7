"""``rockroll serve-model`` guards its compute (a real server subprocess): an API key (401 without it),
a body limit (413 while read), strict prompts (``[[true]]`` is no token id), generation that stops
when its client leaves, SIGTERM that stops the server mid-request, and a missing folder in two lines."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

from tests.agentrl.model_server import ROCKROLL, model_server, model_server_proc  # noqa: E402

KEY = "sk-test-0123"
#: 64 token-id prompts x n=16 x 2,000 greedy tokens: minutes of decoding for the tiny model on one core
LONG = {"model": "tiny", "prompt": [[5, 6, 7 + i] for i in range(64)], "n": 16, "max_tokens": 2000, "temperature": 0}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("guard") / "model", TinyModelConfig(episodes_per_env=3))


@pytest.fixture(scope="module")
def url(model: Path) -> Iterator[str]:
    with model_server(model, env={"ROCKROLL_MODEL_API_KEY": KEY}) as u:
        yield u


def _auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _wait(cond, what: str, deadline_s: float = 30.0) -> None:  # noqa: ANN001
    end = time.monotonic() + deadline_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s} s waiting for {what}")
        time.sleep(0.05)


def _running(url: str) -> int:
    return int(httpx.get(url + "/health", timeout=5).json()["running"] or 0)


def _send_raw(url: str, body: dict) -> socket.socket:
    """POST ``body`` to /v1/completions on a raw socket (closing it is the client leaving)."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    s = socket.create_connection((host, int(port)))
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    s.sendall(head.encode() + data)
    return s


@pytest.mark.slow
def test_api_key_is_required_except_for_health(url: str) -> None:
    assert httpx.get(url + "/health").status_code == 200
    for headers in ({}, _auth("sk-wrong"), {"Authorization": KEY}):
        r = httpx.get(url + "/v1/models", headers=headers)
        assert r.status_code == 401, (headers, r.text)
        assert r.json()["error"]["code"] == "invalid_api_key" and r.json()["error"]["message"]
    r = httpx.post(url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2})
    assert r.status_code == 401
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    assert [m.id for m in client.models.list().data] == ["tiny"]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="nope", max_retries=0).models.list()


@pytest.mark.parametrize("prompt", [[[True]], [True, 5], [1.5], [[1, 2], [True]], [[1.0]]])
def test_prompts_that_are_not_token_ids_are_refused(url: str, prompt: list) -> None:
    r = httpx.post(url + "/v1/completions", json={"prompt": prompt, "max_tokens": 2}, headers=_auth())
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error" and r.json()["error"]["param"].startswith("prompt")


def test_a_body_past_the_limit_is_refused_while_read(url: str) -> None:
    big = b'{"prompt": "' + b"a" * (9 * 1024 * 1024) + b'"}'
    r = httpx.post(url + "/v1/completions", content=big, headers={**_auth(), "Content-Type": "application/json"})
    assert r.status_code == 413 and "exceeds" in r.json()["error"]["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"prompt": "'
        for _ in range(10):
            yield b"a" * (1024 * 1024)
        yield b'"}'

    r = httpx.post(url + "/v1/completions", content=chunks(), headers={**_auth(), "Content-Type": "application/json"})
    assert r.status_code == 413, r.text


def test_generation_stops_when_the_client_leaves(url: str) -> None:
    s = _send_raw(url, LONG)
    try:
        _wait(lambda: _running(url) > 0, "the request to be decoding")
    finally:
        s.close()  # the client leaves without reading its answer
    _wait(lambda: _running(url) == 0, "the engine to drop the abandoned rows", deadline_s=10.0)
    # the server is free again: a short request answers at once
    r = httpx.post(url + "/v1/completions", json={"prompt": [5, 6], "max_tokens": 2}, headers=_auth(), timeout=10)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2


@pytest.mark.slow
def test_sigterm_stops_the_server_mid_request(model: Path) -> None:
    with model_server_proc(model) as (url, proc):
        s = _send_raw(url, LONG)
        try:
            _wait(lambda: _running(url) > 0, "the request to be decoding")
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
            assert time.monotonic() - t0 < 6, "SIGTERM took too long to stop the server"
        finally:
            s.close()


def test_a_missing_model_folder_is_one_or_two_lines(tmp_path: Path) -> None:
    for path in (tmp_path / "nope", tmp_path):
        r = subprocess.run([ROCKROLL, "serve-model", str(path)], capture_output=True, text=True, timeout=60)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and 1 <= len(lines) <= 2, r.stderr
        assert "crashed" not in r.stderr and "Traceback" not in r.stderr and str(path) in lines[0]
