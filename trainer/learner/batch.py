"""Collate :class:`rockroll.agentrl.trajectory.TrainSample` rows into padded tensors, and compute token logprobs.

Alignment: every per-token tensor is aligned to ``input_ids``: ``logprobs[:, t]`` is
``log p(input_ids[:, t] | input_ids[:, :t])`` (0 at ``t = 0``), which is how ``TrainSample``
stores ``old_logprobs``. Rows are right-padded; ``response_mask`` is 0 on padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rockroll.agentrl.engines.choices import mask_logits
from rockroll.agentrl.trajectory import TrainSample
from rockroll.trainer.learner.shared_prefix import shared_hidden

if TYPE_CHECKING:
    import torch

__all__ = ["Batch", "collate", "token_logprobs", "token_values", "module_device"]


def module_device(module: Any) -> torch.device:
    """The device of ``module``'s first parameter (cpu for a module without parameters)."""
    import torch

    for p in module.parameters():
        return p.device
    return torch.device("cpu")


@dataclass
class Batch:
    """Padded tensors of one training batch plus the per-row ids."""

    input_ids: torch.Tensor  # [N, L] long
    attention_mask: torch.Tensor  # [N, L] long
    response_mask: torch.Tensor  # [N, L] float
    rollout_logprobs: torch.Tensor  # [N, L] float, from the engine
    rewards: torch.Tensor  # [N] float
    group_ids: list[str]
    episode_ids: list[str]
    weight_versions: list[int]
    extras: dict[str, Any] = field(default_factory=dict)  # old_logprobs, ref_logprobs, advantages, ...

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def to(self, device: Any) -> Batch:
        """This batch with its tensors (tensor extras too) on ``device``; itself when they are already there.

        Batches are collated on the CPU; a trainer moves each (micro-)batch to its model's device
        before a forward and brings what leaves it (logprobs, values) back with ``.cpu()``.
        """
        import torch

        if self.input_ids.device == torch.device(device):
            return self
        extras = {k: (v.to(device) if hasattr(v, "to") and hasattr(v, "shape") else v) for k, v in self.extras.items()}
        return Batch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.response_mask.to(device),
            self.rollout_logprobs.to(device),
            self.rewards.to(device),
            self.group_ids,
            self.episode_ids,
            self.weight_versions,
            extras,
        )

    def select(self, rows: Sequence[int]) -> Batch:
        """A new batch with only ``rows`` (tensor extras are sliced along dim 0)."""
        import torch

        idx = torch.as_tensor(list(rows), dtype=torch.long)
        extras = {
            k: (v[idx] if hasattr(v, "shape") and v.shape[:1] == self.rewards.shape[:1] else v)
            for k, v in self.extras.items()
        }
        return Batch(
            self.input_ids[idx],
            self.attention_mask[idx],
            self.response_mask[idx],
            self.rollout_logprobs[idx],
            self.rewards[idx],
            [self.group_ids[i] for i in rows],
            [self.episode_ids[i] for i in rows],
            [self.weight_versions[i] for i in rows],
            extras,
        )

    @property
    def response_lengths(self) -> torch.Tensor:
        return self.response_mask.sum(1)


def collate(samples: Sequence[TrainSample], pad_id: int = 0) -> Batch:
    """Right-pad ``samples`` into a :class:`Batch`."""
    import torch

    if not samples:
        raise ValueError("cannot collate an empty list of samples")
    n, length = len(samples), max(len(s.input_ids) for s in samples)
    ids = torch.full((n, length), pad_id, dtype=torch.long)
    attn = torch.zeros((n, length), dtype=torch.long)
    resp = torch.zeros((n, length), dtype=torch.float32)
    lps = torch.zeros((n, length), dtype=torch.float32)
    for i, s in enumerate(samples):
        k = len(s.input_ids)
        if not (len(s.response_mask) == len(s.old_logprobs) == k):
            raise ValueError(f"sample {s.episode_id}: input_ids, response_mask and old_logprobs differ in length")
        ids[i, :k] = torch.tensor(s.input_ids, dtype=torch.long)
        attn[i, :k] = 1
        resp[i, :k] = torch.tensor(s.response_mask, dtype=torch.float32)
        lps[i, :k] = torch.tensor(s.old_logprobs, dtype=torch.float32)
    resp[:, 0] = 0.0  # the first token has no prediction
    batch = Batch(
        ids,
        attn,
        resp,
        lps,
        torch.tensor([float(s.reward) for s in samples]),
        [s.group_id for s in samples],
        [s.episode_id for s in samples],
        [s.weight_version for s in samples],
    )
    if any(s.allowed is not None for s in samples):
        batch.extras["allowed"] = _allowed(samples, length)
    return batch


