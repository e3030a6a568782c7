"""``rockroll serve-model`` through the official ``openai`` client: a real server on 127.0.0.1, sync and
async clients, streaming and not, stop strings, n, logprobs/top_logprobs, seed, and OpenAI's errors."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from tests.agentrl.model_server import model_server  # noqa: E402

MSG = [{"role": "user", "content": "_G__\nOO__"}]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    model = build_tiny_model(tmp_path_factory.mktemp("serve") / "model", TinyModelConfig(episodes_per_env=3))
    with model_server(Path(model)) as u:
        yield u


@pytest.fixture()
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _clean_stop(text: str) -> str:
    """Two printable characters from the middle of ``text`` (a stop string that occurs in it)."""
    for i in range(3, len(text) - 2):
        if text[i : i + 2].isprintable() and "\ufffd" not in text[i : i + 2]:
            return text[i : i + 2]
    raise AssertionError(f"no printable pair in {text!r}")


def test_models(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == ["tiny"]
    assert client.models.retrieve("tiny").id == "tiny"
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("gpt-4")
    assert e.value.code == "model_not_found"


def test_chat_n_seed_logprobs_and_max_tokens(client: openai.OpenAI) -> None:
    kw = dict(model="tiny", messages=MSG, max_tokens=10, temperature=1.0, seed=7, n=3, logprobs=True, top_logprobs=3)
    r = client.chat.completions.create(**kw)
    assert [c.index for c in r.choices] == [0, 1, 2]
    texts = [c.message.content for c in r.choices]
    assert len(set(texts)) > 1, texts  # each choice samples on its own seed
    assert [c.message.content for c in client.chat.completions.create(**kw).choices] == texts  # seeded: reproducible
    for c in r.choices:
        assert c.message.role == "assistant"
        content = c.logprobs.content
        assert 1 <= len(content) <= 10 and c.finish_reason in ("stop", "length")
        assert (len(content) == 10) == (c.finish_reason == "length")
        for t in content:
            tops = [x.logprob for x in t.top_logprobs]
            assert len(tops) == 3 and tops == sorted(tops, reverse=True)
            assert t.logprob <= 0 and t.logprob <= tops[0] + 1e-4  # nothing beats the most likely token
            same = [x.logprob for x in t.top_logprobs if x.token == t.token and "\ufffd" not in t.token]
            assert all(abs(x - t.logprob) < 1e-3 for x in same), (t.token, t.logprob, t.top_logprobs)
    assert r.usage.completion_tokens == sum(len(c.logprobs.content) for c in r.choices)
    assert r.usage.prompt_tokens > 0
    one = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=10, temperature=1.0, seed=7)
    assert one.choices[0].message.content == texts[0] and one.choices[0].logprobs is None


def test_chat_streaming_matches_the_answer(client: openai.OpenAI, url: str) -> None:
    kw = dict(model="tiny", messages=MSG, max_tokens=20, temperature=1.0, seed=11)
    answer = client.chat.completions.create(**kw)
    whole = answer.choices[0]
    stream = client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == answer.usage.completion_tokens
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 2  # it streams, in pieces
    with httpx.stream("POST", url + "/v1/chat/completions", json={**kw, "stream": True}, timeout=60) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        body = "".join(raw.iter_text())
    assert body.endswith("data: [DONE]\n\n") and body.count("data: [DONE]") == 1


def test_stop_strings_streamed_or_not(client: openai.OpenAI) -> None:
    kw = dict(model="tiny", messages=MSG, max_tokens=24, temperature=1.0, seed=5)
    full = client.chat.completions.create(**kw).choices[0].message.content
    stop = _clean_stop(full)
    expected = full[: full.find(stop)]
    got = client.chat.completions.create(**kw, stop=[stop, "never-there"]).choices[0]
    assert (got.message.content, got.finish_reason) == (expected, "stop")
    stream = client.chat.completions.create(**kw, stop=stop, stream=True)
    chunks = [c.choices[0] for c in stream if c.choices]
    assert "".join(c.delta.content or "" for c in chunks) == expected and chunks[-1].finish_reason == "stop"


def test_completions_token_ids_logprobs_and_async_streaming(url: str) -> None:
    async def go() -> None:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
        ids = [5, 17, 99, 3, 42]
        r = await client.completions.create(
            model="tiny", prompt=ids, max_tokens=6, temperature=0, logprobs=2,
            extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True},
        )  # fmt: skip
        c = r.choices[0].model_dump()
        lp = c["logprobs"]
        assert len(c["token_ids"]) == len(lp["token_logprobs"]) == len(lp["tokens"]) == len(lp["top_logprobs"])
        assert lp["tokens"] == [f"token_id:{t}" for t in c["token_ids"]] and c["prompt_token_ids"] == ids
        for tok, top in zip(lp["tokens"], lp["top_logprobs"], strict=True):
            assert tok in top and len(top) >= 2  # greedy: the sampled token is the most likely one
            assert top[tok] == pytest.approx(max(top.values()), abs=1e-3)
        assert all(math.isfinite(x) and x <= 0 for x in lp["token_logprobs"])
        whole = await client.completions.create(model="tiny", prompt="_G__", max_tokens=12, temperature=1, seed=3, n=2)
        stream = await client.completions.create(
            model="tiny", prompt="_G__", max_tokens=12, temperature=1, seed=3, n=2, stream=True
        )
        texts, finish = ["", ""], [None, None]
        async for chunk in stream:
            for ch in chunk.choices:
                texts[ch.index] += ch.text
                finish[ch.index] = ch.finish_reason or finish[ch.index]
        assert texts == [c.text for c in whole.choices] and finish == [c.finish_reason for c in whole.choices]
        chat = await client.chat.completions.create(model="tiny", messages=MSG, max_tokens=4, temperature=0)
        assert chat.choices[0].finish_reason in ("stop", "length")
        await client.close()

    asyncio.run(go())


def test_errors_are_openai_shaped(client: openai.OpenAI, url: str) -> None:
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=MSG)
    assert e.value.code == "model_not_found" and "gpt-4o" in e.value.message
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="hi")
    bad = [
        (dict(max_tokens=0), "max_tokens"),
        (dict(n=0), "n"),
        (dict(temperature=5), "temperature"),
        (dict(top_logprobs=3), "top_logprobs"),  # without logprobs=true
        (dict(max_tokens=100_000), "max_tokens"),
        (dict(max_tokens=5000), "max_tokens"),  # past the model's 2048-token context
        (dict(presence_penalty=1.0), "presence_penalty"),
    ]
    for kw, param in bad:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="tiny", messages=MSG, **kw)
        assert e.value.param == param and e.value.message, (kw, e.value.body)
    r = httpx.post(url + "/v1/completions", json={"model": "tiny", "prompt": [10**9], "max_tokens": 2})
    assert r.status_code == 400 and "detail" not in r.json()
    assert r.json()["error"]["type"] == "invalid_request_error" and "token ids" in r.json()["error"]["message"]
    r = httpx.post(url + "/v1/chat/completions", json={"model": "tiny", "messages": []})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    r = httpx.get(url + "/v1/nothing-here")
    assert r.status_code == 404 and "error" in r.json()
