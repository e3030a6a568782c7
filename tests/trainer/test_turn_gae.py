"""PPO with a critic per turn (``algo.turn_credit: gae``): the critic's value of each turn's prompt,
GAE over turns from those values, returns as the critic's targets, and a real run that trains it."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rockroll.agentrl.models.tiny import load_model_and_tokenizer  # noqa: E402
from rockroll.agentrl.rollout.config import EpisodeConfig  # noqa: E402

SLIPPERY = {"is_slippery": True, "size": 4}


def _trajs(tok, n: int = 3):
    from rockroll.trainer.learner.sft import expert_trajectory

    episode = EpisodeConfig(history="last_k", history_k=0, max_turns=20, max_tokens_per_turn=8)
    return [expert_trajectory("FrozenLake-v0", SLIPPERY, tok, episode, s) for s in range(n)]


def test_turn_values_read_the_value_of_each_turns_prompt(tiny_model_dir: Path) -> None:
    from rockroll.trainer.learner.turns import turn_values

    _, tok = load_model_and_tokenizer(tiny_model_dir)
    trajs = _trajs(tok)
    seen = {}

    def fake_values(batch):  # value at t = 1000 * row + t: the position read back names the token
        rows, length = batch.input_ids.shape
        seen["rows"] = rows
        return torch.arange(length).float().unsqueeze(0) + 1000 * torch.arange(rows).float().unsqueeze(1)

    values = turn_values(trajs, "per_turn", fake_values, tok.pad_token_id)
    row = 0
    for t in trajs:
        assert len(values[t.episode_id]) == len(t.turns)
        for turn, v in zip(t.turns, values[t.episode_id], strict=True):
            assert v == 1000 * row + len(turn.prompt_ids)  # the first response token's position
            row += 1
    assert seen["rows"] == row


def test_gae_advantages_and_returns_reach_the_turns_tokens(tiny_model_dir: Path) -> None:
    from rockroll.trainer.config import AlgoConfig
    from rockroll.trainer.learner.turns import turn_rows

    _, tok = load_model_and_tokenizer(tiny_model_dir)
    trajs = _trajs(tok, 2)
    algo = AlgoConfig(turn_credit="gae", step_gamma=0.9, lam=1.0, dynamic_sampling=False)
    values = {t.episode_id: [0.5] * len(t.turns) for t in trajs}
    rows = turn_rows(trajs, algo, "per_turn", values=values)
    assert rows.returns is not None and len(rows.returns) == len(rows.samples)
    i = 0
    for t in trajs:
        rewards = [u.reward for u in t.turns]
        for k, turn in enumerate(t.turns):
            # lam = 1: A_t = sum_j gamma^j r_{t+j} (+ bootstrap) - V_t; return = A_t + V_t
            g = sum(0.9**j * r for j, r in enumerate(rewards[k:]))
            if t.truncated:
                g += 0.9 ** (len(rewards) - k) * 0.5
            adv, ret = rows.advantages[i], rows.returns[i]
            n = len(turn.prompt_ids)
            assert set(adv[:n]) == {0.0} and set(ret[:n]) == {0.0}  # nothing on prompt tokens
            assert adv[n:] == pytest.approx([g - 0.5] * len(turn.response_ids))
            assert ret[n:] == pytest.approx([g] * len(turn.response_ids))
            i += 1


def test_gae_needs_multiturn_mode() -> None:
    from rockroll.trainer.config_io import config_from_dict

    with pytest.raises(ValueError, match="turn_credit: gae"):
        config_from_dict({"rollout": {"mode": "plan"}, "algo": {"turn_credit": "gae"}})
    cfg = config_from_dict({"rollout": {"mode": "multiturn"}, "algo": {"turn_credit": "gae"}})
    assert cfg.algo.needs_critic


@pytest.mark.slow
def test_multiturn_ppo_with_a_critic_trains_the_critic(tiny_model_dir: Path, tmp_path: Path) -> None:
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    cfg = config_from_dict({
        "name": "gae", "seed": 0, "total_steps": 8, "model": {"path": str(tiny_model_dir)},
        "rollout": {"mode": "multiturn", "env_kwargs": SLIPPERY, "eval_episodes": 4, "eval_every": 0,
                    # unrestricted answers: the untrained model's invalid ones are penalised, so every step's
                    # returns differ from the critic's zero start (restricted, a step may have no signal at all)
                    "episode": {"max_turns": 3, "max_tokens_per_turn": 6, "restrict_answers": False},
                    "scheduler": {"group_size": 4, "num_env_groups": 2}},
        "algo": {"turn_credit": "gae", "dynamic_sampling": False},
        "optim": {"lr": 1e-4, "critic_lr": 3e-3, "micro_batch_size": 64},
        "sft": {"steps": 0}, "checkpoint": {"every": 0},
        "logging": {"run_dir": str(tmp_path)},
    })  # fmt: skip
    run_training(cfg)
    records = [r for r in read_metrics(tmp_path / "gae") if "critic/value_loss" in r]
    assert len(records) == 8
    assert all("turn_credit/value_mean" in r and r["critic/grad_norm"] > 0 for r in records)
    first, last = records[0]["critic/value_loss"], records[-1]["critic/value_loss"]
    assert last < first, (first, last)  # the critic fits the per-turn returns it is given


def test_merged_identical_turns_keep_the_unclipped_value_loss_gradient() -> None:
    """Identical turns merged into one row (weight n) carry their mean return: the critic's unclipped
    loss gradient is the unmerged rows'; a clipped value loss keeps the rows apart."""
    from rockroll.agentrl.trajectory import TrainSample
    from rockroll.trainer.algos import aggregate_loss, value_loss
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.learner.turns import TurnRows, merge_identical, merge_ok

    ids, mask = [5, 6, 7, 8], [0, 0, 1, 1]
    samples = [TrainSample(list(ids), list(mask), [0.0] * 4, 0.0, "g", f"e{i}", 0) for i in range(3)]
    samples.append(TrainSample([5, 6, 7, 9], list(mask), [0.0] * 4, 0.0, "g", "e3", 0))
    advs = [[0, 0, a, a] for a in (0.5, 0.1, 0.3, -0.2)]
    rets = [[0, 0, r, r] for r in (1.0, 0.2, 0.6, 0.0)]
    merged = merge_identical(TurnRows(samples, advs, {}, returns=rets))
    assert merged.weights == [3.0, 1.0] and merged.returns is not None
    assert merged.returns[0][2:] == pytest.approx([0.6, 0.6]) and merged.advantages[0][2:] == pytest.approx([0.3, 0.3])

    def grad(rows: TurnRows) -> float:
        v = torch.tensor(0.4, requires_grad=True)
        length = 4
        loss_mask = torch.tensor([r.response_mask for r in rows.samples], dtype=torch.float32) * rows.loss_weights()
        values = v * torch.ones(len(rows.samples), length)
        loss = aggregate_loss(value_loss(values, values.detach(), rows.returns_tensor(length), clip=None), loss_mask)
        loss.backward()
        return float(v.grad)

    assert grad(merged) == pytest.approx(grad(TurnRows(samples, advs, {}, returns=rets)))
    cfg = TrainConfig.model_validate({"algo": {"turn_credit": "gae"}})
    assert not merge_ok(cfg)  # value_clip 0.2 by default
    assert merge_ok(cfg.model_copy(update={"algo": cfg.algo.model_copy(update={"value_clip": 0.0})}))
