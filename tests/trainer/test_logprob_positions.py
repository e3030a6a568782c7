"""The head-only logprob path (``need=``) equals the full-vocabulary path where it is asked, and a
single-pass update (no separate old-logprob pass) takes the same optimizer step as the two-pass one."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.trainer.conftest import random_samples

torch = pytest.importorskip("torch")


def _model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir)


def test_need_mask_matches_full_logits(tiny_model_dir) -> None:
    from rockroll.trainer.learner.batch import collate, token_logprobs

    model = _model(tiny_model_dir)
    batch = collate(random_samples(12, model.config.vocab_size, seed=3), 0)
    need = batch.response_mask
    full_lp, full_ent = token_logprobs(model, batch.input_ids, batch.attention_mask, with_entropy=True)
    lp, ent = token_logprobs(model, batch.input_ids, batch.attention_mask, with_entropy=True, need=need)
    on = need.bool()
    assert on.sum() > 0 and (~on & batch.attention_mask.bool()).sum() > 0
    torch.testing.assert_close(lp[on], full_lp[on], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent[on], full_ent[on], rtol=1e-5, atol=1e-5)
    assert float(lp.detach()[~on].abs().sum()) == 0.0  # not computed where not asked
    lp.sum().backward()  # the head-only path carries gradients to the body
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.get_decoder().parameters())


@pytest.mark.parametrize("epochs", [1, 3])
def test_single_pass_update_equals_two_pass(tiny_model_dir, epochs) -> None:
    """Old logprobs recorded in the first epoch's pass give the same steps as a separate pass before it."""
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.learner.actor import PolicyTrainer, single_pass
    from rockroll.trainer.learner.batch import collate

    cfg = TrainConfig.model_validate({"optim": {"ppo_epochs": epochs, "mini_batch_size": 0, "micro_batch_size": 5}})
    samples = random_samples(16, 200, seed=5)
    assert single_pass(cfg, len(samples))
    assert not single_pass(cfg.model_copy(update={"optim": cfg.optim.model_copy(update={"mini_batch_size": 8})}), 16)
    base = _model(tiny_model_dir)
    results = []
    for two_pass in (False, True):
        model = copy.deepcopy(base)
        trainer = PolicyTrainer(model, cfg.algo, cfg.optim, total_updates=1)
        batch = collate(samples, 0)
        batch.extras["advantages"] = torch.linspace(-1, 1, len(samples)).unsqueeze(1).expand_as(batch.input_ids).clone()
        batch.extras["loss_mask"] = batch.response_mask.float()
        if two_pass:
            batch.extras["old_logprobs"] = trainer.compute_logprobs(batch)
        trainer.update(batch, step=0)
        assert ("old_logprobs" in batch.extras) == two_pass  # the caller's batch is left as it was
        results.append({k: v.clone() for k, v in model.state_dict().items()})
    moved = sum(float((results[0][k] - base.state_dict()[k]).abs().sum()) for k in results[0])
    assert moved > 0
    for k in results[0]:
        torch.testing.assert_close(results[0][k], results[1][k], rtol=1e-5, atol=1e-6)


def test_update_without_old_logprobs_needs_whole_batch_minibatches(tiny_model_dir) -> None:
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.learner.actor import PolicyTrainer
    from rockroll.trainer.learner.batch import collate

    cfg = TrainConfig.model_validate({"optim": {"ppo_epochs": 2, "mini_batch_size": 8}})
    trainer = PolicyTrainer(_model(tiny_model_dir), cfg.algo, cfg.optim, total_updates=1)
    batch = collate(random_samples(16, 200, seed=5), 0)
    batch.extras["advantages"] = torch.ones_like(batch.response_mask)
    batch.extras["loss_mask"] = batch.response_mask.float()
    with pytest.raises(ValueError, match="whole batch"):
        trainer.update(batch, step=0)


