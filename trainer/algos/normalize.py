"""Reward and advantage shaping: clip, scale, normalise, whiten, and the sample masks.

* :func:`shape_rewards`: clip to ``[-clip, clip]``, multiply by ``scale``, optionally
  normalise over the batch (``"batch"``) or within groups (``"group"``).
* :func:`masked_whiten` / :func:`clip_advantages`: advantage whitening (re-exported from
  :mod:`~rockroll.trainer.algos.masked`) and clipping.
* :func:`difficulty_mask`: dynamic sampling: drop groups whose rewards are all equal (they carry
  no GRPO signal).
* :func:`max_length_mask`: drop responses that hit the length cap (their reward is not the
  model's choice).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rockroll.trainer.algos.advantages import group_advantages, group_index
from rockroll.trainer.algos.masked import masked_mean, masked_whiten

if TYPE_CHECKING:
    import torch

__all__ = [
    "REWARD_NORMS",
    "shape_rewards",
    "masked_mean",
    "masked_whiten",
    "clip_advantages",
    "difficulty_mask",
    "max_length_mask",
]


def clip_advantages(adv: torch.Tensor, clip: float | None) -> torch.Tensor:
    """Clamp advantages to ``[-clip, clip]`` (no-op for None)."""
    return adv if clip is None else adv.clamp(-clip, clip)


def shape_rewards(
    rewards: torch.Tensor,
    *,
    clip: float | None = None,
    scale: float = 1.0,
    normalize: str = "none",
    group_ids: Sequence[str] | None = None,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Clip, then scale, then normalise sequence rewards.

    ``normalize``: ``"none"``, ``"batch"`` (``(r - mean) / (std + eps)`` over the batch) or
    ``"group"`` (the same within each group; needs ``group_ids``).
    """
    norm = REWARD_NORMS.get(normalize)
    if norm is None:
        raise ValueError(f"normalize must be one of {', '.join(map(repr, REWARD_NORMS))}, got {normalize!r}")
    r = rewards.float()
    if clip is not None:
        r = r.clamp(-clip, clip)
    return norm(r * scale, group_ids, eps)


def _no_norm(r: torch.Tensor, group_ids: Sequence[str] | None, eps: float) -> torch.Tensor:
    return r


def _batch_norm(r: torch.Tensor, group_ids: Sequence[str] | None, eps: float) -> torch.Tensor:
    if r.numel() < 2:
        return r - r.mean()
    return (r - r.mean()) / (r.std() + eps)


def _group_norm(r: torch.Tensor, group_ids: Sequence[str] | None, eps: float) -> torch.Tensor:
    if group_ids is None:
        raise ValueError("normalize='group' needs group_ids")
    return group_advantages(r, group_ids, norm_std=True, eps=eps)


#: ``algo.reward_norm`` -> ``fn(rewards, group_ids, eps)``, applied after clipping and scaling
REWARD_NORMS: dict[str, Callable[[torch.Tensor, Sequence[str] | None, float], torch.Tensor]] = {
    "none": _no_norm,
    "batch": _batch_norm,
    "group": _group_norm,
}


def difficulty_mask(rewards: torch.Tensor, group_ids: Sequence[str], *, tol: float = 1e-6) -> torch.Tensor:
    """1.0 for rows whose group has reward spread > ``tol``, else 0.0 (all-correct or all-wrong groups)."""
    import torch

    keep = torch.zeros(rewards.shape[0], dtype=torch.float32)
    for idx in group_index(group_ids):
        r = rewards[idx].float()
        if len(idx) > 1 and float(r.max() - r.min()) > tol:
            keep[idx] = 1.0
    return keep


def max_length_mask(response_lengths: torch.Tensor, max_response_len: int) -> torch.Tensor:
    """1.0 for responses shorter than the cap, 0.0 for those that were cut at ``max_response_len``."""
    return (response_lengths < max_response_len).float()
