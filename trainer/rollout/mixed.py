"""RLVR beside agentic envs in one run (``rollout.mode: rlvr`` with ``rollout.envs``): :class:`RLVRWithEnvs`.

Each batch's ``num_env_groups`` groups are split by ``rollout.rlvr.ratio`` against the envs' summed ratios
(:meth:`~rockroll.trainer.config.RolloutConfig.rlvr_env_groups`, agentrl's ratio slots): the dataset's groups
come from an :class:`~rockroll.trainer.rollout.rlvr.RLVRRollout`, the env groups from a
:class:`~rockroll.trainer.rollout.multiturn.MultiTurnDriver` (which splits them among the envs by their
ratios), both on the one engine. Each part gets the run's config with its own share of the groups, so
dynamic sampling, retries, masking and timeouts work in each as in a run of its own.

The learner takes the batch as multi-turn rows (``rollout.plays_envs``): a dataset answer is a one-turn
episode, so ``algo.turn_credit: episode`` gives it the group-normalised advantage GRPO gives it alone.
Metrics, evaluation and the report are per tag (the dataset's reward tags and the envs' tags); a count both
parts report (infra failures, engine restarts) is summed, another shared key keeps the env's value and the
dataset's under ``rlvr/<key>``. The warm start draws ``sft.num_demos`` demos split by the same ratio: dataset
rows with their answers, and env episodes of each env's expert.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from rockroll.trainer.rollout.base import Rollout
from rockroll.trainer.rollout.engine_sync import EngineSync
from rockroll.trainer.rollout.multiturn import MultiTurnDriver, mean_success
from rockroll.trainer.rollout.rlvr import RLVRRollout, TagEntry

if TYPE_CHECKING:
    from rockroll.agentrl.trajectory import TrainSample, Trajectory
    from rockroll.trainer.config import TrainConfig

__all__ = ["RLVRWithEnvs", "part_configs", "demo_split"]

#: metrics both parts report that count events: summed
SUMMED = ("rollout/infra_failures", "rollout/infra_retries", "rollout/engine_restarts", "system/tokens")


def part_configs(cfg: TrainConfig) -> tuple[TrainConfig, TrainConfig]:
    """``(dataset part, env part)``: the run's config with each part's share of ``num_env_groups``; the env
    part is a ``multiturn`` config of the run's envs."""
    r = cfg.rollout
    rlvr_groups, env_groups = r.rlvr_env_groups()

    def part(mode: str, groups: int, envs: list[Any]) -> TrainConfig:
        sched = r.scheduler.model_copy(update={"num_env_groups": groups})
        rollout = r.model_copy(update={"mode": mode, "scheduler": sched, "envs": envs})
        return cfg.model_copy(update={"rollout": rollout})

    return part("rlvr", rlvr_groups, []), part("multiturn", env_groups, list(r.envs))


def demo_split(cfg: TrainConfig) -> tuple[int, int]:
    """``(dataset rows, env episodes)`` of the warm start: ``sft.num_demos`` split by the batch's ratio."""
    r = cfg.rollout
    share = r.rlvr.ratio / (r.rlvr.ratio + r.env_ratio_sum)
    rows = round(cfg.sft.num_demos * share)
    return rows, cfg.sft.num_demos - rows


def merge_metrics(rlvr: dict[str, float], envs: dict[str, float]) -> dict[str, float]:
    """One step's metrics of both parts (see the module docstring)."""
    out = dict(envs)
    for k, v in rlvr.items():
        if k not in out:
            out[k] = v
        elif k in SUMMED:
            out[k] += v
        else:
            out[f"rlvr/{k}"] = v
    return out


class RLVRWithEnvs(Rollout):
    """The dataset's groups and the envs' groups of each batch, on one engine (see the module docstring).
    Owns the engine: :meth:`close` closes both parts, then the engine."""

    def __init__(self, cfg: TrainConfig, tokenizer: Any, engine: Any, source: Any, *, sync: EngineSync) -> None:
        self.cfg, self.engine, self.sync = cfg, engine, sync
        rlvr_cfg, env_cfg = part_configs(cfg)
        self.rlvr = RLVRRollout(rlvr_cfg, tokenizer, engine, sync=sync, owns_engine=False)
        try:
            self.envs = MultiTurnDriver(env_cfg, engine, source, sync=sync, owns_engine=False)
        except BaseException:
            self.rlvr.close()
            raise
        self.tags = [*self.rlvr.tags, *self.envs.tags]

    def next_batch(self, step: int) -> tuple[list[Trajectory], dict[str, float]]:
        """The dataset's groups, then the envs' (each part's own sampling and failure handling)."""
        ours, m_rlvr = self.rlvr.next_batch(step)
        theirs, m_envs = self.envs.next_batch(step)
        return [*ours, *theirs], merge_metrics(m_rlvr, m_envs)

    def evaluate(self, seeds: list[int], prefix: str = "eval") -> dict[str, float]:
        """Greedy held-out rows (``seeds`` index them) and greedy env episodes on ``seeds``, per tag; their
        unweighted mean is ``<prefix>/success``."""
        out = {**self.rlvr.evaluate(seeds, prefix), **self.envs.evaluate(seeds, prefix)}
        out[f"{prefix}/success"] = mean_success(out, prefix, self.tags)
        return out

    def demos(self, count: int) -> list[TrainSample]:
        """The dataset part's warm-start rows (the env part's come from the envs' experts)."""
        return self.rlvr.demos(count)

    def report_envs(self) -> list[Any]:
        """The report's rows: the dataset's tags, then the envs, each with its share of the groups."""
        r = self.cfg.rollout
        total = r.rlvr.ratio + r.env_ratio_sum
        rows: list[Any] = [TagEntry(t.tag, t.env_id, t.ratio * r.rlvr.ratio / total) for t in self.rlvr.report_envs()]
        return rows + [e.model_copy(update={"ratio": e.ratio / total}) for e in r.envs]

    def start_at(self, step: int, pending: Any = None) -> None:
        """A resumed run: the envs' scheduler continues its seed stream (the dataset's draws follow the step)."""
        self.envs.start_at(step, pending)

    def release(self) -> None:
        self.envs.release()

    def update_weights(self, weights: Any, version: int) -> dict[str, float]:
        """One load into the shared engine, through the env part's producer (it pauses its generation)."""
        return self.envs.update_weights(weights, version)

    def close(self) -> None:
        try:
            self.rlvr.close()
        finally:
            try:
                self.envs.close()
            finally:
                asyncio.run(self.engine.close())
