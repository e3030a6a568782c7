"""The head-only logprob path (``need=``) equals the full-vocabulary path where it is asked, and a
single-pass update (no separate old-logprob pass) takes the same optimizer step as the two-pass one."""

from __future__ import annotations

import copy

import pytest

from tests.trainer.conftest import random_samples

torch = pytest.importorskip("torch")


def _model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir)


def test_need_mask_matches_full_logits(tiny_model_dir) -> None:
    from rockroll.trainer.batch import collate, token_logprobs

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


def test_single_pass_update_equals_two_pass(tiny_model_dir) -> None:
    from rockroll.trainer.actor import PolicyTrainer, single_pass
    from rockroll.trainer.batch import collate
    from rockroll.trainer.config import TrainConfig

    cfg = TrainConfig.model_validate({"optim": {"ppo_epochs": 1, "mini_batch_size": 0, "micro_batch_size": 5}})
    samples = random_samples(16, 200, seed=5)
    assert single_pass(cfg, len(samples))
    assert not single_pass(cfg.model_copy(update={"optim": cfg.optim.model_copy(update={"ppo_epochs": 2})}), 16)
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
        results.append({k: v.clone() for k, v in model.state_dict().items()})
    moved = sum(float((results[0][k] - base.state_dict()[k]).abs().sum()) for k in results[0])
    assert moved > 0
    for k in results[0]:
        torch.testing.assert_close(results[0][k], results[1][k], rtol=1e-5, atol=1e-6)
