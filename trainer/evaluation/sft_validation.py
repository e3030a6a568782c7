"""Validation during the warm start (``sft.eval_every``), and the rule that can end it (``sft.stop_success``).

Each validation syncs the SFT weights to the rollout engine and plays greedy episodes on the validation seeds
(``rollout.select_episodes``: apart from the demos' and the held-out evaluation's). A tiny model's imitation of
a tool env takes off suddenly, at a step that depends on the seed (Lookup-v0: 3% after 800 steps, 34% after
1,000, 99% after 1,200 on one seed; 7% after 1,000 on the next), so a fixed step count leaves seeds' warm
starts far apart; a stop at a validation success keeps them closer (bench/REPORT.md: 26% to 50.5% held-out over
3 seeds, a validation every 25 steps, one of which jumped from 0% to 42%).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rockroll.trainer.evaluation.selection import select_seeds
from rockroll.trainer.rollout.multiturn import mean_success

__all__ = ["sft_validator"]

PREFIX = "sft_val"


def sft_validator(run: Any, model: Any) -> Callable[[int], bool] | None:
    """``validate(steps_done) -> stop`` for :func:`~rockroll.trainer.learner.sft.sft_train`, or None without
    ``sft.eval_every``; each validation is appended to ``run.summary["sft_val"]`` as ``{step, success}``, plus
    ``<tag>/success_len<k>`` by difficulty where the env has levels."""
    cfg = run.cfg
    if not cfg.sft.eval_every:
        return None
    seeds = select_seeds(cfg)
    history: list[dict[str, float]] = []
    run.summary["sft_val"] = history

    def validate(done: int) -> bool:
        t0 = time.perf_counter()
        run.rollout.update_weights(model.state_dict(), 0)
        run.emit("eval_start", {"prefix": PREFIX, "episodes": len(seeds)})
        metrics = run.rollout.evaluate(seeds, PREFIX)
        metrics["time/eval"] = time.perf_counter() - t0
        run.emit("eval_end", {"prefix": PREFIX, "metrics": metrics})
        success = mean_success(metrics, PREFIX, run.rollout.tags)
        entry = {"step": float(done), "success": success}
        entry.update({k[len(PREFIX) + 1 :]: v for k, v in metrics.items() if "/success_len" in k})
        history.append(entry)
        return cfg.sft.stop_success is not None and success >= cfg.sft.stop_success

    return validate
