"""The model service of agent episodes (a real HF engine behind a real loopback server, driven by the official
``openai`` client): each episode's key reaches only its own record and dies with the episode, every call is
recorded as the engine sampled it, and the recorded calls train on exactly the sampled tokens."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")
openai = pytest.importorskip("openai")
from rockroll.agentrl.serving.recording import CallRecord, CallRecorder, trajectory_of_calls  # noqa: E402
from tests.agentrl.model_server import recorded_service  # noqa: E402

MODEL = "tiny"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, CallRecorder, int]]:
    import torch

    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    path = build_tiny_model(tmp_path_factory.mktemp("rec") / "model", TinyModelConfig(episodes_per_env=3))
    with recorded_service(path) as served:
        yield served


def _client(url: str, key: str) -> Any:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)


def _sampled(choice: Any) -> tuple[list[int], list[float]]:
    """The token ids and logprobs a choice reports (``return_token_ids`` and ``logprobs``)."""
    extra = choice.model_extra or {}
    ids = list(extra["token_ids"])
    if getattr(choice.logprobs, "content", None) is not None:
        return ids, [e.logprob for e in choice.logprobs.content]
    return ids, list(choice.logprobs.token_logprobs)


def test_calls_are_recorded_as_sampled_and_train_on_the_sampled_tokens(service: tuple[str, CallRecorder, int]) -> None:
    url, recorder, _tok = service
    key = recorder.open("ep-a")
    client = _client(url, key)
    seen: list[tuple[list[int], list[float]]] = []
    # two completions, the second's prompt the first's prompt + answer + more: they extend each other
    first = client.completions.create(
        model=MODEL, prompt=[5, 6, 7, 8], max_tokens=6, temperature=1.0, seed=1, logprobs=0,
        extra_body={"return_token_ids": True},
    )  # fmt: skip
    seen.append(_sampled(first.choices[0]))
    follow = [5, 6, 7, 8, *seen[0][0], 9, 10]
    second = client.completions.create(
        model=MODEL, prompt=follow, max_tokens=6, temperature=1.0, seed=2, logprobs=0,
        extra_body={"return_token_ids": True},
    )  # fmt: skip
    seen.append(_sampled(second.choices[0]))
    # a chat call starts over (its own template): a row of its own; then a streamed one
    chat = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=6, temperature=1.0, seed=3,
        logprobs=True, extra_body={"return_token_ids": True},
    )  # fmt: skip
    seen.append(_sampled(chat.choices[0]))
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "again"}], max_tokens=6, temperature=1.0, seed=4,
        stream=True, extra_body={"return_token_ids": True},
    )  # fmt: skip
    streamed = [i for chunk in stream for c in chunk.choices for i in (c.model_extra or {}).get("token_ids", [])]

    calls = recorder.close("ep-a").calls
    assert [c.index for c in calls] == [0, 1, 2, 3]
    assert [c.route for c in calls] == ["completion", "completion", "chat", "chat"]
    assert calls[0].prompt_ids == [5, 6, 7, 8] and calls[1].prompt_ids == follow
    for c, (ids, lps) in zip(calls, seen, strict=False):
        assert c.response_ids == ids and c.logprobs == pytest.approx(lps, abs=1e-5)
    assert calls[3].response_ids == streamed and streamed
    assert all(c.weight_version == 0 and c.tokens_exact and c.ended >= c.started for c in calls)

    traj = trajectory_of_calls(
        calls, episode_id="ep-a", group_id="g", env_id="SWE-v0", seed=0, reward=1.0, success=True
    )
    rows = traj.to_samples("auto")
    assert len(rows) == 3  # the two completions merged; each chat call alone
    trained = [[t for t, m in zip(r.input_ids, r.response_mask, strict=True) if m] for r in rows]
    assert trained == [calls[0].response_ids + calls[1].response_ids, calls[2].response_ids, calls[3].response_ids]
    assert rows[0].input_ids == follow + calls[1].response_ids
    assert all(r.reward == 1.0 for r in rows)


def test_a_key_reaches_its_own_episode_only_and_dies_with_it(service: tuple[str, CallRecorder, int]) -> None:
    url, recorder, _tok = service
    a, b = recorder.open("ep-b1"), recorder.open("ep-b2")
    _client(url, a).completions.create(model=MODEL, prompt=[5, 6], max_tokens=2)
    _client(url, b).completions.create(model=MODEL, prompt=[7, 8], max_tokens=2)
    _client(url, b).completions.create(model=MODEL, prompt=[9], max_tokens=2)
    assert [c.prompt_ids for c in recorder.close("ep-b1").calls] == [[5, 6]]
    with pytest.raises(openai.AuthenticationError):  # its episode closed: the key is dead
        _client(url, a).completions.create(model=MODEL, prompt=[5, 6], max_tokens=2)
    for bad in ("sk-nothing", "rr-ep-" + "x" * 32, ""):
        with pytest.raises(openai.AuthenticationError):
            _client(url, bad or "none").completions.create(model=MODEL, prompt=[5], max_tokens=2)
    assert [c.prompt_ids for c in recorder.close("ep-b2").calls] == [[7, 8], [9]]
    assert recorder.open_episodes == 0


def test_calls_past_the_episode_cap_are_refused(service: tuple[str, CallRecorder, int]) -> None:
    url, recorder, _tok = service
    key = recorder.open("ep-c", max_calls=2)
    client = _client(url, key)
    client.completions.create(model=MODEL, prompt=[5], max_tokens=2, n=2)  # n=2: two calls recorded
    with pytest.raises(openai.RateLimitError, match="cap is 2"):
        client.completions.create(model=MODEL, prompt=[5], max_tokens=2)
    ep = recorder.close("ep-c")
    assert len(ep.calls) == 2 and ep.refused == 1


def test_the_server_cap_bounds_an_episode_cap_and_one_key_per_episode() -> None:
    rec = CallRecorder(max_calls=4)
    rec.open("e", max_calls=100)
    assert [rec.reserve("e") for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="has a key already"):
        rec.open("e")
    with pytest.raises(ValueError, match="at least 1"):
        CallRecorder(max_calls=0)


def test_auto_rows_keep_apart_calls_that_do_not_extend() -> None:
    def call(i: int, prompt: list[int], resp: list[int], version: int = 0) -> CallRecord:
        return CallRecord(i, "completion", prompt, resp, [-0.5] * len(resp), version, "stop", 0.0, 1.0)

    calls = [call(0, [1, 2], [3]), call(1, [1, 2, 3, 4], [5], 1), call(2, [1, 9], [6]), call(3, [1, 9, 6], [7, 8])]
    traj = trajectory_of_calls(calls, episode_id="e", group_id="g", env_id="x", seed=0, reward=0.5, success=False)
    rows = traj.to_samples("auto")
    assert [r.input_ids for r in rows] == [[1, 2, 3, 4, 5], [1, 9, 6, 7, 8]]
    assert [r.response_mask for r in rows] == [[0, 0, 1, 0, 1], [0, 0, 1, 1, 1]]
    assert [r.weight_version for r in rows] == [0, 0]
    with pytest.raises(ValueError, match="does not extend"):
        traj.to_samples("concat")


def test_a_recorded_call_not_token_exact_is_not_trained() -> None:
    rec = CallRecord(0, "chat", [1], [2], [-1.0], 0, "stop", 0.0, 1.0, tokens_exact=False)
    traj = trajectory_of_calls([rec], episode_id="e", group_id="g", env_id="x", seed=0, reward=1.0, success=True)
    with pytest.raises(ValueError, match="not training"):
        traj.to_samples("auto")
