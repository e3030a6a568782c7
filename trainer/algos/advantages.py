"""Advantage estimators as plain tensor functions.

Shapes: sequence-level rewards are ``[N]``; token-level tensors are ``[N, T]`` with a float
``mask`` that is 1 on response (model-generated) tokens. Every function is pure.

* :func:`compute_gae`: GAE with a critic, over the response tokens of each row (tokens where
  the mask is 0, e.g. env observations inside a multi-turn row, are skipped, not discounted).
* :func:`group_advantages`: GRPO (``(r - mean_g) / (std_g + eps)``) or, with ``norm_std=False``,
  mean-only (Dr. GRPO / RAFT++ style).
* :func:`rloo_advantages`: leave-one-out baseline ``r_i - mean_{j != i} r_j``.
* :func:`reinforce_pp_advantages`: REINFORCE++: discounted token returns, whitened over the batch.
* :func:`discounted_returns`: step-level returns ``G_t = r_t + gamma G_{t+1}`` of one episode.

The trainer picks one by name (``algo.adv_estimator``) through the registry in
:mod:`rockroll.trainer.algos.estimators`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rockroll.trainer.algos.masked import masked_whiten

if TYPE_CHECKING:
    import torch

__all__ = [
    "compute_gae",
    "group_advantages",
    "rloo_advantages",
    "reinforce_pp_advantages",
    "discounted_returns",
    "token_returns",
    "group_index",
]


def group_index(group_ids: Sequence[str]) -> list[list[int]]:
    """Row indices of each group, groups in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, g in enumerate(group_ids):
        groups.setdefault(g, []).append(i)
    return list(groups.values())


def group_advantages(
    rewards: torch.Tensor, group_ids: Sequence[str], *, norm_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """GRPO advantages: reward minus its group's mean, divided by the group's std when ``norm_std``.

    The std is the unbiased sample std (``torch.std``); a group of one gets advantage 0.
    """
    import torch

    if rewards.dim() != 1 or len(group_ids) != rewards.shape[0]:
        raise ValueError(f"need one group id per reward, got {len(group_ids)} ids for shape {tuple(rewards.shape)}")
    out = torch.zeros_like(rewards, dtype=torch.float32)
    for idx in group_index(group_ids):
        r = rewards[idx].float()
        if len(idx) == 1:
            continue
        a = r - r.mean()
        if norm_std:
            a = a / (r.std() + eps)
        out[idx] = a
    return out


def rloo_advantages(rewards: torch.Tensor, group_ids: Sequence[str]) -> torch.Tensor:
    """RLOO: each reward minus the mean of the other rewards of its group (0 for a group of one)."""
    import torch

    out = torch.zeros_like(rewards, dtype=torch.float32)
    for idx in group_index(group_ids):
        n = len(idx)
        if n < 2:
            continue
        r = rewards[idx].float()
        out[idx] = r - (r.sum() - r) / (n - 1)
    return out


def token_returns(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Discounted reward-to-go over the response tokens of each row (masked tokens skipped)."""
    import torch

    n, t = token_rewards.shape
    returns = torch.zeros_like(token_rewards, dtype=torch.float32)
    running = torch.zeros(n, dtype=torch.float32, device=token_rewards.device)
    for k in range(t - 1, -1, -1):
        m = mask[:, k].float()
        running = m * (token_rewards[:, k].float() + gamma * running) + (1 - m) * running
        returns[:, k] = running * m
    return returns


def reinforce_pp_advantages(
    token_rewards: torch.Tensor, mask: torch.Tensor, *, gamma: float = 1.0, eps: float = 1e-8
) -> torch.Tensor:
    """REINFORCE++: discounted token returns, then whitened (mean/std) over all response tokens of the batch."""
    returns = token_returns(token_rewards, mask, gamma)
    return masked_whiten(returns, mask, eps=eps) * mask


def compute_gae(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over each row's response tokens.

    ``delta_k = r_k + gamma * V_{k+1} - V_k`` and ``A_k = delta_k + gamma * lam * A_{k+1}``,
    where ``k+1`` is the next *response* token of the row (0 after the last one). Returns
    ``(advantages, returns)`` with ``returns = advantages + values``, both zero off the mask.
    """
    import torch

    n, t = token_rewards.shape
    adv = torch.zeros(n, t, dtype=torch.float32, device=token_rewards.device)
    next_value = torch.zeros(n, dtype=torch.float32, device=token_rewards.device)
    next_adv = torch.zeros(n, dtype=torch.float32, device=token_rewards.device)
    v = values.detach().float()
    for k in range(t - 1, -1, -1):
        m = mask[:, k].float()
        delta = token_rewards[:, k].float() + gamma * next_value - v[:, k]
        a = delta + gamma * lam * next_adv
        adv[:, k] = a * m
        next_adv = m * a + (1 - m) * next_adv
        next_value = m * v[:, k] + (1 - m) * next_value
    returns = (adv + v) * mask
    return adv, returns


def discounted_returns(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """Step-level returns of one multi-turn episode: ``G_t = r_t + gamma * G_{t+1}``."""
    out = [0.0] * len(rewards)
    running = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        running = float(rewards[i]) + gamma * running
        out[i] = running
    return out
