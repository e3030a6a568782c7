"""The policy (and critic) update: PPO epochs over minibatches, gradient accumulation, clipping.

:class:`PolicyTrainer` owns the model, AdamW, the LR schedule and, for PPO with GAE, the critic.
It is the same object in-process and inside a Ray worker. Data parallel: every worker receives
the *whole* batch, takes rows ``rank::world`` of each minibatch, divides its loss by the global
denominator of that minibatch and the gradients are summed with ``all_reduce``; hence N workers
compute exactly the single-worker update (up to float summation order).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rockroll.trainer.learner.tag_steps import load_tag_state, tag_minibatch, tag_state

if TYPE_CHECKING:
    import torch

    from rockroll.trainer.config import AlgoConfig, OptimConfig, TrainConfig
    from rockroll.trainer.learner.batch import Batch

__all__ = ["PolicyTrainer", "behaviour_logprobs", "logprob_gap", "make_scheduler", "single_pass", "total_updates"]


def total_updates(cfg: TrainConfig) -> int:
    """Optimizer steps of the whole run (for LR schedules)."""
    n = cfg.rollout.scheduler.group_size * cfg.rollout.scheduler.num_env_groups
    mb = cfg.optim.mini_batch_size or n
    return cfg.total_steps * cfg.optim.ppo_epochs * max(1, -(-n // mb))


def single_pass(cfg: TrainConfig, rows: int) -> bool:
    """Whether the update's first optimizer step covers all ``rows`` rows of the batch.

    Then the logprobs before the step (PPO's ``old_logprobs``) are those of the first pass's own
    forward, detached: a separate no-grad pass over the batch would compute the same numbers, so
    the update records them in its first epoch and later epochs reuse them.
    """
    mb = cfg.optim.mini_batch_size
    return (mb == 0 or mb >= rows) and not cfg.algo.tis_cap


def behaviour_logprobs(engine: torch.Tensor, trainer: torch.Tensor) -> torch.Tensor:
    """The behaviour policy's logprobs for the off-policy corrections (``algo.tis_cap``, ``decoupled_ppo``):
    the engine's, as it sampled the tokens; where the engine gave none (NaN, see
    :class:`~rockroll.agentrl.engines.GenerationResult`) the trainer's, so that token gets weight 1."""
    import torch

    return torch.where(torch.isnan(engine), trainer, engine)


