"""``algo.tag_balance``: multi-turn rows of several tags weigh each tag's tokens the same in the loss (the mean of
each tag's token mean), keep the token-mean denominator, merge only within a tag, and refuse a config it
cannot apply to."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rockroll.agentrl.trajectory import TrainSample, Trajectory, Turn
from rockroll.trainer.algos.aggregate import aggregate_loss
from rockroll.trainer.config import AlgoConfig
from rockroll.trainer.config_io import config_from_dict
from rockroll.trainer.learner.batch import collate
from rockroll.trainer.learner.turns import TurnRows, merge_identical, turn_rows


def _sample(prompt: list[int], answer: list[int]) -> TrainSample:
    ids = prompt + answer
    return TrainSample(ids, [0] * len(prompt) + [1] * len(answer), [0.0] * len(ids), 0, "g", "e", 0)


def _rows() -> TurnRows:
    """Tag ``math``: two one-token answers; tag ``code``: one four-token answer."""
    samples = [_sample([5, 6], [7]), _sample([5, 8], [9]), _sample([5, 6], [1, 2, 3, 4])]
    advs = [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]]
    return TurnRows(samples, advs, {}, tags=["math", "math", "code"])


def test_each_tag_gets_the_same_share_of_the_token_mean() -> None:
    rows = _rows()
    batch = collate(rows.samples, 0)
    plain = batch.response_mask * rows.loss_weights()
    balanced = batch.response_mask * rows.loss_weights(batch.response_mask, balance_tags=True)
    on_math = torch.zeros_like(plain)
    on_math[:2] = 1.0  # a token loss of 1 on math's tokens, 0 on code's
    assert float(aggregate_loss(on_math, plain, "token-mean")) == pytest.approx(2 / 6)
    assert float(aggregate_loss(on_math, balanced, "token-mean")) == pytest.approx(0.5)
    assert float(balanced.sum()) == pytest.approx(float(plain.sum()))  # the denominator is unchanged
    assert rows.token_shares(batch.response_mask) == pytest.approx(
        {"learn/token_share/math": 2 / 6, "learn/token_share/code": 4 / 6}
    )


def test_one_tag_is_left_as_it_is() -> None:
    rows = _rows()
    rows.tags = ["math"] * 3
    batch = collate(rows.samples, 0)
    assert torch.equal(rows.loss_weights(batch.response_mask, balance_tags=True), rows.loss_weights())
    assert rows.token_shares(batch.response_mask) == {}


def test_identical_turns_merge_only_within_a_tag() -> None:
    s = _sample([5, 6], [7])
    rows = TurnRows([s, s, s], [[0.0, 0.0, 1.0]] * 3, {}, tags=["a", "a", "b"])
    merged = merge_identical(rows)
    assert merged.tags == ["a", "b"] and merged.weights == [2.0, 1.0]


def test_turn_rows_tag_each_row_with_its_episode() -> None:
    def episode(tag: str, reward: float, i: int) -> Trajectory:
        turn = Turn(prompt_ids=[5, 6], response_ids=[7, 2], logprobs=[-0.1, -0.1], weight_version=0, reward=reward)
        return Trajectory(f"e{i}", "g", "Env-v0", 0, env_tag=tag, turns=[turn], final_reward=reward)

    trajs = [episode("x", 1.0, 0), episode("x", 0.0, 1), episode("", 1.0, 2), episode("", 0.0, 3)]
    rows = turn_rows(trajs, AlgoConfig(), "per_turn")
    assert rows.tags == ["x", "x", "Env-v0", "Env-v0"]


def test_configs_it_cannot_apply_to_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="token-mean"):
        AlgoConfig(tag_balance=True, loss_agg_mode="seq-mean-token-mean")
    with pytest.raises(ValueError, match="tag_balance"):
        config_from_dict({"name": "x", "algo": {"tag_balance": True}, "rollout": {"mode": "plan"}})
