"""Prompt building (full and last-k history) and the random engine."""

from __future__ import annotations

import asyncio
import math

import pytest

from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.faults.latency import Latency
from rockroll.agentrl.models.char_tokenizer import CharTokenizer
from rockroll.agentrl.models.chat import ContextExceeded, PromptBuilder


@pytest.fixture(scope="module")
def bpe_tokenizer():
    """The tiny model's byte-level BPE tokenizer (built locally, a few seconds)."""
    from rockroll.agentrl.models.tiny import build_tokenizer, corpus_texts

    return build_tokenizer(corpus_texts(episodes=3))


def _tokenizers(bpe):
    return [CharTokenizer(), bpe]


def _response(tok, text: str, stop: bool = True) -> list[int]:
    ids = list(tok.encode(text, add_special_tokens=False))
    return ids + [tok.eos_token_id] if stop else ids


def test_char_tokenizer_round_trips() -> None:
    tok = CharTokenizer()
    text = "<|im_start|>user\n√ ___\n<answer>Up</answer><|im_end|>\n"
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode(text), skip_special_tokens=True) == "user\n√ ___\n<answer>Up</answer>\n"
    msgs = [{"role": "system", "content": "rules"}, {"role": "user", "content": "obs"}]
    assert tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True).endswith("<|im_start|>assistant\n")


def test_full_history_prompts_extend_each_other(bpe_tokenizer) -> None:
    for tok in _tokenizers(bpe_tokenizer):
        b = PromptBuilder(tok, "You play a game.", history="full")
        p0 = b.first_prompt("__P\n_G_")
        r0 = _response(tok, "I go <answer>Left</answer>")
        assert b.add_response(r0) == "I go <answer>Left</answer>"
        p1 = b.next_prompt("_P_\n_G_")
        assert p1[: len(p0) + len(r0)] == p0 + r0
        r1 = _response(tok, "<answer>Down</answer>", stop=False)  # cut at the length limit: no stop token
        b.add_response(r1)
        p2 = b.next_prompt("___\n_√_")
        assert p2[: len(p1) + len(r1)] == p1 + r1
        # the token stream decodes to the chat template's rendering of the conversation
        msgs = [
            {"role": "system", "content": "You play a game."},
            {"role": "user", "content": "__P\n_G_"},
            {"role": "assistant", "content": "I go <answer>Left</answer>"},
            {"role": "user", "content": "_P_\n_G_"},
            {"role": "assistant", "content": "<answer>Down</answer>"},
            {"role": "user", "content": "___\n_√_"},
        ]
        assert tok.decode(p2) == tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        assert b.extends_previous


def test_last_k_history_keeps_recent_exchanges_within_budget(bpe_tokenizer) -> None:
    tok = CharTokenizer()
    b = PromptBuilder(tok, "sys", history="last_k", last_k=1)
    b.first_prompt("obs0")
    b.add_response(_response(tok, "<answer>A</answer>"))
    b.next_prompt("obs1")
    b.add_response(_response(tok, "<answer>B</answer>"))
    text = tok.decode(b.next_prompt("obs2"))
    assert "obs1" in text and "<answer>B</answer>" in text and "obs0" not in text and "obs2" in text
    # a tight budget drops the remaining exchange too
    tight = PromptBuilder(tok, "sys", history="last_k", last_k=3, max_context_tokens=60, max_new_tokens=10)
    tight.first_prompt("obs0")
    tight.add_response(_response(tok, "<answer>A</answer>"))
    ids = tight.next_prompt("obs1")
    assert len(ids) + 10 <= 60 and "obs0" not in tok.decode(ids)


def test_last_k_prompts_come_from_a_per_tokenizer_cache(bpe_tokenizer, monkeypatch) -> None:
    """A repeated last_k prompt is rendered once per tokenizer, equal to a fresh rendering, handed out as a copy,
    and the cache stays within its size."""
    import rockroll.agentrl.models.chat as chat

    monkeypatch.setattr(chat, "PROMPT_CACHE_SIZE", 3)
    rendered: list[str] = []
    real = PromptBuilder._render

    def counting(self, messages):
        rendered.append(messages[-1]["content"])
        return real(self, messages)

    monkeypatch.setattr(PromptBuilder, "_render", counting)
    char = CharTokenizer()
    first = PromptBuilder(bpe_tokenizer, "sys", history="last_k", last_k=0).first_prompt("obs-a")
    again = PromptBuilder(bpe_tokenizer, "sys", history="last_k", last_k=0).first_prompt("obs-a")
    assert again == first and again is not first and rendered == ["obs-a"]
    again.append(-1)  # the caller's copy: the cache is not touched
    assert PromptBuilder(bpe_tokenizer, "sys", history="last_k", last_k=0).first_prompt("obs-a") == first
    other = PromptBuilder(char, "sys", history="last_k", last_k=0).first_prompt("obs-a")  # another tokenizer
    assert rendered == ["obs-a", "obs-a"] and char.decode(other).count("obs-a") == 1
    for obs in ("b", "c", "d"):
        PromptBuilder(bpe_tokenizer, "sys", history="last_k", last_k=0).first_prompt(obs)
    assert len(chat._prompt_caches[bpe_tokenizer]) == 3  # "obs-a" was the least recent: dropped
    PromptBuilder(bpe_tokenizer, "sys", history="last_k", last_k=0).first_prompt("obs-a")
    assert rendered.count("obs-a") == 3


def test_context_budget_is_enforced() -> None:
    tok = CharTokenizer()
    b = PromptBuilder(tok, "x" * 50, history="full", max_context_tokens=80, max_new_tokens=16)
    with pytest.raises(ContextExceeded):
        b.first_prompt("a long observation")


def test_random_engine_answers_with_actions_and_uniform_logprobs() -> None:
    eng = RandomEngine(actions=["Up", "Down"], invalid_prob=0.0, seed=3)
    res = asyncio.run(eng.generate(GenerationRequest([1, 2, 3], SamplingParams(max_new_tokens=64))))
    text = eng.tokenizer.decode(res.token_ids, skip_special_tokens=True)
    assert text in ("<answer>Up</answer>", "<answer>Down</answer>")
    assert res.token_ids[-1] == eng.tokenizer.eos_token_id and res.finish_reason == "stop"
    assert len(set(res.logprobs)) == 1 and math.isclose(res.logprobs[0], -math.log(eng.tokenizer.vocab_size))
    cut = asyncio.run(eng.generate(GenerationRequest([1], SamplingParams(max_new_tokens=4))))
    assert len(cut.token_ids) == 4 and cut.finish_reason == "length"
    always_bad = RandomEngine(invalid_prob=1.0)
    bad = asyncio.run(always_bad.generate(GenerationRequest([1])))
    assert always_bad.tokenizer.decode(bad.token_ids, skip_special_tokens=True) not in (
        f"<answer>{a}</answer>" for a in always_bad.actions
    )


def test_random_engine_latency_and_weight_version(bpe_tokenizer) -> None:
    eng = RandomEngine(bpe_tokenizer, latency=Latency("constant", 0.02))

    async def run() -> list:
        return await eng.generate_batch([GenerationRequest([1]) for _ in range(8)])

    results = asyncio.run(run())
    assert all(r.weight_version == 0 for r in results)
    eng.update_weights({}, 3)
    assert asyncio.run(eng.generate(GenerationRequest([1]))).weight_version == 3
    with pytest.raises(ValueError):
        Latency("gamma", 1.0)  # type: ignore[arg-type]
