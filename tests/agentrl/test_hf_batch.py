"""The hf engine's batch path (``HFEngine.generate_batch``): one round per batch, the queued path's results."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rockroll.agentrl.engines import EngineError, GenerationRequest, SamplingParams  # noqa: E402
from rockroll.agentrl.engines.hf import HFEngine  # noqa: E402
from tests.agentrl.test_engines import _prompts, _reference_logprobs, tiny_path  # noqa: E402, F401


def _batch(engine: HFEngine, requests: list[GenerationRequest]):
    return asyncio.run(engine.generate_batch(requests))


def _requests(tok, params: list[SamplingParams], repeat: int = 1) -> list[GenerationRequest]:
    prompts = _prompts(tok, len(params))
    # the same prompt asked several times (a group of episodes on one map): computed once, sampled apart
    return [GenerationRequest(p, sp) for p, sp in zip(prompts, params, strict=True) for _ in range(repeat)]


def test_batch_path_gives_the_queued_paths_tokens_and_exact_logprobs(tiny_path: Path) -> None:  # noqa: F811
    fast, queued = HFEngine(tiny_path, seed=0), HFEngine(tiny_path, seed=0, batch_path=False)
    params = [
        SamplingParams(max_new_tokens=n, temperature=t, top_k=k, seed=i)
        for i, (n, t, k) in enumerate([(12, 1.0, 0), (3, 0.7, 0), (8, 0.0, 0), (1, 1.3, 5), (6, 1.5, 0)])
    ]
    reqs = _requests(fast.tokenizer, params)
    got, want = _batch(fast, reqs), _batch(queued, reqs)
    assert [r.token_ids for r in got] == [r.token_ids for r in want]
    for req, r in zip(reqs, got, strict=True):
        assert 0 < len(r.token_ids) <= req.params.max_new_tokens
        assert r.finish_reason == ("stop" if r.token_ids[-1] in fast.eos_token_ids else "length")
        ref = _reference_logprobs(fast.model, req.prompt_ids, r.token_ids)
        assert max(abs(a - b) for a, b in zip(ref, r.logprobs, strict=True)) < 1e-4
    assert fast.stats["forward_calls"] <= 1 + max(sp.max_new_tokens for sp in params)
    asyncio.run(fast.close())
    asyncio.run(queued.close())


def test_duplicate_prompts_are_prefilled_once_and_sampled_independently(tiny_path: Path) -> None:  # noqa: F811
    engine = HFEngine(tiny_path, seed=0)
    reqs = _requests(engine.tokenizer, [SamplingParams(max_new_tokens=6, temperature=2.0, seed=None)] * 2, repeat=8)
    before = engine.stats["prefill_tokens"]
    out = _batch(engine, reqs)
    assert engine.stats["prefill_tokens"] - before == len(reqs[0].prompt_ids) + len(reqs[8].prompt_ids)
    assert len({tuple(r.token_ids) for r in out[:8]}) > 1  # unseeded rows of one prompt draw apart
    seeded = [GenerationRequest(r.prompt_ids, SamplingParams(max_new_tokens=6, temperature=2.0, seed=7)) for r in reqs]
    before = engine.stats["prefill_tokens"]
    again = _batch(engine, seeded)
    assert engine.stats["prefill_tokens"] == before  # a later round reuses what an earlier one computed
    assert len({tuple(r.token_ids) for r in again[:8]}) == 1  # one seed, one prompt: one sample
    assert [r.token_ids for r in _batch(engine, seeded[:3])] == [r.token_ids for r in again[:3]]
    asyncio.run(engine.close())


def test_weights_update_between_rounds_drops_the_memo_and_bad_input_is_refused(tiny_path: Path) -> None:  # noqa: F811
    engine = HFEngine(tiny_path, seed=0)
    reqs = _requests(engine.tokenizer, [SamplingParams(max_new_tokens=4, temperature=0.0)] * 3)
    first = _batch(engine, reqs)
    for version in (0, 3):  # the same version number again (a warm start loaded as version 0) or a new one
        state = {
            k: v + 0.05 * torch.randn_like(v) for k, v in engine.model.state_dict().items() if k.endswith("weight")
        }
        engine.update_weights(state, version=version)
        second = _batch(engine, reqs)
        assert {r.weight_version for r in first} == {0} and {r.weight_version for r in second} == {version}
        for req, r in zip(reqs, second, strict=True):  # the new weights' own greedy continuation and logprobs
            ref = _reference_logprobs(engine.model, req.prompt_ids, r.token_ids)
            assert max(abs(a - b) for a, b in zip(ref, r.logprobs, strict=True)) < 1e-4
    assert _batch(engine, []) == []
    with pytest.raises(ValueError, match="prompt_ids"):
        _batch(engine, [GenerationRequest([engine.vocab_size + 5])])
    asyncio.run(engine.close())
    with pytest.raises(EngineError, match="closed"):
        _batch(engine, reqs)
