"""Policy and value losses, token-level, before aggregation.

Every policy loss takes token-aligned ``logprobs`` (current policy, with grad), ``old_logprobs``
(the policy that produced the batch, no grad), ``advantages`` ([N, T] or [N], broadcast) and the
response ``mask``, and returns ``(loss [N, T], stats)``; reduce the loss with
:func:`rockroll.trainer.algos.aggregate.aggregate_loss`. Variants:

* ``ppo``: clipped surrogate with asymmetric range ``[1 - clip_low, 1 + clip_high]`` and the dual
  clip (for negative advantages the loss is capped at ``-A * dual_clip``).
* ``cispo``: REINFORCE on ``logprobs`` weighted by the clipped, detached IS ratio (MiniMax-M1).
* ``topr``: Tapered off-policy REINFORCE: positive advantages plain REINFORCE, negative ones
  weighted by the detached ratio truncated to ``[0, 1]``.
* ``gspo``: sequence-level ratio ``exp(mean_t(logp - old))`` clipped per sequence (Qwen GSPO).
* ``decoupled_ppo``: PPO's clip around a *proximal* policy (``old_logprobs``: the trainer's
  logprobs before this update) with the off-policy correction to the *behaviour* policy that
  generated the batch (``behavior_logprobs``: the engine's, possibly several weight versions
  stale) as a separate, detached and truncated weight ``min(pi_prox / pi_behav, behav_cap)``
  (Hilton et al. 2021, "Batch size-invariance for policy optimization"; used for async RL).

:func:`tis_weights` gives truncated importance weights between the trainer's old logprobs and
the rollout engine's logprobs (they differ when engine and trainer kernels differ).

Each variant is registered by name (``algo.pg_variant``); add one with::

    @register_policy_loss("my_loss")
    def my_loss(logprobs, old_logprobs, advantages, mask, *, clip_high: float = 0.28):
        ratio = torch.exp(logprobs - old_logprobs)
        loss = -ratio.clamp(max=1 + clip_high) * advantages.unsqueeze(-1)
        return loss, ratio_stats(ratio, ratio > 1 + clip_high, mask, logprobs, old_logprobs)

:func:`policy_loss` passes a loss only the options its signature names (``clip_low``,
``clip_high``, ``dual_clip``, ``behavior_logprobs``, ``behav_cap``), so one config serves every variant.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from rockroll.envs.registries import Registry
from rockroll.trainer.algos.masked import masked_mean

if TYPE_CHECKING:
    import torch

__all__ = [
    "POLICY_LOSSES",
    "register_policy_loss",
    "get_policy_loss",
    "policy_loss_names",
    "policy_loss",
    "ratio_stats",
    "ppo_clip_loss",
    "cispo_loss",
    "topr_loss",
    "gspo_loss",
    "decoupled_ppo_loss",
    "tis_weights",
    "value_loss",
]

#: ``fn(logprobs, old_logprobs, advantages, mask, **options) -> (loss [N, T], stats)``
PolicyLossFn = Callable[..., "tuple[torch.Tensor, dict[str, float]]"]
F = TypeVar("F", bound=PolicyLossFn)

#: every policy loss by name; ``algo.pg_variant`` must be one of its names
POLICY_LOSSES: Registry[PolicyLossFn] = Registry("policy loss", "pg_variant")


def register_policy_loss(name: str, *, override: bool = False) -> Callable[[F], F]:
    """Decorator: register a policy loss as ``algo.pg_variant: name`` (the function is returned unchanged).

    The loss takes ``(logprobs, old_logprobs, advantages, mask)`` plus the keyword options it
    wants among ``clip_low``, ``clip_high`` and ``dual_clip``, and returns ``(loss [N, T], stats)``
    where stats has ``clipfrac``, ``ratio_mean`` and ``approx_kl`` (:func:`ratio_stats`). A taken
    name raises ``ValueError`` unless ``override=True``.
    """

    def add(fn: F) -> F:
        POLICY_LOSSES.add(name, fn, override=override)
        return fn

    return add


def get_policy_loss(name: str) -> PolicyLossFn:
    """The loss registered as ``name``; else ``UnknownNameError`` (a ``ValueError``) naming close ones."""
    return POLICY_LOSSES.get(name)


def policy_loss_names() -> tuple[str, ...]:
    """Every registered loss name, in registration order (the allowed ``algo.pg_variant`` values)."""
    return POLICY_LOSSES.names()


@functools.cache
def _options(fn: PolicyLossFn) -> frozenset[str] | None:
    """Keyword options ``fn`` accepts (None: any, it takes ``**kwargs``)."""
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params[4:] if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def _expand(adv: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return adv.unsqueeze(-1).expand_as(like) if adv.dim() == 1 else adv


def ratio_stats(
    ratio: torch.Tensor, clipped: torch.Tensor, mask: torch.Tensor, logprobs: torch.Tensor, old: torch.Tensor
) -> dict[str, float]:
    """The stats every policy loss reports: ``clipfrac``, ``ratio_mean`` and ``approx_kl`` over the mask."""
    m = mask.float()
    return {
        "clipfrac": float(masked_mean(clipped.float(), m)),
        "ratio_mean": float(masked_mean(ratio.detach(), m)),
        "approx_kl": float(masked_mean(0.5 * (logprobs.detach() - old) ** 2, m)),
    }


@register_policy_loss("ppo")
def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate ``max(-A r, -A clip(r, 1-clip_low, 1+clip_high))``, dual-clipped for A < 0."""
    import torch

    adv = _expand(advantages, logprobs)
    ratio = torch.exp(logprobs - old_logprobs)
    l1 = -adv * ratio
    l2 = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(l1, l2)
    clipped = l2 > l1
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1 (typical 3.0) or None, got {dual_clip}")
        capped = torch.minimum(loss, -adv * dual_clip)
        loss = torch.where(adv < 0, capped, loss)
    return loss, ratio_stats(ratio, clipped, mask, logprobs, old_logprobs)


