"""The hf engine's prefix reuse and slot batch: exactly what a plain forward pass gives.

Every result with the prefix cache is checked against the same engine without it (greedy tokens
equal, logprobs within float tolerance) and against one full forward pass over prompt + response:
prompts that extend earlier conversations (full history), prompts sharing a leading part (a system
prompt, the same grid), identical prompts in one admission, a cache too small for the workload
(evictions), staggered arrivals of prompts of many lengths (slots freed, reused, packed and
re-laid out), and new weights (the cache is dropped). The radix tree itself is checked on KV whose
values name their token.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import rockroll.envhub as envhub  # noqa: E402
from rockroll.agentrl.engines import GenerationRequest, GenerationResult, SamplingParams  # noqa: E402
from rockroll.agentrl.engines.hf import HFEngine  # noqa: E402
from rockroll.agentrl.engines.kv import PrefixCache  # noqa: E402
from rockroll.agentrl.models.chat import PromptBuilder, format_observation  # noqa: E402
from rockroll.agentrl.models.tiny import build_tiny_model, load_model_and_tokenizer  # noqa: E402

torch.set_num_threads(1)
TOL = 1e-4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    model, tok = load_model_and_tokenizer(build_tiny_model(tmp_path_factory.mktemp("tiny_prefix") / "model"))
    return model.requires_grad_(False), tok


def _engine(tiny: tuple[Any, Any], **kwargs: Any) -> HFEngine:
    model, tok = tiny
    return HFEngine(model=model, tokenizer=tok, max_batch_size=64, seed=0, **kwargs)


def _run(engine: HFEngine, requests: list[GenerationRequest]) -> list[GenerationResult]:
    async def go() -> list[GenerationResult]:
        return list(await asyncio.gather(*(engine.generate(r) for r in requests)))

    return asyncio.run(go())


def _close(*engines: HFEngine) -> None:
    for e in engines:
        asyncio.run(e.close())


def _reference(model: Any, prompt: list[int], response: list[int]) -> list[float]:
    """Logprobs of ``response`` after ``prompt`` from one full forward pass."""
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([prompt + response])).logits[0].float(), dim=-1)
    return [logp[len(prompt) - 1 + j, t].item() for j, t in enumerate(response)]


def _check_exact(model: Any, prompts: list[list[int]], cached: list[GenerationResult], plain: list[GenerationResult]):
    for p, a, b in zip(prompts, cached, plain, strict=True):
        assert a.token_ids == b.token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < TOL
        ref = _reference(model, p, a.token_ids)
        assert max(abs(x - y) for x, y in zip(a.logprobs, ref, strict=True)) < TOL


def _greedy(prompts: list[list[int]], n: int = 8) -> list[GenerationRequest]:
    return [GenerationRequest(p, SamplingParams(max_new_tokens=n, temperature=0.0)) for p in prompts]


def _conversations(tok: Any, seeds: list[int], system: str = "") -> list[PromptBuilder]:
    builders = []
    for s in seeds:
        env = envhub.make("FrozenLake-v0", is_slippery=True)
        obs, _ = env.reset(seed=s)
        b = PromptBuilder(tok, system, history="full", max_new_tokens=8)
        b.first_prompt(format_observation(obs, "cells"))
        b.env = env  # type: ignore[attr-defined]
        builders.append(b)
    return builders


def test_full_history_turns_reuse_the_conversation_and_match_no_cache(tiny: tuple[Any, Any]) -> None:
    """Each turn's prompt extends the last one: only the new tokens are computed, results exact."""
    model, tok = tiny
    cached, plain = _engine(tiny), _engine(tiny, prefix_cache_mb=0)
    try:
        builders = _conversations(tok, [1, 2, 3, 4, 5, 6])
        prompts = [list(b.ids) for b in builders]
        new = [len(p) for p in prompts]  # tokens not computed before, per conversation
        for turn in range(5):
            before = dict(cached.stats)
            got, want = _run(cached, _greedy(prompts)), _run(plain, _greedy(prompts))
            _check_exact(model, prompts, got, want)
            computed = cached.stats["prefill_tokens"] - before["prefill_tokens"]
            asked = cached.stats["prompt_tokens"] - before["prompt_tokens"]
            # only the new tokens: the response's last one and the new user turn (a row needing fewer
            # than the longest recomputes cached ones instead of padding)
            assert sum(new) <= computed <= len(prompts) * max(new), (turn, computed, new)
            if turn >= 2:
                assert computed < asked / 3
            for i, (b, r) in enumerate(zip(builders, got, strict=True)):
                cached_len = len(prompts[i]) + len(r.token_ids) - 1  # prompt + response but its last token
                text = b.add_response(r.token_ids)
                obs, *_ = b.env.step(text)  # type: ignore[attr-defined]
                prompts[i] = b.next_prompt(format_observation(obs, "cells"))
                new[i] = len(prompts[i]) - cached_len
        assert plain.stats["prefill_tokens"] == plain.stats["prompt_tokens"]
        assert cached.mode == "slots" and cached.prefix_cache is not None and cached.prefix_cache.tokens > 0
    finally:
        _close(cached, plain)