def logprob_gap(trainer: torch.Tensor, engine: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """``actor/logprob_gap_mean`` and ``_max``: ``|engine logprob - trainer logprob|`` over the sampled tokens
    (``mask > 0``) whose engine logprob is known, both under the weights that generated them."""
    import torch

    keep = (mask > 0) & torch.isfinite(engine)
    if not bool(keep.any()):
        return {}
    gap = (engine - trainer).abs()[keep]
    return {"actor/logprob_gap_mean": float(gap.mean()), "actor/logprob_gap_max": float(gap.max())}


def make_scheduler(opt: Any, schedule: str, warmup: int, total: int) -> Any:
    """LambdaLR: linear warmup over ``warmup`` steps, then constant, linear or cosine decay to 0 at ``total``."""
    import torch

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if schedule == "constant" or total <= warmup:
            return 1.0
        frac = min(1.0, (step - warmup) / max(1, total - warmup))
        return 1.0 - frac if schedule == "linear" else 0.5 * (1 + math.cos(math.pi * frac))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


class PolicyTrainer:
    """Update a policy (and optional critic) on prepared batches (see the module docstring)."""

    #: compute prefixes shared by rows once (:mod:`rockroll.trainer.learner.shared_prefix`); a strategy whose
    #: ranks must run the same forward passes (ZeRO-3 gathers parameters in each) turns it off
    share_prefix = True

    def __init__(
        self,
        model: Any,
        algo: AlgoConfig,
        optim: OptimConfig,
        *,
        total_updates: int,
        critic: Any = None,
        rank: int = 0,
        world: int = 1,
        seed: int = 0,
    ) -> None:
        import torch

        self.model, self.critic, self.algo, self.optim = model, critic, algo, optim
        self.rank, self.world, self.seed = rank, world, seed
        self.total_updates = total_updates
        self.opt, self.sched = self.new_optimizer()
        self.tag_opts: dict[int, tuple[Any, Any]] = {}  # tag id -> its optimizer and schedule (optim.tag_steps)
        self.critic_opt = self.critic_sched = None
        if critic is not None:
            self.critic_opt = torch.optim.AdamW(critic.parameters(), lr=optim.critic_lr, betas=tuple(optim.betas))
            self.critic_sched = make_scheduler(self.critic_opt, optim.schedule, optim.warmup_steps, total_updates)

    def new_optimizer(self) -> tuple[Any, Any]:
        """A fresh AdamW over the policy's trainable parameters with the run's settings, and its schedule."""
        import torch

        o = self.optim
        params = [p for p in self.model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay)
        return opt, make_scheduler(opt, o.schedule, o.warmup_steps, self.total_updates)

    # ------------------------------------------------------------------ forward passes
    def compute_logprobs(self, batch: Batch, model: Any = None) -> torch.Tensor:
        """Token-aligned logprobs of the batch under ``model`` (default the policy), no grad, in micro-batches."""
        import torch

        from rockroll.trainer.learner.batch import module_device, token_logprobs

        m = model if model is not None else self.model
        out = []
        with torch.no_grad():
            for start in range(0, len(batch), self.optim.micro_batch_size):
                rows = list(range(start, min(len(batch), start + self.optim.micro_batch_size)))
                mb = batch.select(rows).to(module_device(m))
                lp, _ = token_logprobs(
                    m, mb.input_ids, mb.attention_mask, need=mb.response_mask, share_prefix=self.share_prefix,
                    allowed=mb.extras.get("allowed"),
                )  # fmt: skip
                out.append(lp.cpu())
        return torch.cat(out, 0)

    def compute_values(self, batch: Batch) -> torch.Tensor:
        """Token-aligned critic values, no grad."""
        import torch

        from rockroll.trainer.learner.batch import module_device, token_values

        out = []
        with torch.no_grad():
            for start in range(0, len(batch), self.optim.micro_batch_size):
                mb = batch.select(list(range(start, min(len(batch), start + self.optim.micro_batch_size))))
                mb = mb.to(module_device(self.critic))
                out.append(
                    token_values(
                        self.critic, mb.input_ids, mb.attention_mask, need=mb.response_mask,
                        share_prefix=self.share_prefix,
                    ).cpu()
                )  # fmt: skip
        return torch.cat(out, 0)

    # ------------------------------------------------------------------ update
    def update(self, batch: Batch, step: int) -> dict[str, float]:
        """PPO epochs over shuffled minibatches of ``batch`` (needs extras ``advantages``, ``loss_mask``).

        Extra ``old_logprobs`` is the policy's before this step. Without it the first minibatch must
        be the whole batch (:func:`single_pass`): the first epoch's logprobs, detached, are recorded
        as ``old_logprobs`` for the later epochs.
        """
        import dataclasses

        import torch

        n = len(batch)
        mb_size = self.optim.mini_batch_size or n
        record = None
        if batch.extras.get("old_logprobs") is None:
            if mb_size < n:
                raise ValueError("update without old_logprobs needs minibatches of the whole batch (see single_pass)")
            batch = dataclasses.replace(batch, extras=dict(batch.extras))
            record = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=batch.input_ids.device)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        sums: dict[str, float] = {}
        updates = 0
        self.model.train()
        for epoch in range(self.optim.ppo_epochs):
            order = torch.randperm(n, generator=gen).tolist() if mb_size < n else list(range(n))
            if epoch == 1 and record is not None:
                batch.extras["old_logprobs"] = record
            for start in range(0, n, mb_size):
                rows = order[start : start + mb_size]
                stats = self._minibatch(batch, rows, record if epoch == 0 else None)
                if stats is None:
                    continue
                updates += 1
                for k, v in stats.items():
                    sums[k] = sums.get(k, 0.0) + v
        metrics = {k: v / max(updates, 1) for k, v in sums.items()}
        metrics.update(self._gap(batch, record))
        metrics["actor/lr"] = float(self.sched.get_last_lr()[0])
        metrics["actor/updates"] = float(updates)
        return metrics

    def _gap(self, batch: Batch, record: torch.Tensor | None) -> dict[str, float]:
        """The trainer-engine logprob gap of the batch before this update (the recorded first pass, gathered
        from every rank, or the given ``old_logprobs``)."""
        old = batch.extras.get("old_logprobs") if record is None else record
        if old is None:
            return {}
        if record is not None and self.world > 1:  # each rank recorded its own rows, zeros elsewhere
            import torch.distributed as dist

            from rockroll.trainer.learner.batch import module_device

            old = record.to(module_device(self.model))
            dist.all_reduce(old)
            old = old.cpu()
        return logprob_gap(old.cpu(), batch.rollout_logprobs.cpu(), batch.extras["loss_mask"].cpu())

    def _minibatch(self, batch: Batch, rows: list[int], record: torch.Tensor | None = None) -> dict[str, float] | None:
        if self.optim.tag_steps and "tag_ids" in batch.extras:
            return tag_minibatch(self, batch, rows, record)
        return self._minibatch_with(batch, rows, record, self.opt, self.sched)

    def _minibatch_with(
        self, batch: Batch, rows: list[int], record: torch.Tensor | None, opt: Any, sched: Any
    ) -> dict[str, float] | None:
        """One optimizer step (``opt``, ``sched``) on ``rows``: their loss, in micro-batches; None without tokens."""
        import torch

        from rockroll.trainer.algos.aggregate import agg_denominator
        from rockroll.trainer.learner.batch import module_device

        device = module_device(self.model)
        mask_all = batch.select(rows).extras["loss_mask"]
        denom = agg_denominator(mask_all, self.algo.loss_agg_mode)
        if denom == 0:
            return None
        tok_denom = float(mask_all.sum())
        micro = self._micro_rows(rows)
        self._zero_grad()
        acc = torch.zeros(
            8, dtype=torch.float64
        )  # pg, kl, entropy, clipfrac*tok, approx_kl*tok, vloss, ratio*tok, tokens
        for i, idx in enumerate(micro):
            last = i == len(micro) - 1
            mb = batch.select(idx or rows[:1]).to(device)  # empty: a zero-weight pad so every rank runs the same passes
            mask = mb.extras["loss_mask"] if idx else mb.extras["loss_mask"] * 0
            self._actor_micro(mb, idx, mask, denom, record, acc, last)
            if self.critic_opt is not None:
                self._critic_micro(mb, mask, tok_denom, acc, last)
        grad_norm = self._step(self.model, opt, sched)
        out = {"actor/grad_norm": grad_norm}
        if self.critic_opt is not None:
            out["critic/grad_norm"] = self._step(self.critic, self.critic_opt, self.critic_sched)
        out.update(self._minibatch_stats(acc, device))
        return out

    def _actor_micro(
        self, mb: Batch, idx: list[int], mask: torch.Tensor, denom: float, record: torch.Tensor | None,
        acc: torch.Tensor, last: bool,
    ) -> None:  # fmt: skip
        """Policy loss (+ KL, entropy) of one micro-batch: backward, and its stats added into ``acc``."""
        import torch

        from rockroll.trainer.algos import aggregate_loss, kl_estimate, policy_loss, tis_weights
        from rockroll.trainer.learner.batch import token_logprobs

        a = self.algo
        ntok = float(mask.sum())
        lp, ent = token_logprobs(
            self._module("actor"), mb.input_ids, mb.attention_mask, with_entropy=True, need=mb.response_mask,
            share_prefix=self.share_prefix, allowed=mb.extras.get("allowed"),
        )  # fmt: skip
        old = None if record is not None else mb.extras.get("old_logprobs")
        if old is None:  # the first pass over the whole batch (see single_pass): the policy before it is lp itself
            old = lp.detach()
            if idx and record is not None:
                record[torch.as_tensor(idx)] = old.to(record.device)
        behav = behaviour_logprobs(mb.rollout_logprobs, old)  # the engine's: the policy that sampled
        loss_tok, st = policy_loss(
            a.pg_variant, lp, old, mb.extras["advantages"], mask,
            clip_low=a.clip_low, clip_high=a.clip_high, dual_clip=a.dual_clip or None,
            behavior_logprobs=behav, behav_cap=a.behav_cap,
        )  # fmt: skip
        if a.tis_cap:
            loss_tok = loss_tok * tis_weights(old, behav, a.tis_cap)
        pg = aggregate_loss(loss_tok, mask, a.loss_agg_mode, denom)
        loss = pg
        if a.kl_coef and a.use_kl_loss:
            kl = aggregate_loss(
                kl_estimate(lp, mb.extras["ref_logprobs"], a.kl_estimator), mask, a.loss_agg_mode, denom
            )
            loss = loss + a.kl_coef * kl
            acc[1] += kl.item()
        if ent is not None:  # always logged (entropy collapse is the failure to watch); a loss term when asked
            e = aggregate_loss(ent if a.entropy_coef > 0 else ent.detach(), mask, a.loss_agg_mode, denom)
            if a.entropy_coef > 0:
                loss = loss - a.entropy_coef * e
            acc[2] += e.item()
        self._backward(loss, "actor", last)
        acc[0] += pg.item()
        acc[3] += st["clipfrac"] * ntok
        acc[4] += st["approx_kl"] * ntok
        acc[6] += st["ratio_mean"] * ntok
        acc[7] += ntok

    def _critic_micro(self, mb: Batch, mask: torch.Tensor, tok_denom: float, acc: torch.Tensor, last: bool) -> None:
        """Value loss of one micro-batch: backward, and its value added into ``acc``."""
        from rockroll.trainer.algos import aggregate_loss, value_loss
        from rockroll.trainer.learner.batch import token_values

        a = self.algo
        v = token_values(
            self._module("critic"), mb.input_ids, mb.attention_mask, need=mb.response_mask,
            share_prefix=self.share_prefix,
        )  # fmt: skip
        clip = a.value_clip or None
        vl = value_loss(v, mb.extras["values"], mb.extras["returns"], clip=clip)
        vl = aggregate_loss(vl, mask, "token-mean", tok_denom)
        self._backward(a.critic_coef * vl, "critic", last)
        acc[5] += vl.item()

    def _minibatch_stats(self, acc: torch.Tensor, device: Any) -> dict[str, float]:
        """The minibatch's loss metrics from the accumulated sums ``acc`` (summed over ranks)."""
        if self.world > 1:
            import torch.distributed as dist

            acc = acc.to(device)  # nccl reduces device tensors only
            dist.all_reduce(acc)
            acc = acc.cpu()
        tokens = max(float(acc[7]), 1.0)
        out = {
            "actor/pg_loss": float(acc[0]),
            "actor/kl_loss": float(acc[1]),
            "actor/entropy": float(acc[2]),
            "actor/clipfrac": float(acc[3]) / tokens,
            "actor/approx_kl": float(acc[4]) / tokens,
            "actor/ratio_mean": float(acc[6]) / tokens,
        }
        if self.critic_opt is not None:
            out["critic/value_loss"] = float(acc[5])
        return out

    # ------------------------------------------------------------------ strategy hooks (see trainer.strategies)
    def _micro_rows(self, rows: list[int]) -> list[list[int]]:
        """This rank's rows of a minibatch (``rows[rank::world]``) cut into micro-batches."""
        local, m = rows[self.rank :: self.world], self.optim.micro_batch_size
        return [local[s : s + m] for s in range(0, len(local), m)]

    def _module(self, role: str) -> Any:
        """What the training forward of ``role`` (actor or critic) calls."""
        return self.model if role == "actor" else self.critic

    def _zero_grad(self) -> None:
        """Clear actor (and critic) gradients before a minibatch."""
        self.opt.zero_grad(set_to_none=True)
        if self.critic_opt is not None:
            self.critic_opt.zero_grad(set_to_none=True)

    def _backward(self, loss: torch.Tensor, role: str, last: bool) -> None:
        """Accumulate gradients of ``loss`` (``role`` actor or critic; ``last``: last micro-batch of the minibatch)."""
        loss.backward()

    def _step(self, module: Any, opt: Any, sched: Any) -> float:
        """All-reduce (sum) gradients across workers, clip, step optimizer and schedule; return the grad norm."""
        import torch

        params = [p for p in module.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if self.world > 1:
            import torch.distributed as dist

            flat = torch.cat([p.grad.reshape(-1) for p in params])
            dist.all_reduce(flat)
            offset = 0
            for p in params:
                k = p.numel()
                p.grad.copy_(flat[offset : offset + k].view_as(p))
                offset += k
        max_norm = self.optim.grad_clip if self.optim.grad_clip > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        opt.step()
        sched.step()
        return float(norm)

    # ------------------------------------------------------------------ state
    def policy_weights(self, cpu: bool = True) -> dict[str, Any]:
        """Full policy weights, copied (on CPU unless ``cpu=False``): what the rollout engine loads."""
        return {k: (v.detach().cpu() if cpu else v.detach()).clone() for k, v in self.model.state_dict().items()}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume the update exactly (weights, optimizers, schedules)."""
        s: dict[str, Any] = {
            "model": self.model.state_dict(),
            "opt": self.opt.state_dict(),
            "sched": self.sched.state_dict(),
        }
        if self.tag_opts:
            s["tag_opts"] = tag_state(self)
        if self.critic is not None:
            s.update(
                critic=self.critic.state_dict(),
                critic_opt=self.critic_opt.state_dict(),
                critic_sched=self.critic_sched.state_dict(),
            )
        return s

    def load_state_dict(self, s: dict[str, Any]) -> None:
        self.model.load_state_dict(s["model"])
        self.opt.load_state_dict(s["opt"])
        self.sched.load_state_dict(s["sched"])
        load_tag_state(self, s.get("tag_opts", {}))
        if self.critic is not None and "critic" in s:
            self.critic.load_state_dict(s["critic"])
            self.critic_opt.load_state_dict(s["critic_opt"])
            self.critic_sched.load_state_dict(s["critic_sched"])
