"""Greedy evaluation on held-out seeds, with success broken down by the expert's path length.

Episodes masked by infra failures (after every retry) are left out of the rates and counted in
``<prefix>/<tag>/masked``: a broken sandbox is not the policy's failure.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

__all__ = ["evaluate_plans", "success_by_length"]


def success_by_length(trajs: list[Any], path_length: Any) -> dict[int, tuple[float, int]]:
    """``{path length: (success rate, episodes)}``."""
    groups: dict[int, list[bool]] = defaultdict(list)
    for t in trajs:
        groups[int(path_length(t.seed))].append(bool(t.success))
    return {k: (sum(v) / len(v), len(v)) for k, v in sorted(groups.items())}


def evaluate_plans(
    rollout: Any, engine: Any, seeds: list[int], *, max_new_tokens: int, prefix: str = "eval"
) -> dict[str, float]:
    """Greedy success on ``seeds``: ``<prefix>/<tag>/success``, ``.../success_len<k>`` and its maps ``.../n_len<k>``."""
    from rockroll.trainer.rollout.plan import PlanTask

    tasks = [PlanTask(s, f"eval{s}", f"eval{s}") for s in seeds]
    played = asyncio.run(rollout.run(engine, tasks, max_new_tokens=max_new_tokens, temperature=0.0))
    trajs = [t for t in played if not t.masked]
    tag = rollout.tag
    out = {f"{prefix}/{tag}/success": sum(t.success for t in trajs) / max(len(trajs), 1)}
    if len(trajs) < len(played):
        out[f"{prefix}/{tag}/masked"] = float(len(played) - len(trajs))
    for k, (rate, n) in success_by_length(trajs, rollout.path_length).items():
        out[f"{prefix}/{tag}/success_len{k}"] = rate
        out[f"{prefix}/{tag}/n_len{k}"] = float(n)  # the report's "maps" column
    return out