def _allowed(samples: Sequence[TrainSample], length: int) -> torch.Tensor:
    """``[N, L, K]`` ids each token was chosen among (-1-padded; all -1: unrestricted), aligned to ``input_ids``."""
    import torch

    width = max((len(a) for s in samples for a in s.allowed or ()), default=0) or 1
    out = torch.full((len(samples), length, width), -1, dtype=torch.long)
    for i, s in enumerate(samples):
        for t, ids in enumerate(s.allowed or ()):
            if ids:
                out[i, t, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def _trim(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """Length of the longest row (right padding beyond it is dropped for the forward)."""
    return int(attention_mask.sum(1).max())


# Decoder-only models whose logits are exactly ``lm_head(final hidden state)`` (no soft-capping, no
# logit scale): for them the head runs only where a logprob is needed.
_PLAIN_HEAD_TYPES = frozenset({"qwen2", "qwen3", "llama", "mistral"})


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    with_entropy: bool = False,
    need: torch.Tensor | None = None,
    share_prefix: bool = True,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token-aligned logprobs (and entropies) of ``input_ids`` under ``model`` (grad follows the caller's mode).

    ``need`` (a 0/1 mask shaped like ``input_ids``) names the tokens whose logprob is used: for a
    plain-head decoder the vocabulary projection then runs only at those positions (for short
    answers after long prompts that is most of the work); elsewhere the result is 0. Without it
    every position is computed. With ``need`` and ``share_prefix`` the tokens before each row's
    first needed position are computed once per distinct prefix
    (:func:`rockroll.trainer.learner.shared_prefix.shared_hidden`) when that saves enough. ``allowed`` (``[N, L, K]``,
    the batch's ``extras["allowed"]``): each token's logprob and entropy are those of the distribution
    renormalised over the ids it was chosen among, as the engine sampled it
    (:func:`rockroll.agentrl.engines.choices.mask_logits`; -inf for a token outside them).
    """
    import torch

    from rockroll.trainer.algos.kl import entropy_from_logits

    n, full = input_ids.shape
    length = _trim(input_ids, attention_mask)
    ids, attn = input_ids[:, :length], attention_mask[:, :length]
    out = torch.zeros((n, full), dtype=torch.float32, device=input_ids.device)
    ent = torch.zeros((n, full), dtype=torch.float32, device=input_ids.device) if with_entropy else None
    if need is not None and getattr(model.config, "model_type", None) in _PLAIN_HEAD_TYPES:
        rows, cols = need[:, 1:length].nonzero(as_tuple=True)  # token cols+1 is predicted at position cols
        picked = shared_hidden(model.get_decoder(), ids, attn, rows, cols) if share_prefix else None
        if picked is None:
            hidden = model.get_decoder()(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
            picked = hidden[rows, cols]
        logits = model.get_output_embeddings()(picked).float()
        if allowed is not None:
            logits = mask_logits(logits, allowed[rows, cols + 1])
        logp = torch.log_softmax(logits, dim=-1)
        out = out.index_put((rows, cols + 1), logp.gather(-1, ids[rows, cols + 1].unsqueeze(-1)).squeeze(-1))
        if ent is not None:
            ent = ent.index_put((rows, cols + 1), entropy_from_logits(logits))
        return out, ent
    logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits.float()
    if allowed is not None:
        logits = torch.cat([mask_logits(logits[:, :-1], allowed[:, 1:length]), logits[:, -1:]], dim=1)
    logp_all = torch.log_softmax(logits[:, :-1], dim=-1)
    out[:, 1:length] = logp_all.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    if ent is not None:
        ent[:, 1:length] = entropy_from_logits(logits[:, :-1])
    return out, ent


def token_values(
    critic: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    need: torch.Tensor | None = None,
    share_prefix: bool = True,
) -> torch.Tensor:
    """Token-aligned values: ``values[:, t]`` is the critic's value of the state before token ``t``.

    ``need`` as in :func:`token_logprobs`: with ``share_prefix``, for a critic with a decoder ``body``
    and a linear ``head`` (:func:`rockroll.trainer.learner.models.Critic`), values are computed at those
    tokens only (0 elsewhere), each distinct prefix once when that saves enough. Without
    ``share_prefix`` (ZeRO-3, whose ranks run the same passes) the critic's own forward runs.
    """
    import torch

    n, full = input_ids.shape
    length = _trim(input_ids, attention_mask)
    ids, attn = input_ids[:, :length], attention_mask[:, :length]
    if need is not None and share_prefix and hasattr(critic, "body") and hasattr(critic, "head"):
        rows, cols = need[:, 1:length].nonzero(as_tuple=True)  # the value before token cols+1 is read at cols
        picked = shared_hidden(critic.body, ids, attn, rows, cols)
        if picked is None:
            picked = critic.body(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state[rows, cols]
        v = critic.head(picked.float()).squeeze(-1).float()
        out = torch.zeros((n, full), dtype=torch.float32, device=input_ids.device)
        return out.index_put((rows, cols + 1), v)
    v = critic(ids, attn)  # [N, length]
    out = torch.zeros((n, full), dtype=torch.float32, device=v.device)
    out[:, 1:length] = v[:, :-1].float()
    return out