def _right_padded(rows: list[tuple[list[int], list[int]]]) -> tuple[Any, Any, Any]:
    """``(prompt, response)`` rows as right-padded ids, attention mask and a need mask on the responses."""
    width = max(len(p) + len(r) for p, r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    need = torch.zeros((len(rows), width))
    for i, (p, r) in enumerate(rows):
        ids[i, : len(p) + len(r)] = torch.tensor(p + r)
        attn[i, : len(p) + len(r)] = 1
        need[i, len(p) : len(p) + len(r)] = 1
    return ids, attn, need


def test_shared_prefixes_give_the_plain_logprobs_and_gradients(tiny_model_dir) -> None:
    """Rows that share prompts (several answers each, prompts of several lengths): one pass per
    distinct prefix gives the plain pass's logprobs, entropies and gradients."""
    import random

    from rockroll.trainer.learner.batch import token_logprobs
    from rockroll.trainer.learner.shared_prefix import shared_hidden

    model = _model(tiny_model_dir)
    rng = random.Random(0)
    rows = []
    for _ in range(12):
        prompt = [rng.randrange(5, 200) for _ in range(rng.randint(8, 20))]
        rows += [(prompt, [rng.randrange(5, 200) for _ in range(rng.randint(2, 4))]) for _ in range(rng.randint(1, 5))]
    ids, attn, need = _right_padded(rows)
    need[3] = 0  # a row that needs nothing
    got = []
    for share in (False, True):
        model.zero_grad()
        lp, ent = token_logprobs(model, ids, attn, with_entropy=True, need=need, share_prefix=share)
        (lp * need).sum().backward()
        got.append((lp.detach(), ent.detach(), [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(got[1][0], got[0][0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got[1][1], got[0][1], rtol=1e-4, atol=1e-5)
    for a, b in zip(got[1][2], got[0][2], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-6)
    # the shared path really ran (and declines where it would not save work)
    r, c = need[:, 1:].nonzero(as_tuple=True)
    assert shared_hidden(model.get_decoder(), ids, attn, r, c) is not None
    distinct = torch.arange(len(rows)).unsqueeze(1) + 5  # every prefix differs: nothing to share
    ids2 = ids.clone()
    ids2[:, :1] = distinct
    assert shared_hidden(model.get_decoder(), ids2, attn, r, c) is None


def test_a_common_system_prompt_is_computed_once_for_distinct_prompts(tiny_model_dir) -> None:
    """Every prompt differs but all start with one system prompt (a tool env's tools block): the common
    prefix plan runs and gives the plain pass's logprobs and gradients."""
    import random

    from rockroll.trainer.learner.batch import token_logprobs
    from rockroll.trainer.learner.shared_prefix import common_plan, plan_sharing, shared_hidden

    model = _model(tiny_model_dir)
    rng = random.Random(1)
    system = [rng.randrange(5, 200) for _ in range(40)]
    rows = [
        (system + [rng.randrange(5, 200) for _ in range(rng.randint(3, 8))], [rng.randrange(5, 200) for _ in range(3)])
        for _ in range(6)
    ]
    ids, attn, need = _right_padded(rows)
    lists = [p + r for p, r in rows]
    firsts = [len(p) - 1 for p, _ in rows]
    plan = common_plan(lists, firsts)
    lengths = [len(x) for x in lists]
    assert plan is not None and plan.starts == [len(system)] * len(rows)
    assert plan.cost(lengths) < plan_sharing(lists, firsts).cost(lengths)  # type: ignore[union-attr]
    r, c = need[:, 1:].nonzero(as_tuple=True)
    assert shared_hidden(model.get_decoder(), ids, attn, r, c) is not None  # the shared path runs
    got = []
    for share in (False, True):
        model.zero_grad()
        lp, _ = token_logprobs(model, ids, attn, need=need, share_prefix=share)
        (lp * need).sum().backward()
        got.append((lp.detach(), [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(got[1][0], got[0][0], rtol=1e-4, atol=1e-5)
    for a, b in zip(got[1][1], got[0][1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("share_prefix", [False, True])
def test_critic_values_at_needed_tokens_match_the_full_pass(tiny_model_dir, share_prefix) -> None:
    """``token_values(need=...)`` computes the critic only where asked (a shared prefix once) and gives
    the full pass's values and gradients there, 0 elsewhere; without ``share_prefix`` (ZeRO-3) it is
    the full pass."""
    from rockroll.trainer.learner.batch import collate, token_values
    from rockroll.trainer.learner.models import Critic

    critic = Critic(_model(tiny_model_dir))
    torch.nn.init.normal_(critic.head.weight, std=0.5)  # a zero head would make every value 0
    samples = random_samples(12, critic.body.config.vocab_size, seed=9)
    for s in samples[6:]:  # rows sharing a prompt with another row, answered differently
        s.input_ids[:3] = samples[0].input_ids[:3]
    batch = collate(samples, 0)
    need = batch.response_mask
    full = token_values(critic, batch.input_ids, batch.attention_mask)
    (full * need).sum().backward()
    grads = {k: p.grad.clone() for k, p in critic.named_parameters() if p.grad is not None}
    critic.zero_grad(set_to_none=True)
    part = token_values(critic, batch.input_ids, batch.attention_mask, need=need, share_prefix=share_prefix)
    on = need.bool()
    torch.testing.assert_close(part[on], full[on], rtol=1e-5, atol=1e-5)
    if share_prefix:
        assert float(part.detach()[~on].abs().sum()) == 0.0
    else:
        torch.testing.assert_close(part, full)
    (part * need).sum().backward()
    for k, p in critic.named_parameters():
        torch.testing.assert_close(p.grad, grads[k], rtol=1e-3, atol=1e-6)
