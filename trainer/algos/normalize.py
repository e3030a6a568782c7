"""Reward and advantage shaping: clip, scale, normalise, whiten, and the sample masks.

* :func:`shape_rewards`: clip to ``[-clip, clip]``, multiply by ``scale``, optionally
  normalise over the batch (``"batch"``) or within groups (``"group"``).
* :func:`masked_whiten` / :func:`clip_advantages`: advantage whitening and clipping.
* :func:`difficulty_mask`: dynamic sampling: drop groups whose rewards are all equal (they carry
  no GRPO signal).
* :func:`max_length_mask`: drop responses that hit the length cap (their reward is not the
  model's choice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["shape_rewards", "masked_mean", "masked_whiten", "clip_advantages", "difficulty_mask", "max_length_mask"]


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``x`` where ``mask`` is 1 (0 when the mask is empty)."""
    m = mask.float()
    if dim is None:
        return (x * m).sum() / m.sum().clamp(min=1.0)
    return (x * m).sum(dim) / m.sum(dim).clamp(min=1.0)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / std`` with mean and (biased) variance over the masked entries.

    With ``shift_mean=False`` the mean is added back (scale only).
    """
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    out = (x - mean) * (var + eps).rsqrt()
    if not shift_mean:
        out = out + mean
    return out


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
    from rockroll.trainer.algos.advantages import group_advantages

    r = rewards.float()
    if clip is not None:
        r = r.clamp(-clip, clip)
    r = r * scale
    if normalize == "none":
        return r
    if normalize == "batch":
        if r.numel() < 2:
            return r - r.mean()
        return (r - r.mean()) / (r.std() + eps)
    if normalize == "group":
        if group_ids is None:
            raise ValueError("normalize='group' needs group_ids")
        return group_advantages(r, group_ids, norm_std=True, eps=eps)
    raise ValueError(f"normalize must be 'none', 'batch' or 'group', got {normalize!r}")


def difficulty_mask(rewards: torch.Tensor, group_ids: Sequence[str], *, tol: float = 1e-6) -> torch.Tensor:
    """1.0 for rows whose group has reward spread > ``tol``, else 0.0 (all-correct or all-wrong groups)."""
    import torch

    from rockroll.trainer.algos.advantages import group_index

    keep = torch.zeros(rewards.shape[0], dtype=torch.float32)
    for idx in group_index(group_ids):
        r = rewards[idx].float()
        if len(idx) > 1 and float(r.max() - r.min()) > tol:
            keep[idx] = 1.0
    return keep


def max_length_mask(response_lengths: torch.Tensor, max_response_len: int) -> torch.Tensor:
    """1.0 for responses shorter than the cap, 0.0 for those that were cut at ``max_response_len``."""
    return (response_lengths < max_response_len).float()
