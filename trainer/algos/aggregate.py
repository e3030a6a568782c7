"""Reduce a token-level loss ``[N, T]`` to a scalar.

* ``token-mean``: ``sum(loss * mask) / sum(mask)``: every token weighs the same (DAPO).
* ``seq-mean-token-sum``: mean over rows of each row's token sum (Dr. GRPO style, with a constant
  length normaliser it is unbiased in length).
* ``seq-mean-token-mean``: mean over rows of each row's token mean (original GRPO).

Rows whose mask is all 0 (dropped samples) count in no denominator.

``denominator`` overrides the divisor (tokens for ``token-mean``, rows otherwise): data-parallel
workers pass the *global* count so that summing their gradients gives exactly the single-worker
gradient.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["aggregate_loss", "LOSS_AGG_MODES", "agg_denominator"]

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")


def agg_denominator(mask: torch.Tensor, mode: str) -> float:
    """The divisor ``aggregate_loss`` uses for this batch: response tokens or rows."""
    if mode == "token-mean":
        return float(mask.float().sum())
    if mode in LOSS_AGG_MODES:
        return float((mask.float().sum(1) > 0).sum())
    raise ValueError(f"loss_agg_mode must be one of {LOSS_AGG_MODES}, got {mode!r}")


def aggregate_loss(
    loss: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean", denominator: float | None = None
) -> torch.Tensor:
    """Scalar loss from token losses under ``mode`` (see the module docstring)."""
    m = mask.float()
    if mode == "token-mean":
        total = (loss * m).sum()
    elif mode == "seq-mean-token-sum":
        total = (loss * m).sum(1).sum()
    elif mode == "seq-mean-token-mean":
        total = ((loss * m).sum(1) / m.sum(1).clamp(min=1.0)).sum()
    else:
        raise ValueError(f"loss_agg_mode must be one of {LOSS_AGG_MODES}, got {mode!r}")
    denom = agg_denominator(m, mode) if denominator is None else denominator
    return total / max(denom, 1.0)
