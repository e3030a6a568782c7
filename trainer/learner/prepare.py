"""From a rollout batch with old/ref logprobs (and values) to advantages and the loss mask.

Order: shape rewards (clip, scale, normalise) -> sample masks (dynamic sampling, truncation)
-> KL reward penalty (when KL is not a loss) -> advantages (``algo.adv_estimator``, looked up in
:mod:`rockroll.trainer.algos.estimators`; its ``group_based`` flag picks sequence or token rewards) ->
whitening and clipping. Writes ``advantages``, ``loss_mask`` (and ``returns`` for GAE) into
``batch.extras`` and returns metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rockroll.trainer.config import AlgoConfig
    from rockroll.trainer.learner.batch import Batch

__all__ = ["compute_advantages"]


def compute_advantages(batch: Batch, algo: AlgoConfig, max_new_tokens: int | None = None) -> dict[str, float]:
    """Fill ``batch.extras`` with ``advantages``/``loss_mask`` (``returns`` for GAE); return metrics."""
    import torch

    from rockroll.trainer import algos

    estimator = algos.get_advantage_estimator(algo.adv_estimator)
    group_based = estimator.group_based
    ex = batch.extras
    mask = batch.response_mask.clone()
    rewards = algos.shape_rewards(
        batch.rewards,
        clip=algo.reward_clip or None,
        scale=algo.reward_scale,
        normalize=algo.reward_norm,
        group_ids=batch.group_ids,
    )
    keep = torch.ones(len(batch))
    if algo.dynamic_sampling and group_based:
        keep = keep * algos.difficulty_mask(batch.rewards, batch.group_ids)
    if algo.mask_truncated:
        truncated = ex.get("truncated")
        if truncated is not None:
            keep = keep * (1.0 - truncated.float())
        elif max_new_tokens is not None:
            keep = keep * algos.max_length_mask(batch.response_lengths, max_new_tokens)
    mask = mask * keep.unsqueeze(1)

    kl_reward = algo.kl_coef > 0 and not algo.use_kl_loss and "ref_logprobs" in ex
    metrics: dict[str, float] = {}
    if kl_reward:
        kl = algos.kl_estimate(ex["old_logprobs"], ex["ref_logprobs"], algo.kl_estimator) * batch.response_mask
        metrics["actor/kl"] = float(kl.sum() / batch.response_mask.sum().clamp(min=1))
    if group_based:
        est_rewards = rewards
        if kl_reward:
            est_rewards = est_rewards - algo.kl_coef * (kl.sum(1))
    elif kl_reward:
        est_rewards = algos.kl_penalized_rewards(
            rewards,
            ex["old_logprobs"],
            ex["ref_logprobs"],
            batch.response_mask,
            coef=algo.kl_coef,
            kind=algo.kl_estimator,
        )
    else:
        est_rewards = algos.kl_penalized_rewards(
            rewards, ex["old_logprobs"], ex["old_logprobs"], batch.response_mask, coef=0.0
        )
    adv, returns = estimator(
        algos.AdvantageInputs(
            rewards=est_rewards,
            mask=mask,
            response_mask=batch.response_mask,
            group_ids=batch.group_ids,
            values=ex.get("values"),
            gamma=algo.gamma,
            lam=algo.lam,
        )
    )
    if returns is not None:
        ex["returns"] = returns
    if algo.adv_whiten:
        adv = algos.masked_whiten(adv, mask) * mask
    adv = algos.clip_advantages(adv, algo.adv_clip or None)
    ex["advantages"] = adv
    ex["loss_mask"] = mask
    kept = float(keep.sum())
    metrics.update({
        "rollout/reward_mean": float(batch.rewards.mean()),
        "rollout/kept_fraction": kept / max(len(batch), 1),
        "rollout/adv_abs_mean": float((adv.abs() * mask).sum() / mask.sum().clamp(min=1)),
        "rollout/response_len": float(batch.response_lengths.mean()),
    })  # fmt: skip
    if "values" in ex:
        metrics["critic/value_mean"] = float(
            (ex["values"] * batch.response_mask).sum() / batch.response_mask.sum().clamp(min=1)
        )
    return metrics