def test_restricted_answers_cache_only_what_was_computed(tiny: tuple[Any, Any]) -> None:
    """A restricted answer's forced tail (the end of turn after the move) is appended without a forward pass, so
    its KV was never computed: the conversation cached for the next turn stops before it, and every turn of
    full-history play matches the engine without a cache."""
    from rockroll.agentrl.engines.choices import AnswerTrie

    model, tok = tiny
    moves = AnswerTrie.from_answers(tok, ["Left", "Down", "Right", "Up"]).sequences
    lead = tok.encode("\n", add_special_tokens=False)
    # a forced first token, the move chosen while decoding, then the forced end of turn (not fed)
    trie = AnswerTrie([[*lead, *m] for m in moves])
    assert len(lead) == 1 and all(len(m) == 2 for m in moves)
    cached, plain = _engine(tiny), _engine(tiny, prefix_cache_mb=0)
    try:
        builders = _conversations(tok, [1, 2, 3, 4, 5, 6])
        prompts = [list(b.ids) for b in builders]
        ended: set[int] = set()
        for turn in range(4):
            asks = [
                GenerationRequest(p, SamplingParams(max_new_tokens=8, temperature=1.0, seed=10 * turn + i, allowed=trie))
                for i, p in enumerate(prompts)
            ]  # fmt: skip
            got, want = _run(cached, asks), _run(plain, asks)
            for a, b in zip(got, want, strict=True):
                assert tuple(a.token_ids) in trie.sequences and a.token_ids == b.token_ids
                assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < TOL
            for i, (b, r) in enumerate(zip(builders, got, strict=True)):
                if i in ended:  # its last prompt is asked again
                    continue
                obs, _, terminated, truncated, _ = b.env.step(b.add_response(r.token_ids))  # type: ignore[attr-defined]
                if terminated or truncated:
                    ended.add(i)
                else:
                    prompts[i] = b.next_prompt(format_observation(obs, "cells"))
        assert cached.prefix_cache is not None and cached.prefix_cache.tokens > 0
    finally:
        _close(cached, plain)


def test_shared_prefixes_and_repeated_prompts_match_no_cache(tiny: tuple[Any, Any]) -> None:
    """A shared system prompt, the same grid again, and prompts repeated within one admission."""
    model, tok = tiny
    env = envhub.make("FrozenLake-v0")
    system = env.system_prompt()
    prompts = []
    for s in range(6):
        obs, _ = env.reset(seed=s % 3)  # every grid twice
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
        prompts.append(tok.encode(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)))
    prompts += [prompts[0], prompts[0], prompts[4]]  # duplicates in the same wave
    cached, plain = _engine(tiny), _engine(tiny, prefix_cache_mb=0)
    try:
        first = _run(cached, _greedy(prompts[:1]))  # the system prompt is cached now
        _check_exact(model, prompts[:1], first, _run(plain, _greedy(prompts[:1])))
        before = cached.stats["prefill_tokens"]
        got, want = _run(cached, _greedy(prompts)), _run(plain, _greedy(prompts))
        _check_exact(model, prompts, got, want)
        unique = {tuple(p) for p in prompts}
        assert cached.stats["prefill_tokens"] - before < sum(len(p) for p in unique) - len(system) // 2
        # identical prompts are computed once but sampled independently: seeds decide
        sampled = [GenerationRequest(prompts[0], SamplingParams(max_new_tokens=8, seed=s)) for s in (1, 2, 1)]
        a, b, c = _run(cached, sampled)
        alone = _run(plain, sampled[:1])[0]
        assert a.token_ids == c.token_ids == alone.token_ids
        for r in (a, b):
            assert (
                max(abs(x - y) for x, y in zip(r.logprobs, _reference(model, prompts[0], r.token_ids), strict=True))
                < TOL
            )
    finally:
        _close(cached, plain)


