"""``optim.tag_steps``: each tag of a mixed batch takes the optimizer step a run of that tag alone would take."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _batch(tok, moves: list[str], advs: list[float], tags: list[str]):
    from rockroll.agentrl.trajectory import TrainSample
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.tag_steps import tag_ids
    from rockroll.trainer.learner.turns import TurnRows

    prompt = tok.encode("<|im_start|>user\nP _ _\n_ O G<|im_end|>\n<|im_start|>assistant\n")
    samples, rows_adv = [], []
    for m, a in zip(moves, advs, strict=True):
        resp = tok.encode(f"<answer>{m}</answer>") + [tok.eos_token_id]
        n = len(prompt) + len(resp)
        samples.append(TrainSample(prompt + resp, [0] * len(prompt) + [1] * len(resp), [0.0] * n, 0, "g", "e", 0))
        rows_adv.append([0.0] * len(prompt) + [a] * len(resp))
    rows = TurnRows(samples, rows_adv, {}, tags=tags)
    batch = collate(rows.samples, tok.pad_token_id)
    batch.extras["advantages"] = rows.advantage_tensor(batch.input_ids.shape[1])
    batch.extras["loss_mask"] = batch.response_mask * rows.loss_weights()
    batch.extras["tag_ids"] = tag_ids(rows.tags)
    return batch


def test_each_tag_steps_as_if_alone(tiny_model_dir: Path) -> None:
    from rockroll.trainer.config import AlgoConfig, OptimConfig
    from rockroll.trainer.learner.actor import PolicyTrainer
    from rockroll.trainer.learner.models import load_model_and_tokenizer
    from rockroll.trainer.learner.tag_steps import tag_ids

    torch.manual_seed(0)
    model, tok = load_model_and_tokenizer(tiny_model_dir)
    algo = AlgoConfig()
    plain, per_tag = (
        OptimConfig(lr=1e-3, micro_batch_size=64),
        OptimConfig(lr=1e-3, micro_batch_size=64, tag_steps=True),
    )
    # tag "a": many long-ish rows with large advantages; tag "b": two rows with small ones
    a = (["Right", "Down", "Left", "Up", "Right", "Down"], [1.0, -0.8, 0.9, -1.2, 0.7, 0.5])
    b = (["Up", "Left"], [0.05, -0.04])
    mixed = _batch(tok, a[0] + b[0], a[1] + b[1], ["a"] * 6 + ["b"] * 2)
    first, second = sorted(["a", "b"], key=lambda t: int(tag_ids([t])[0]))
    alone = {"a": _batch(tok, *a, ["a"] * 6), "b": _batch(tok, *b, ["b"] * 2)}

    want = copy.deepcopy(model)
    for tag in (first, second):  # a fresh optimizer per tag, one after the other
        PolicyTrainer(want, algo, plain, total_updates=4).update(alone[tag], step=0)
    got = copy.deepcopy(model)
    trainer = PolicyTrainer(got, algo, per_tag, total_updates=4)
    metrics = trainer.update(mixed, step=0)
    assert metrics["actor/tag_steps"] == 2.0 and len(trainer.tag_opts) == 2
    for (name, p), q in zip(got.named_parameters(), want.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), name
    one = copy.deepcopy(model)
    PolicyTrainer(one, algo, plain, total_updates=4).update(mixed, step=0)  # one shared step differs
    assert any(not torch.allclose(p, q, atol=1e-6) for p, q in zip(one.parameters(), got.parameters(), strict=True))

    # the tags' moments are saved and restored with the trainer's state
    state = trainer.state_dict()
    again = PolicyTrainer(copy.deepcopy(got), algo, per_tag, total_updates=4)
    again.load_state_dict(copy.deepcopy(state))
    trainer.update(mixed, step=1)
    again.update(mixed, step=1)
    for p, q in zip(trainer.model.parameters(), again.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-7)


def test_tag_steps_needs_tagged_rows() -> None:
    from rockroll.envs.config import ConfigError
    from rockroll.trainer.config_io import config_from_dict

    with pytest.raises(ConfigError, match="optim.tag_steps"):
        config_from_dict({"rollout": {"mode": "plan"}, "optim": {"tag_steps": True}})
