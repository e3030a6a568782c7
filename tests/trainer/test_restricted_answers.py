"""Restricted answers (rockroll.agentrl.engines.choices): the engine samples only an env's declared answers
and the trainer's logprobs use the same renormalised distribution."""

from __future__ import annotations

import asyncio
import math

import pytest

torch = pytest.importorskip("torch")


def _engine(tiny_model_dir):
    from rockroll.agentrl.engines.hf import HFEngine
    from rockroll.agentrl.models.tiny import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(tiny_model_dir)
    return HFEngine(model=model, tokenizer=tok, seed=0), model, tok


def _prompt(tok, text: str) -> list[int]:
    chat = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
    return list(tok.encode(chat, add_special_tokens=False))


def test_trie_positions() -> None:
    from rockroll.agentrl.engines.choices import AnswerTrie

    trie = AnswerTrie([[5, 9], [6, 9], [5, 7, 9]])
    assert trie.next_ids([]) == (5, 6)
    assert trie.next_ids([5]) == (9, 7)
    assert trie.positions([6, 9]) == [(5, 6), (9,)]
    assert trie.next_ids([8]) == ()  # off the trie: unrestricted
    assert trie.max_len == 3


def test_forced_tail_is_the_rest_of_an_answer_without_a_choice() -> None:
    from rockroll.agentrl.engines.choices import AnswerTrie

    trie = AnswerTrie([[5, 9], [6, 8, 9], [5, 7, 9], [4, 3, 2, 9]])
    assert trie.forced_tail([6]) == (8, 9) and trie.forced_tail([5, 7]) == (9,)
    assert trie.forced_tail([4]) == (3, 2, 9)
    assert trie.forced_tail([]) == () and trie.forced_tail([5]) == ()  # a choice is ahead
    assert trie.forced_tail([6, 8, 9]) == () and trie.forced_tail([1]) == ()  # a whole answer; off the trie


def test_mask_logits_renormalises_over_the_allowed_ids() -> None:
    from rockroll.agentrl.engines.choices import allowed_tensor, mask_logits

    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0]])
    masked = mask_logits(logits, allowed_tensor([(0, 2), ()]))
    lp = torch.log_softmax(masked, -1)
    assert math.isinf(lp[0, 1].item()) and lp[0, 1] < 0 and math.isinf(lp[0, 3].item())
    assert lp[0, 0].exp() + lp[0, 2].exp() == pytest.approx(1.0)
    assert torch.equal(masked[1], logits[1])  # no restriction


@pytest.mark.parametrize("batch_path", [True, False])
def test_engine_and_trainer_logprobs_agree(tiny_model_dir, batch_path: bool) -> None:
    """Same tokens, same logprobs (1e-5), under the restricted distribution; a token outside it is -inf in both."""
    from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
    from rockroll.agentrl.engines.choices import AnswerTrie
    from rockroll.agentrl.trajectory import TrainSample
    from rockroll.trainer.learner.batch import collate, token_logprobs

    engine, model, tok = _engine(tiny_model_dir)
    engine.batch_path = batch_path
    trie = AnswerTrie.from_answers(tok, ["Left", "Down", "Right", "Up"])
    prompt = _prompt(tok, "S F F F")
    params = SamplingParams(max_new_tokens=2, temperature=1.5, allowed=trie)

    async def gen():
        return await engine.generate_batch([GenerationRequest(list(prompt), params, str(i)) for i in range(16)])

    results = asyncio.run(gen())
    asyncio.run(engine.close())
    assert all(tuple(r.token_ids) in trie.sequences and r.finish_reason == "stop" for r in results)
    assert trie.max_len == 2  # the tiny tokenizer has one token per answer
    if batch_path:  # one token per answer: the end of turn is forced, so no decode forward
        assert engine.stats["steps"] == 0 and engine.stats["forward_calls"] == 1  # the prompt's prefill
    samples = [
        TrainSample(
            list(prompt) + r.token_ids, [0] * len(prompt) + [1] * len(r.token_ids), [0.0] * len(prompt) + r.logprobs,
            0.0, "g", f"e{i}", 0, [()] * len(prompt) + trie.positions(r.token_ids),
        )
        for i, r in enumerate(results)
    ]  # fmt: skip
    batch = collate(samples, tok.pad_token_id)
    for share in (True, False):
        lp, ent = token_logprobs(
            model, batch.input_ids, batch.attention_mask, need=batch.response_mask, allowed=batch.extras["allowed"],
            with_entropy=True, share_prefix=share,
        )  # fmt: skip
        m = batch.response_mask > 0
        assert torch.allclose(lp[m], batch.rollout_logprobs[m], atol=1e-5)
        assert torch.isfinite(ent).all()
    # the end-of-turn token is the only choice after an answer: logprob 0 in both
    assert all(r.logprobs[-1] == pytest.approx(0.0, abs=1e-6) for r in results)
    # a token outside the allowed set: -inf under the trainer's restriction, never sampled by the engine
    bad = next(t for t in range(len(tok)) if t not in trie.next_ids([]))
    row = samples[0]
    row.input_ids[len(prompt)] = bad
    b2 = collate([row], tok.pad_token_id)
    lp2, _ = token_logprobs(model, b2.input_ids, b2.attention_mask, need=b2.response_mask, allowed=b2.extras["allowed"])
    assert lp2[0, len(prompt)].item() == float("-inf")
    full, _ = token_logprobs(model, b2.input_ids, b2.attention_mask)  # the full path masks the same way
    lp3, _ = token_logprobs(model, b2.input_ids, b2.attention_mask, allowed=b2.extras["allowed"])
    assert lp3[0, len(prompt)].item() == float("-inf") and math.isfinite(full[0, len(prompt)].item())


def test_greedy_restricted_answer_is_the_best_allowed(tiny_model_dir) -> None:
    from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
    from rockroll.agentrl.engines.choices import AnswerTrie

    engine, model, tok = _engine(tiny_model_dir)
    trie = AnswerTrie.from_answers(tok, ["Left", "Down", "Right", "Up"])
    prompt = _prompt(tok, "S F H G")
    res = asyncio.run(engine.generate(GenerationRequest(list(prompt), SamplingParams(6, 0.0, allowed=trie))))
    asyncio.run(engine.close())
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt])).logits[0, -1]
    first = trie.next_ids([])
    assert res.token_ids[0] == max(first, key=lambda t: logits[t].item())
    assert tuple(res.token_ids) in trie.sequences


def test_frozenlake_declares_its_moves_and_the_manager_restricts(tiny_model_dir) -> None:
    import rockroll.envhub as envhub
    from rockroll.agentrl.engines.random_engine import RandomEngine
    from rockroll.agentrl.rollout.answers import answer_trie

    assert envhub.spec("FrozenLake-v0").action_set == ("Left", "Down", "Right", "Up")
    engine, _, tok = _engine(tiny_model_dir)
    assert answer_trie(engine, "FrozenLake-v0") is not None
    assert answer_trie(engine, "FrozenLake-v0", restrict=False) is None
    assert answer_trie(engine, "Sokoban-v0") is None  # declares none
    assert not RandomEngine.supports_allowed