def test_staggered_arrivals_and_evictions_stay_exact(tiny: tuple[Any, Any]) -> None:
    """Many prompt lengths arriving while others decode (slots freed, reused, packed, re-laid out)
    under a cache budget too small to keep them all: every result equals the no-cache engine's."""
    model, tok = tiny
    rng = random.Random(0)
    base = _conversations(tok, list(range(12)))
    prompts = [list(b.ids)[: rng.randint(3, len(b.ids))] for b in base for _ in range(3)]
    prompts += [p + prompts[(i + 1) % len(prompts)][2:] for i, p in enumerate(prompts[:12])]  # longer ones
    requests = [
        GenerationRequest(p, SamplingParams(max_new_tokens=rng.randint(1, 24), temperature=0.0)) for p in prompts
    ]
    cached, plain = _engine(tiny, prefix_cache_mb=0.05), _engine(tiny, prefix_cache_mb=0)

    async def staggered(engine: HFEngine) -> list[GenerationResult]:
        tasks = []
        for r in requests:
            tasks.append(asyncio.create_task(engine.generate(r)))
            if rng.random() < 0.3:
                await asyncio.sleep(0.002)
        return list(await asyncio.gather(*tasks))

    try:
        for _ in range(2):  # the second round finds (some of) the first round cached
            got = asyncio.run(staggered(cached))
            want = _run(plain, requests)
            _check_exact(model, prompts, got, want)
        pc, slots = cached.prefix_cache, cached._slots
        assert pc is not None and pc.evicted_tokens > 0
        assert slots is not None and slots.relayouts > 1 and slots.packs > 0
        assert pc.tokens * pc.bytes_per_token <= 0.05 * 2**20 + 64 * pc.bytes_per_token
    finally:
        _close(cached, plain)


def test_new_weights_drop_the_prefix_cache(tiny: tuple[Any, Any]) -> None:
    model, tok = tiny
    eng = _engine(tiny)
    try:
        prompts = [list(b.ids) for b in _conversations(tok, [7, 8])]
        before = _run(eng, _greedy(prompts))
        assert eng.prefix_cache is not None and eng.prefix_cache.tokens > 0
        original = {k: v.clone() for k, v in model.state_dict().items()}
        changed = {k: v * 1.5 if k.endswith("o_proj.weight") else v for k, v in original.items()}
        eng.update_weights(changed, version=1)
        assert eng.prefix_cache.tokens == 0 and eng.stats["cache_drops"] == 1
        after = _run(eng, _greedy(prompts))
        for p, r in zip(prompts, after, strict=True):  # computed with the new weights, not old KV
            assert r.weight_version == 1
            assert max(abs(x - y) for x, y in zip(r.logprobs, _reference(model, p, r.token_ids), strict=True)) < TOL
        eng.update_weights(original, version=2)
        again = _run(eng, _greedy(prompts))
        assert [r.token_ids for r in again] == [r.token_ids for r in before]
        for a, b in zip(again, before, strict=True):
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < TOL
    finally:
        model.load_state_dict(original)
        _close(eng)


def test_every_path_gives_the_same_results(tiny: tuple[Any, Any]) -> None:
    """The TorchScript decoder, the transformers forward over the slot buffer, and static waves
    (what _setup picks for models with sliding-window layers or flash attention; forced here)."""
    model, tok = tiny
    fast, plain, waves = _engine(tiny), _engine(tiny, fast_decoder=False), _engine(tiny)
    waves._mode = "waves"
    try:
        builders = _conversations(tok, [9, 10, 11])
        prompts = [list(b.ids) for b in builders]
        prompts.append(prompts[0] + [5, 6, 7] + prompts[1][1:])
        want = _run(waves, _greedy(prompts, 12))
        for eng in (fast, plain):
            for _ in range(2):  # the second time from the prefix cache
                _check_exact(model, prompts, _run(eng, _greedy(prompts, 12)), want)
        assert fast._fast is not None and plain._fast is None
        assert fast.mode == plain.mode == "slots" and waves.prefix_cache is None
    finally:
        _close(fast, plain, waves)


