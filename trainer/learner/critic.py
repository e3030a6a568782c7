"""The critic update on its own (for a critic placed ``apart``, in its own Ray actor).

:class:`CriticTrainer` walks the batch exactly as :meth:`rockroll.trainer.learner.actor.PolicyTrainer.update`
does (same seeded minibatch order, same skipped minibatches, same micro-batches and value loss),
so a separate critic makes the same update as the critic colocated with the actor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from rockroll.trainer.config import AlgoConfig, OptimConfig
    from rockroll.trainer.learner.batch import Batch

__all__ = ["CriticTrainer"]


class CriticTrainer:
    """Values and the value-loss update of a critic, with its own AdamW and LR schedule."""

    def __init__(self, critic: Any, algo: AlgoConfig, optim: OptimConfig, *, total_updates: int, seed: int = 0) -> None:
        import torch

        from rockroll.trainer.learner.actor import make_scheduler

        self.critic, self.algo, self.optim, self.seed = critic, algo, optim, seed
        self.opt = torch.optim.AdamW(critic.parameters(), lr=optim.critic_lr, betas=tuple(optim.betas))
        self.sched = make_scheduler(self.opt, optim.schedule, optim.warmup_steps, total_updates)

    def values(self, batch: Batch) -> torch.Tensor:
        """Token-aligned values, no grad, in micro-batches."""
        import torch

        from rockroll.trainer.learner.batch import module_device, token_values

        out, m = [], self.optim.micro_batch_size
        with torch.no_grad():
            for s in range(0, len(batch), m):
                mb = batch.select(list(range(s, min(len(batch), s + m)))).to(module_device(self.critic))
                out.append(token_values(self.critic, mb.input_ids, mb.attention_mask, need=mb.response_mask).cpu())
        return torch.cat(out, 0)

    def update(self, batch: Batch, step: int) -> dict[str, float]:
        """Value-loss epochs over the same minibatches the policy update uses (needs ``values``, ``returns``)."""
        import torch

        from rockroll.trainer.algos import aggregate_loss, value_loss
        from rockroll.trainer.algos.aggregate import agg_denominator
        from rockroll.trainer.learner.batch import module_device, token_values

        a, n = self.algo, len(batch)
        mb_size = self.optim.mini_batch_size or n
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)  # as PolicyTrainer.update
        loss_sum = norm_sum = 0.0
        updates = 0
        self.critic.train()
        for _ in range(self.optim.ppo_epochs):
            order = torch.randperm(n, generator=gen).tolist() if mb_size < n else list(range(n))
            for start in range(0, n, mb_size):
                rows = order[start : start + mb_size]
                mask_all = batch.select(rows).extras["loss_mask"]
                if agg_denominator(mask_all, a.loss_agg_mode) == 0:
                    continue
                tok_denom = float(mask_all.sum())
                self.opt.zero_grad(set_to_none=True)
                for s in range(0, len(rows), self.optim.micro_batch_size):
                    mb = batch.select(rows[s : s + self.optim.micro_batch_size]).to(module_device(self.critic))
                    v = token_values(self.critic, mb.input_ids, mb.attention_mask, need=mb.response_mask)
                    vl = value_loss(v, mb.extras["values"], mb.extras["returns"], clip=a.value_clip or None)
                    vl = aggregate_loss(vl, mb.extras["loss_mask"], "token-mean", tok_denom)
                    (a.critic_coef * vl).backward()
                    loss_sum += vl.item()
                params = [p for p in self.critic.parameters() if p.requires_grad]
                max_norm = self.optim.grad_clip if self.optim.grad_clip > 0 else float("inf")
                norm_sum += float(torch.nn.utils.clip_grad_norm_(params, max_norm))
                self.opt.step()
                self.sched.step()
                updates += 1
        k = max(updates, 1)
        return {"critic/value_loss": loss_sum / k, "critic/grad_norm": norm_sum / k}

    def state_dict(self) -> dict[str, Any]:
        """Critic weights, optimizer and schedule (the keys the colocated critic uses)."""
        return {
            "critic": self.critic.state_dict(),
            "critic_opt": self.opt.state_dict(),
            "critic_sched": self.sched.state_dict(),
        }

    def load_state_dict(self, s: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` (or a colocated critic's checkpoint) saved."""
        if "critic" in s:
            self.critic.load_state_dict(s["critic"])
            self.opt.load_state_dict(s["critic_opt"])
            self.sched.load_state_dict(s["critic_sched"])
