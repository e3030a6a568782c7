"""Supervised warm start on expert demonstrations (cross-entropy on response tokens only).

From random initialisation GRPO gets no reward signal on a tiny model (TRAINING-NOTES); a short
SFT phase on solver plans gives it a starting success rate that RL then improves. Demos come from
:meth:`rockroll.trainer.plan_rollout.PlanRollout.demo` on training seeds (held-out seeds are never used).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rockroll.agentrl.trajectory import TrainSample

__all__ = ["build_demos", "sft_train"]


def build_demos(rollout: Any, seeds: range | list[int]) -> list[Any]:
    """:class:`TrainSample` rows (response mask on the plan) for every seed the expert solves within the plan cap."""
    out = []
    for seed in seeds:
        demo = rollout.demo(seed)
        if demo is None:
            continue
        prompt, resp = demo
        out.append(
            TrainSample(
                prompt + resp,
                [0] * len(prompt) + [1] * len(resp),
                [0.0] * (len(prompt) + len(resp)),
                0.0,
                f"demo{seed}",
                f"demo{seed}",
                0,
            )
        )
    if not out:
        raise ValueError("no expert demonstration fits rollout.max_actions; raise it")
    return out


def sft_train(
    model: Any,
    demos: list[Any],
    *,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int = 0,
    pad_id: int = 0,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, float]:
    """Train ``model`` for ``steps`` AdamW steps on random minibatches of ``demos``; return final metrics."""
    import torch

    from rockroll.trainer.batch import collate, token_logprobs

    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    t0 = time.perf_counter()
    tokens = 0
    metrics: dict[str, float] = {}
    for step in range(steps):
        rows = torch.randint(len(demos), (batch_size,), generator=gen).tolist()
        batch = collate([demos[i] for i in rows], pad_id)
        lp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
        mask = batch.response_mask
        loss = -(lp * mask).sum() / mask.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int(batch.attention_mask.sum())
        metrics = {"sft/loss": loss.item(), "sft/tokens_per_s": tokens / max(time.perf_counter() - t0, 1e-9)}
        if on_step is not None:
            on_step(step, metrics)
    metrics["sft/time"] = time.perf_counter() - t0
    return metrics
