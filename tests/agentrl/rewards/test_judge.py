"""The ``judge`` reward against a small FastAPI fake (parse failures, endpoint errors, concurrency and
rate caps) and once against a real ``rockroll serve-model`` with the tiny model."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from rockroll.agentrl.rewards import JudgeEndpointError, JudgeParseError, RewardRouter, Sample, make_reward
from rockroll.sandbox.retry import wait_until


class Fake:
    """What the fake judge answers (``mode``) and what it saw."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.bodies: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.started: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.hold_until = 0  # requests wait (bounded) until this many are in flight


def fake_app(fake: Fake) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        fake.bodies.append(body)
        fake.auth.append(request.headers.get("authorization", ""))
        fake.started.append(time.monotonic())
        fake.in_flight += 1
        fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        deadline = time.monotonic() + 2
        while fake.in_flight < fake.hold_until and time.monotonic() < deadline:
            await asyncio.sleep(0.005)  # the fake server's own pacing: wait for the cap to fill
        fake.in_flight -= 1
        if fake.mode == "500":
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
        if fake.mode == "badjson":
            return PlainTextResponse("not json")
        text = "Looks right.\nSCORE: 7" if fake.mode == "ok" else "I like it a lot."
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    return app


@pytest.fixture(scope="module")
def judge_url() -> Iterator[tuple[str, Fake]]:
    fake = Fake()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(fake_app(fake), log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    assert wait_until(lambda: server.started, 60), "uvicorn did not start"
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", fake
    server.should_exit = True
    thread.join(10)
    sock.close()


def run(router: RewardRouter, n: int, tag: str = "j") -> list[Any]:
    return router.score_batch_sync([Sample(f"task {i}", tag, {"answer": "42"}) for i in range(n)], ["42"] * n)


def test_a_score_is_read_and_normalised(judge_url: tuple[str, Fake], monkeypatch: pytest.MonkeyPatch) -> None:
    url, fake = judge_url
    fake.mode = "ok"
    monkeypatch.setenv("RR_JUDGE_KEY", "sekret")
    r = make_reward("judge", {"base_url": url, "model": "m", "api_key_env": "RR_JUDGE_KEY"})
    out = asyncio.run(r("What is 6*7?", "42", {"answer": "42"}))
    assert out.score == pytest.approx(0.7) and out.details["raw_score"] == 7
    body = fake.bodies[-1]
    assert body["model"] == "m" and "What is 6*7?" in body["messages"][-1]["content"]
    assert "Reference answer:\n42" in body["messages"][-1]["content"] and fake.auth[-1] == "Bearer sekret"


@pytest.mark.parametrize(
    ("mode", "error"), [("garbage", "no score matching"), ("500", "HTTP 500"), ("badjson", "not a chat completion")]
)
def test_parse_and_endpoint_failures_are_infra(judge_url: tuple[str, Fake], mode: str, error: str) -> None:
    url, fake = judge_url
    fake.mode = mode
    r = make_reward("judge", {"base_url": url})
    with pytest.raises(JudgeParseError if mode == "garbage" else JudgeEndpointError, match=error):
        asyncio.run(r("q", "a", {}))
    with RewardRouter({"routes": {"j": {"reward": "judge", "options": {"base_url": url}}}}) as router:
        (out,) = run(router, 1)
    assert out.infra and out.score == 0.0 and error in out.error


def test_an_endpoint_that_is_down_is_infra() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens
    with RewardRouter(
        {"routes": {"j": {"reward": "judge", "options": {"base_url": f"http://127.0.0.1:{port}"}}}}
    ) as router:
        (out,) = run(router, 1)
    assert out.infra and "JudgeEndpointError" in out.error and "ConnectError" in out.error


def test_requests_are_capped_and_rate_limited(judge_url: tuple[str, Fake]) -> None:
    url, fake = judge_url
    fake.mode, fake.max_in_flight, fake.hold_until = "ok", 0, 3
    options = {"base_url": url, "max_concurrency": 3, "requests_per_s": 0}
    with RewardRouter({"routes": {"j": {"reward": "judge", "options": options}}}) as router:
        out = run(router, 12)
    assert [o.score for o in out] == [0.7] * 12 and fake.max_in_flight == 3
    fake.hold_until, before = 0, len(fake.started)
    options = {"base_url": url, "max_concurrency": 16, "requests_per_s": 4}
    with RewardRouter({"routes": {"j": {"reward": "judge", "options": options}}}) as router:
        out = run(router, 8)
    starts = fake.started[before:]
    assert not any(o.infra for o in out) and len(starts) == 8
    assert max(starts) - min(starts) >= 0.75  # a 4/s bucket: 4 at once, then one each 0.25 s


@pytest.mark.slow
def test_a_real_served_model_as_the_judge(tmp_path_factory: pytest.TempPathFactory) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model
    from tests.agentrl.model_server import model_server

    torch.set_num_threads(1)
    cfg = TinyModelConfig(
        hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, episodes_per_env=3
    )
    model = build_tiny_model(tmp_path_factory.mktemp("judge") / "model", cfg)
    with model_server(Path(model), name="tiny") as url:
        options = {"base_url": url, "model": "tiny", "max_tokens": 12, "score_pattern": r"(\d+)"}
        with RewardRouter({"routes": {"j": {"reward": "judge", "options": options}}}) as router:
            out = run(router, 3)
    for o in out:  # a random tiny model: a digit in its text is a score, none a parse failure; never an endpoint error
        assert (
            not o.infra and 0.0 <= o.score <= 1.0 and "judge_text" in o.details
        ) or "no score matching" in o.error, o