@register_policy_loss("cispo")
def cispo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 1.0,
    clip_high: float = 0.28,
) -> tuple[torch.Tensor, dict[str, float]]:
    """CISPO: ``-sg(clip(r, 1-clip_low, 1+clip_high)) * A * logp`` (every token keeps a gradient)."""
    import torch

    adv = _expand(advantages, logprobs)
    ratio = torch.exp(logprobs - old_logprobs)
    weight = ratio.detach().clamp(max(0.0, 1.0 - clip_low), 1.0 + clip_high)
    loss = -weight * adv * logprobs
    clipped = weight != ratio.detach()
    return loss, ratio_stats(ratio, clipped, mask, logprobs, old_logprobs)


@register_policy_loss("topr")
def topr_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, float]]:
    """TOPR: ``-A logp`` where A >= 0; ``-sg(clip(r, 0, 1)) A logp`` where A < 0."""
    import torch

    adv = _expand(advantages, logprobs)
    ratio = torch.exp(logprobs - old_logprobs)
    neg_weight = ratio.detach().clamp(0.0, 1.0)
    weight = torch.where(adv >= 0, torch.ones_like(ratio), neg_weight)
    loss = -weight * adv * logprobs
    clipped = (adv < 0) & (ratio.detach() > 1.0)
    return loss, ratio_stats(ratio, clipped, mask, logprobs, old_logprobs)


@register_policy_loss("gspo")
def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO: per-sequence ratio ``s = exp(mean_t(logp - old))``; token ratio ``sg(s) * exp(logp - sg(logp))``.

    The clipped surrogate uses the sequence advantage (the advantage of each row's first response
    token when ``advantages`` is [N, T]); aggregate with ``seq-mean-token-mean``.
    """
    import torch

    m = mask.float()
    if advantages.dim() == 2:
        first = m.argmax(dim=1)
        adv_seq = advantages.gather(1, first.unsqueeze(1)).squeeze(1)
    else:
        adv_seq = advantages
    log_s = ((logprobs - old_logprobs) * m).sum(1) / m.sum(1).clamp(min=1.0)
    s_tok = torch.exp(log_s.detach()).unsqueeze(1) * torch.exp(logprobs - logprobs.detach())
    adv = adv_seq.unsqueeze(1).expand_as(logprobs)
    l1 = -adv * s_tok
    l2 = -adv * s_tok.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(l1, l2)
    clipped = l2 > l1
    ratio = torch.exp(log_s).unsqueeze(1).expand_as(logprobs)
    return loss, ratio_stats(ratio, clipped, mask, logprobs, old_logprobs)


@register_policy_loss("decoupled_ppo")
def decoupled_ppo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    behavior_logprobs: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    behav_cap: float = 5.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Decoupled PPO: ``-sg(min(pi_prox/pi_behav, behav_cap)) * min(r A, clip(r, 1-clip_low, 1+clip_high) A)``.

    ``r = pi / pi_prox`` with ``old_logprobs`` as the proximal policy; ``behavior_logprobs`` are
    the logprobs of the policy that generated the tokens (None: the proximal policy generated
    them, and the loss is PPO's clipped surrogate without the dual clip). ``stats`` adds
    ``behav_weight_mean`` and ``behav_capped`` (fraction of tokens whose weight hit the cap).
    """
    import torch

    if behav_cap <= 0:
        raise ValueError(f"behav_cap must be > 0 (typical 5.0), got {behav_cap}")
    adv = _expand(advantages, logprobs)
    ratio = torch.exp(logprobs - old_logprobs)
    l1 = -adv * ratio
    l2 = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    surrogate = torch.maximum(l1, l2)
    if behavior_logprobs is None:
        weight = torch.ones_like(ratio)
    else:
        weight = torch.exp(old_logprobs - behavior_logprobs).clamp(max=behav_cap).detach()
    stats = ratio_stats(ratio, l2 > l1, mask, logprobs, old_logprobs)
    m = mask.float()
    stats["behav_weight_mean"] = float(masked_mean(weight, m))
    stats["behav_capped"] = float(masked_mean((weight >= behav_cap).float(), m))
    return weight * surrogate, stats


def policy_loss(
    variant: str,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    **options: Any,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The registered loss ``variant`` (see :func:`policy_loss_names`) on these tensors.

    ``options`` (``clip_low``, ``clip_high``, ``dual_clip``...) reach the loss only where its
    signature names them.
    """
    fn = get_policy_loss(variant)
    accepted = _options(fn)
    kwargs = options if accepted is None else {k: v for k, v in options.items() if k in accepted}
    return fn(logprobs, old_logprobs, advantages, mask, **kwargs)


def tis_weights(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, cap: float = 2.0) -> torch.Tensor:
    """Truncated importance sampling: ``min(exp(old - rollout), cap)``, detached; multiply the token loss by it."""
    import torch

    return torch.exp(old_logprobs - rollout_logprobs).clamp(max=cap).detach()


def value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, *, clip: float | None = 0.2
) -> torch.Tensor:
    """Clipped value loss ``0.5 * max((v - R)^2, (old + clip(v - old, -c, c) - R)^2)`` per token."""
    import torch

    unclipped = (values - returns) ** 2
    if clip is None:
        return 0.5 * unclipped
    v_clip = old_values + (values - old_values).clamp(-clip, clip)
    return 0.5 * torch.maximum(unclipped, (v_clip - returns) ** 2)