# ----------------------------------------------------------------------------- the radix tree alone
def _kv(tokens: list[int]) -> Any:
    """KV ``[layers=1, 2, heads=1, len, dim=2]`` whose values are the token ids (so slices are checkable)."""
    t = torch.tensor(tokens, dtype=torch.float32)
    return t[None, None, None, :, None].expand(1, 2, 1, len(tokens), 2).clone()


def _cached(pc: PrefixCache, ids: list[int], limit: int | None = None) -> list[int]:
    n, prefix = pc.match(ids, len(ids) if limit is None else limit)
    out = torch.zeros(1, 2, 1, n, 2)
    pc.copy_into(prefix, n, out)
    return [int(v) for v in out[0, 0, 0, :, 0].tolist()]


def test_prefix_cache_matches_splits_extends_and_evicts() -> None:
    pc = PrefixCache(torch, max_bytes=10**9)
    a = [1, 2, 3, 4, 5, 6]
    pc.insert(a, lambda i, j: _kv(a[i:j]))
    assert _cached(pc, a) == a and _cached(pc, a, limit=5) == a[:5]
    assert _cached(pc, [1, 2, 3, 9]) == [1, 2, 3]  # a shared leading part
    b = [1, 2, 3, 7, 8]
    asked: list[tuple[int, int]] = []
    pc.insert(b, lambda i, j: (asked.append((i, j)), _kv(b[i:j]))[1])
    assert asked == [(3, 5)]  # only what was not cached is asked for
    assert _cached(pc, b) == b and _cached(pc, a) == a  # the edge was split, both paths intact
    longer = b + [10, 11, 12]
    for k in range(3):  # a leaf that a conversation continues grows in place: one edge
        pc.insert(longer[: 6 + k], lambda i, j, s=longer: _kv(s[i:j]))
    n, prefix = pc.match(longer, len(longer))
    assert n == len(longer) and len(prefix.pieces) == 2  # [1, 2, 3] and the grown leaf
    assert _cached(pc, longer) == longer
    assert pc.tokens >= 6 + 2 + 3  # a, b's tail, the growth (and flat copies of short sequences)
    small = PrefixCache(torch, max_bytes=10 * _kv([0]).numel() * 4)
    for s in range(6):
        seq = [100 + s, s, s + 1]
        small.insert(seq, lambda i, j, seq=seq: _kv(seq[i:j]))
    assert small.evicted_tokens > 0 and small.tokens <= 9
    assert _cached(small, [105, 5, 6]) == [105, 5, 6]  # the most recent one stays
    pc.clear()
    assert pc.match(a, len(a))[0] == 0 and pc.tokens == 0


def test_engine_rejects_a_negative_cache_budget(tiny: tuple[Any, Any]) -> None:
    with pytest.raises(ValueError, match="prefix_cache_mb"):
        _engine(tiny, prefix_cache_mb=-1)


@pytest.mark.parametrize("history", ["full", "last_k"])
def test_prompt_ids_are_those_of_the_plain_tokenizer(tiny: tuple[Any, Any], history: str, tmp_path: Path) -> None:
    """The env manager's memoised tokenizer builds exactly the prompts the tokenizer itself builds."""
    from rockroll.agentrl.models.memo_tokenizer import MemoTokenizer

    _, tok = tiny
    memo = MemoTokenizer(tok)
    env = envhub.make("FrozenLake-v0")
    for seed in (0, 0, 1):
        obs, _ = env.reset(seed=seed)
        a = PromptBuilder(tok, env.system_prompt(), history=history, last_k=1)  # type: ignore[arg-type]
        b = PromptBuilder(memo, env.system_prompt(), history=history, last_k=1)  # type: ignore[arg-type]
        assert a.first_prompt(obs) == b.first_prompt(obs)
        for move in ["<answer>Down</answer><|im_end|>", "<answer>Right</answer><|im_end|>", "junk"]:
            ids = tok.encode(move, add_special_tokens=False)
            assert a.add_response(ids) == b.add_response(ids)
            obs, *_ = env.step(a.exchanges[-1][1])
            assert a.next_prompt(obs) == b.next_prompt(obs)
