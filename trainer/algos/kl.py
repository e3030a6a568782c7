"""KL to a reference policy and the entropy bonus.

Estimators of ``KL(pi || ref)`` from samples of ``pi`` (Schulman's k1/k2/k3), per token:

* ``k1 = logp - ref``: unbiased, high variance, can be negative.
* ``k2 = 0.5 * (logp - ref)^2``: biased, low variance, >= 0.
* ``k3 = exp(ref - logp) - (ref - logp) - 1``: unbiased, low variance, >= 0.

Use it as a reward penalty (:func:`kl_penalized_rewards`: subtract ``coef * kl`` per token,
no gradient) or as a loss term (add ``coef * aggregate(kl)`` to the policy loss).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["kl_estimate", "kl_penalized_rewards", "entropy_from_logits", "KL_ESTIMATORS"]

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_estimate(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, kind: str = "k3", clamp: float | None = 10.0
) -> torch.Tensor:
    """Per-token KL estimate of kind ``k1``, ``k2`` or ``k3`` (optionally clamped to ``[-clamp, clamp]``)."""
    import torch

    diff = logprobs - ref_logprobs
    if kind == "k1":
        kl = diff
    elif kind == "k2":
        kl = 0.5 * diff**2
    elif kind == "k3":
        log_ratio = -diff
        kl = torch.exp(log_ratio) - log_ratio - 1.0
    else:
        raise ValueError(f"KL estimator must be one of {KL_ESTIMATORS}, got {kind!r}")
    return kl if clamp is None else kl.clamp(-clamp, clamp)


def kl_penalized_rewards(
    seq_rewards: torch.Tensor,
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    mask: torch.Tensor,
    *,
    coef: float,
    kind: str = "k1",
) -> torch.Tensor:
    """Token rewards: ``-coef * kl`` on every response token, plus the sequence reward on the last one."""
    import torch

    m = mask.float()
    kl = kl_estimate(logprobs.detach(), ref_logprobs.detach(), kind) * m
    token_rewards = -coef * kl
    n, t = m.shape
    positions = torch.arange(t, device=m.device).expand(n, t)
    last = torch.where(m > 0, positions, torch.full_like(positions, -1)).max(dim=1).values
    has = last >= 0
    rows = torch.arange(n, device=m.device)[has]
    token_rewards[rows, last[has]] += seq_rewards[has].float()
    return token_rewards


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax distribution over the last dimension (a -inf logit, a masked token, adds 0)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp.masked_fill(torch.isneginf(logp), 0.0)).sum(-1)
