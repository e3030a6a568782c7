"""Multi-turn training rows: trajectories -> per-turn advantages -> token-aligned rows.

Every turn of an episode gets its own advantage (``algo.turn_credit``, computed by
:mod:`rockroll.trainer.algos.turn_credit`), placed on exactly that turn's response tokens: env and
template tokens carry no advantage and no loss. With a history window the rows are one per turn
(``per_turn`` layout, the prompt as the policy saw it); with the whole conversation they are one per
episode (``concat``), each turn's response tokens carrying that turn's advantage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from rockroll.agentrl.trajectory import TrainSample, Trajectory
from rockroll.trainer.algos.turn_credit import TurnCreditConfig, episode_from_trajectory, turn_advantages
from rockroll.trainer.learner.batch import Batch, collate

if TYPE_CHECKING:
    from rockroll.trainer.config import AlgoConfig

__all__ = ["TurnRows", "turn_rows", "turn_values", "credit_config", "merge_identical", "merge_ok", "merged_turn_rows"]

Layout = Literal["concat", "per_turn"]


class TurnRows:
    """Training rows of one batch and, per row, one advantage per token (0 off the response)."""

    def __init__(
        self,
        samples: list[TrainSample],
        advantages: list[list[float]],
        metrics: dict[str, float],
        weights: list[float] | None = None,
        returns: list[list[float]] | None = None,
        tags: list[str] | None = None,
    ) -> None:
        self.samples, self.advantages, self.metrics = samples, advantages, metrics
        #: how many identical turns each row stands for (see :func:`merge_identical`)
        self.weights = weights or [1.0] * len(samples)
        #: the critic's per-token targets (``turn_credit: gae``), aligned like the advantages
        self.returns = returns
        #: each row's tag (the episode's env tag, else its env id): what ``algo.tag_balance`` weighs apart
        self.tags = tags or [""] * len(samples)

    def loss_weights(self, response_mask: Any = None, balance_tags: bool = False) -> Any:
        """``[rows, 1]`` weights to multiply the response mask with (the loss mask).

        ``balance_tags`` (``algo.tag_balance``; ``response_mask`` needed) scales each tag's rows so that every
        tag holds the same share of the weighted response tokens: the token mean is then the mean over tags of
        each tag's own token mean. The weights' token total is unchanged (so is a token-mean denominator)."""
        import torch

        w = torch.tensor(self.weights, dtype=torch.float32).unsqueeze(1)
        if not balance_tags:
            return w
        live = {t: n for t, n in self._tag_tokens(response_mask, w).items() if n > 0}
        if len(live) < 2:
            return w
        total = sum(live.values())
        scale = [total / (len(live) * live[t]) if t in live else 1.0 for t in self.tags]
        return w * torch.tensor(scale, dtype=torch.float32).unsqueeze(1)

    def token_shares(self, response_mask: Any) -> dict[str, float]:
        """``learn/token_share/<tag>``: each tag's share of the batch's weighted response tokens (before any
        balancing), when the rows hold more than one tag."""
        if len(set(self.tags)) < 2:  # a one-tag batch (most runs): nothing to count on the update's path
            return {}
        per_tag = self._tag_tokens(response_mask, self.loss_weights())
        total = sum(per_tag.values())
        if len(per_tag) < 2 or total <= 0:
            return {}
        return {f"learn/token_share/{t}": n / total for t, n in per_tag.items()}

    def _tag_tokens(self, response_mask: Any, weights: Any) -> dict[str, float]:
        """Weighted response tokens per tag."""
        per_tag: dict[str, float] = {}
        for tag, n in zip(self.tags, (response_mask.float() * weights).sum(1).tolist(), strict=True):
            per_tag[tag] = per_tag.get(tag, 0.0) + n
        return per_tag

    def advantage_tensor(self, length: int) -> Any:
        """``[rows, length]`` right-padded advantages, aligned with :func:`rockroll.trainer.learner.batch.collate`."""
        return _padded(self.advantages, length)

    def returns_tensor(self, length: int) -> Any:
        """``[rows, length]`` critic targets (None without a critic), aligned like :meth:`advantage_tensor`."""
        return None if self.returns is None else _padded(self.returns, length)


def _padded(rows: list[list[float]], length: int) -> Any:
    import torch

    out = torch.zeros((len(rows), length), dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out


def turn_values(
    trajs: list[Trajectory], layout: Layout, values_of: Callable[[Batch], Any], pad_id: int
) -> dict[str, list[float]]:
    """The critic's value of the state each turn acted from, per episode id (``turn_credit: gae``).

    A turn's state is its prompt: the value is read at the turn's first response token (token-aligned
    values hold at ``t`` the value of the context before token ``t``), in either row layout.
    """
    kept = [t for t in trajs if not t.masked and t.turns]
    rows: list[TrainSample] = []
    where: list[tuple[str, int, int]] = []  # episode id, row, position
    for t in kept:
        samples = t.to_samples(layout)
        for i, turn in enumerate(t.turns):
            where.append((t.episode_id, len(rows) + (i if layout == "per_turn" else 0), len(turn.prompt_ids)))
        rows += samples
    if not rows:
        return {}
    values = values_of(collate(rows, pad_id))
    out: dict[str, list[float]] = {}
    for episode_id, row, pos in where:
        out.setdefault(episode_id, []).append(float(values[row, pos]))
    return out


def credit_config(algo: AlgoConfig) -> TurnCreditConfig:
    """The turn-credit settings of ``algo``."""
    return TurnCreditConfig(
        mode=algo.turn_credit,
        gamma=algo.step_gamma,
        lam=algo.lam,
        norm_std=algo.credit_std_norm,
        step_weight=algo.step_weight,
    )


def _concat_advantages(traj: Trajectory, row: TrainSample, per_turn: list[float]) -> list[float]:
    out: list[float] = []
    seen = 0
    for turn, adv in zip(traj.turns, per_turn, strict=True):
        new_context = len(turn.prompt_ids) - seen
        out += [0.0] * new_context + [adv] * len(turn.response_ids)
        seen = len(turn.prompt_ids) + len(turn.response_ids)
    if len(out) != len(row.input_ids):
        raise ValueError(
            f"episode {traj.episode_id}: advantages cover {len(out)} tokens, the row has {len(row.input_ids)}"
        )
    return out


def merge_ok(cfg: Any) -> bool:
    """Whether ``cfg`` lets :func:`merge_identical` run: per-turn rows, token-mean loss, no TIS weights
    (those read each row's own rollout logprobs); with critic targets (``turn_credit: gae``) only an
    unclipped value loss, the one whose sum over identical rows is that of their mean target."""
    a = cfg.algo
    return bool(
        a.merge_identical_turns and cfg.rollout.episode.history == "last_k"
        and a.loss_agg_mode == "token-mean" and not a.tis_cap and (a.turn_credit != "gae" or not a.value_clip)
    )  # fmt: skip


def merge_identical(rows: TurnRows) -> TurnRows:
    """One row for identical turns (same tokens) whose advantages have the same sign.

    With a short history window many turns repeat exactly (a group's episodes cross the same cells
    and choose the same moves). PPO's clipped objective is linear in the advantage for a given sign
    and ratio, so ``n`` identical rows with advantages ``a_i`` of one sign cost the same as one row
    with advantage ``mean(a_i)`` whose loss mask counts ``n``: the loss, its gradient and the token
    average's denominator are unchanged, and the forward passes shrink. Critic targets ``R_i`` become
    their mean too: ``sum_i (V - R_i)^2 = n (V - mean R)^2 + const`` (an unclipped value loss).
    """
    merged: dict[tuple[tuple[int, ...], bool, str], int] = {}
    samples: list[TrainSample] = []
    tags: list[str] = []
    sums: list[list[float]] = []
    ret_sums: list[list[float]] = []
    weights: list[float] = []
    rets_in = rows.returns if rows.returns is not None else [[] for _ in rows.samples]
    for sample, adv, ret, tag in zip(rows.samples, rows.advantages, rets_in, rows.tags, strict=True):
        key = (tuple(sample.input_ids), sum(adv) > 0, tag)
        i = merged.get(key)
        if i is None:
            merged[key] = len(samples)
            samples.append(sample)
            tags.append(tag)
            sums.append(list(adv))
            ret_sums.append(list(ret))
            weights.append(1.0)
        else:
            sums[i] = [a + b for a, b in zip(sums[i], adv, strict=True)]
            ret_sums[i] = [a + b for a, b in zip(ret_sums[i], ret, strict=True)]
            weights[i] += 1.0
    advantages = [[a / w for a in row] for row, w in zip(sums, weights, strict=True)]
    returns = None
    if rows.returns is not None:
        returns = [[r / w for r in row] for row, w in zip(ret_sums, weights, strict=True)]
    metrics = {**rows.metrics, "rollout/unique_row_fraction": len(samples) / max(len(rows.samples), 1)}
    return TurnRows(samples, advantages, metrics, weights, returns, tags)


def turn_rows(
    trajs: list[Trajectory],
    algo: AlgoConfig,
    layout: Layout,
    fork_values: dict[str, list[float | None]] | None = None,
    values: dict[str, list[float]] | None = None,
) -> TurnRows:
    """Rows and token advantages of the non-masked episodes of ``trajs`` (masked ones are infra failures).

    With ``algo.dynamic_sampling`` rows whose advantage is 0 on every token are dropped: they carry
    no signal and would only dilute the loss average. ``values`` (per episode id, one critic value
    per turn: :func:`turn_values`) feed ``turn_credit: gae``; a truncated episode bootstraps from its
    last turn's value (the state after it has no prompt of its own).
    """
    kept = [t for t in trajs if not t.masked and t.turns]
    if not kept:
        return TurnRows([], [], {"rollout/kept_fraction": 0.0})
    forks, vals = fork_values or {}, values or {}
    episodes = []
    for t in kept:
        extra: dict[str, Any] = {}
        if t.episode_id in forks:
            extra["fork_values"] = forks[t.episode_id]
        if t.episode_id in vals:
            extra.update(values=vals[t.episode_id], last_value=vals[t.episode_id][-1] if t.truncated else None)
        episodes.append(episode_from_trajectory(t, **extra))
    credit = turn_advantages(episodes, credit_config(algo))
    samples: list[TrainSample] = []
    advantages: list[list[float]] = []
    tags: list[str] = []
    returns: list[list[float]] | None = [] if credit.returns is not None else None
    total = 0
    for i, (traj, per_turn) in enumerate(zip(kept, credit.advantages, strict=True)):
        rows = traj.to_samples(layout)
        row_advs = _spread(traj, rows, per_turn, layout)
        row_rets = _spread(traj, rows, credit.returns[i], layout) if credit.returns is not None else None
        for j, (row, adv) in enumerate(zip(rows, row_advs, strict=True)):
            total += 1
            if algo.dynamic_sampling and not any(adv):
                continue
            samples.append(row)
            advantages.append(adv)
            tags.append(traj.env_tag or traj.env_id)
            if returns is not None and row_rets is not None:
                returns.append(row_rets[j])
    flat = [a for row in advantages for a in row if a]
    metrics = _row_metrics(kept, credit.metrics, len(samples) / max(total, 1), sum(abs(a) for a in flat), len(flat))
    return TurnRows(samples, advantages, metrics, returns=returns, tags=tags)


def merged_turn_rows(trajs: list[Trajectory], algo: AlgoConfig) -> TurnRows:
    """:func:`turn_rows` then :func:`merge_identical` for ``per_turn`` rows without critic or fork values, in one
    pass that merges the turns before any row is built: the same rows (each distinct turn's first occurrence),
    advantages, weights and metrics, with one row built per distinct turn instead of one per turn."""
    kept = [t for t in trajs if not t.masked and t.turns]
    if not kept:
        return TurnRows([], [], {"rollout/kept_fraction": 0.0})
    credit = turn_advantages([episode_from_trajectory(t) for t in kept], credit_config(algo))
    index: dict[tuple[Any, ...], int] = {}
    firsts: list[tuple[Trajectory, Any]] = []
    sums: list[float] = []
    weights: list[float] = []
    tags: list[str] = []
    total = kept_rows = nonzero = 0
    abs_sum = 0.0
    for traj, per_turn in zip(kept, credit.advantages, strict=True):
        tag = traj.env_tag or traj.env_id
        for turn, a in zip(traj.turns, per_turn, strict=True):
            total += 1
            n = len(turn.response_ids)
            if algo.dynamic_sampling and (a == 0 or n == 0):
                continue  # no token carries signal
            kept_rows += 1
            if a != 0:
                abs_sum, nonzero = abs_sum + abs(a) * n, nonzero + n
            key = (tuple(turn.prompt_ids), tuple(turn.response_ids), a * n > 0, tag)
            i = index.get(key)
            if i is None:
                index[key] = len(firsts)
                firsts.append((traj, turn))
                sums.append(a)
                weights.append(1.0)
                tags.append(tag)
            else:
                sums[i] += a
                weights[i] += 1.0
    samples, advantages = [], []
    for (traj, turn), a_sum, w in zip(firsts, sums, weights, strict=True):
        samples.append(traj.turn_sample(turn, traj.final_reward, traj.oldest_weight_version))
        advantages.append([0.0] * len(turn.prompt_ids) + [a_sum / w] * len(turn.response_ids))
    metrics = _row_metrics(kept, credit.metrics, kept_rows / max(total, 1), abs_sum, nonzero)
    metrics["rollout/unique_row_fraction"] = len(samples) / max(kept_rows, 1)
    return TurnRows(samples, advantages, metrics, weights, None, tags)


def _row_metrics(
    kept: list[Trajectory], credit_metrics: dict[str, Any], kept_fraction: float, abs_sum: float, nonzero: int
) -> dict[str, float]:
    """The batch metrics of :func:`turn_rows` and :func:`merged_turn_rows`: the credit's own, the share of rows
    kept, the mean absolute advantage of the tokens that carry one, turns per episode and invalid actions."""
    turns = sum(len(t.turns) for t in kept)
    metrics = {k: float(v) for k, v in credit_metrics.items()}
    metrics.update({
        "rollout/kept_fraction": kept_fraction,
        "rollout/adv_abs_mean": abs_sum / max(nonzero, 1),
        "rollout/turns_per_episode": turns / len(kept),
        "rollout/invalid_action_rate": sum(not u.action_is_valid for t in kept for u in t.turns) / max(turns, 1),
    })  # fmt: skip
    return metrics


def _spread(traj: Trajectory, rows: list[TrainSample], per_turn: list[float], layout: Layout) -> list[list[float]]:
    """One value per turn onto that turn's response tokens of the episode's rows."""
    if layout == "per_turn":
        return [[a * m for m in row.response_mask] for row, a in zip(rows, per_turn, strict=True)]
    return [_concat_advantages(traj, rows[0], per_turn)]
