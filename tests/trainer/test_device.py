"""Batches are collated on the CPU and moved to the model's device for each forward.

On the CPU ``Batch.to`` is checked with the ``meta`` device (every tensor and tensor extra moves,
ids stay). Where CUDA is present the warm start, the PPO update and the no-grad logprob pass run
with the model on the GPU and give the CPU's numbers; CI has no GPU, so those tests skip there.
"""

from __future__ import annotations

import copy

import pytest

from tests.trainer.conftest import random_samples

torch = pytest.importorskip("torch")


def needs_cuda(fn):
    """Marked ``gpu`` (``pytest -m gpu`` runs them on a GPU machine) and skipped without CUDA."""
    return pytest.mark.gpu(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")(fn))


def _model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir)


def _batch(vocab: int):
    from rockroll.trainer.learner.batch import collate

    batch = collate(random_samples(12, vocab, seed=7), 0)
    batch.extras["advantages"] = torch.linspace(-1, 1, len(batch)).unsqueeze(1).expand_as(batch.input_ids).clone()
    batch.extras["loss_mask"] = batch.response_mask.clone()
    batch.extras["note"] = "kept as is"
    return batch


def test_batch_to_moves_every_tensor_and_keeps_the_rest() -> None:
    batch = _batch(200)
    assert batch.to("cpu") is batch  # already there: no copy
    moved = batch.to("meta")
    for name in ("input_ids", "attention_mask", "response_mask", "rollout_logprobs", "rewards"):
        assert getattr(moved, name).device.type == "meta"
        assert getattr(batch, name).device.type == "cpu"  # the original is left alone
    assert moved.extras["advantages"].device.type == "meta" and moved.extras["loss_mask"].device.type == "meta"
    assert moved.extras["note"] == "kept as is"
    assert moved.group_ids == batch.group_ids and moved.episode_ids == batch.episode_ids


@needs_cuda
def test_update_on_cuda_takes_the_cpu_step(tiny_model_dir) -> None:
    """Logprobs and one PPO update with the model on the GPU match the same on the CPU."""
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.learner.actor import PolicyTrainer

    cfg = TrainConfig.model_validate({"optim": {"ppo_epochs": 2, "mini_batch_size": 0, "micro_batch_size": 5}})
    base = _model(tiny_model_dir)
    states, logprobs = [], []
    for device in ("cpu", "cuda"):
        model = copy.deepcopy(base).to(device)
        trainer = PolicyTrainer(model, cfg.algo, cfg.optim, total_updates=1)
        batch = _batch(model.config.vocab_size)
        lp = trainer.compute_logprobs(batch)
        assert lp.device.type == "cpu"  # what leaves the trainer is on the CPU, like the batch
        logprobs.append(lp)
        metrics = trainer.update(batch, step=0)
        assert all(v == v for v in metrics.values())  # no NaN
        states.append({k: v.detach().cpu() for k, v in model.state_dict().items()})
    torch.testing.assert_close(logprobs[0], logprobs[1], rtol=1e-4, atol=1e-4)
    moved = sum(float((states[1][k] - base.state_dict()[k]).abs().sum()) for k in states[1])
    assert moved > 0
    for k in states[0]:
        torch.testing.assert_close(states[0][k], states[1][k], rtol=1e-3, atol=1e-4)


@needs_cuda
def test_warm_start_trains_on_cuda(tiny_model_dir) -> None:
    """SFT with the model on the GPU lowers the loss on its demos."""
    from rockroll.trainer.learner.sft import sft_train

    model = _model(tiny_model_dir).to("cuda")
    demos = random_samples(8, model.config.vocab_size, seed=3)
    first = sft_train(model, demos, steps=1, lr=1e-2, batch_size=8)["sft/loss"]
    last = sft_train(model, demos, steps=30, lr=1e-2, batch_size=8)["sft/loss"]
    assert last < first
