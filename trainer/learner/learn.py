"""One update of the training loop: a batch of trajectories in, new policy weights out.

:func:`learn` is steps 2-4 of :func:`rockroll.trainer.pipeline.run_training`: training rows (whole
plans, or per-turn rows with their credit in multi-turn mode) -> old / reference logprobs and critic
values -> advantages and loss masks -> PPO epochs on the workers. The trainer-engine logprob gap of
the batch (``actor/logprob_gap_mean``, ``_max``) comes back with the update's metrics.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rockroll.trainer.learner.actor import single_pass
from rockroll.trainer.learner.tag_steps import tag_ids
from rockroll.trainer.learner.turns import (
    TurnRows,
    merge_identical,
    merge_ok,
    merged_turn_rows,
    turn_rows,
    turn_values,
)

if TYPE_CHECKING:
    from rockroll.agentrl.trajectory import Trajectory
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.rollout.base import Rollout

__all__ = ["cap_hit_share", "learn", "truncated"]


def truncated(traj: Trajectory) -> bool:
    """Whether any response of the episode was cut at the token cap."""
    return any(t.finish_reason == "length" for t in traj.turns)


def cap_hit_share(trajs: list[Trajectory]) -> float:
    """``rollout/cap_hit_share``: the share of the batch's answers (turns) cut at the token cap."""
    turns = [t for traj in trajs for t in traj.turns]
    return sum(t.finish_reason == "length" for t in turns) / max(len(turns), 1)


def _rows(cfg: TrainConfig, workers: Any, rollout: Rollout, trajs: list[Trajectory], pad_id: int) -> TurnRows:
    """Multi-turn training rows: each turn's tokens with its advantage (``algo.turn_credit``)."""
    forks, fork_metrics = None, {}
    if cfg.algo.turn_credit == "fork":
        forks, fork_metrics = rollout.fork_values(trajs)  # type: ignore[attr-defined]
    layout = "concat" if cfg.rollout.episode.history == "full" else "per_turn"
    values_by_turn = None
    if cfg.algo.turn_credit == "gae":
        values_by_turn = turn_values(trajs, layout, workers.values, pad_id)
    if merge_ok(cfg) and layout == "per_turn" and forks is None and values_by_turn is None:
        return merged_turn_rows(trajs, cfg.algo)  # merged while built: one row per distinct turn
    rows = turn_rows(trajs, cfg.algo, layout, forks, values_by_turn)
    if merge_ok(cfg):
        rows = merge_identical(rows)
    rows.metrics.update(fork_metrics)
    return rows


def learn(
    cfg: TrainConfig, workers: Any, rollout: Rollout, trajs: list[Trajectory], step: int, pad_id: int
) -> tuple[dict[str, float], Any]:
    """Update the policy on ``trajs``; ``(metrics, new weights)``, the weights None when no row carried a
    learning signal (no update, but the step counts)."""
    import torch

    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.prepare import compute_advantages

    t0 = time.perf_counter()
    rows = _rows(cfg, workers, rollout, trajs, pad_id) if cfg.rollout.plays_envs else None
    samples = rows.samples if rows is not None else [s for t in trajs for s in t.to_samples("concat")]
    if not samples:
        return {**(rows.metrics if rows else {}), "actor/updates": 0.0, "system/sync_bytes": 0.0}, None
    batch = collate(samples, pad_id)
    if rows is None:
        batch.extras["truncated"] = torch.tensor([float(truncated(t)) for t in trajs])
    # old / reference logprobs, values
    if rows is None or not single_pass(cfg, len(batch)):
        batch.extras["old_logprobs"] = workers.old_logprobs(batch)
    ref = workers.ref_logprobs(batch)
    if ref is not None:
        batch.extras["ref_logprobs"] = ref
    values = workers.values(batch)
    if values is not None:
        batch.extras["values"] = values
    t1 = time.perf_counter()
    # advantages, PPO epochs (the engine may sleep meanwhile: nothing generates until the sync)
    if rows is not None:
        batch.extras["advantages"] = rows.advantage_tensor(batch.input_ids.shape[1])
        balance = cfg.algo.tag_balance
        batch.extras["loss_mask"] = batch.response_mask * rows.loss_weights(batch.response_mask, balance)
        if rows.returns is not None:
            batch.extras["returns"] = rows.returns_tensor(batch.input_ids.shape[1])
        metrics = {**rows.metrics, **rows.token_shares(batch.response_mask)}
        if cfg.optim.tag_steps:
            batch.extras["tag_ids"] = tag_ids(rows.tags)
    else:
        metrics = compute_advantages(batch, cfg.algo, cfg.rollout.episode.max_tokens_per_turn)
    rollout.release()
    metrics.update(workers.update(batch, step))
    metrics.update({
        "time/logprobs": t1 - t0, "time/train": time.perf_counter() - t1,
        "system/tokens": float(batch.attention_mask.sum()),
    })  # fmt: skip
    return metrics, workers.policy_weights()
