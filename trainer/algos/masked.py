"""Masked reductions over response tokens, shared by the advantages, losses and shaping modules.

They live apart so that :mod:`~rockroll.trainer.algos.advantages` and
:mod:`~rockroll.trainer.algos.normalize` import in one direction only (normalize -> advantages -> masked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["masked_mean", "masked_whiten"]


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
