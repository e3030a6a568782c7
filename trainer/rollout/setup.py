"""The run's rollout and its engine, built from the config: :func:`make_rollout`, :func:`build_engine`.

The engine comes from ``rollout.engine`` through the registry (:func:`rockroll.trainer.rollout.engine_sync.engine_for`),
in this process or inside a Ray actor (``workers.use_ray``); the rollout is plan mode's
:class:`~rockroll.trainer.rollout.plan_driver.PlanDriver`, multi-turn's
:class:`~rockroll.trainer.rollout.multiturn.MultiTurnDriver` or single-turn RLVR's
:class:`~rockroll.trainer.rollout.rlvr.RLVRRollout` (beside envs: :class:`~rockroll.trainer.rollout.mixed.RLVRWithEnvs`),
each a :class:`~rockroll.trainer.rollout.base.Rollout`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from rockroll.agentrl.engines.config import check_engine_available
from rockroll.trainer.rollout.base import Rollout
from rockroll.trainer.rollout.engine_sync import EngineSync, engine_for
from rockroll.trainer.rollout.mixed import RLVRWithEnvs
from rockroll.trainer.rollout.multiturn import MultiTurnDriver
from rockroll.trainer.rollout.plan_driver import PlanDriver
from rockroll.trainer.rollout.rlvr import RLVRRollout

if TYPE_CHECKING:
    from rockroll.agentrl.sources.kinds import EnvSource
    from rockroll.trainer.config import TrainConfig

__all__ = ["build_engine", "make_rollout"]


def build_engine(cfg: TrainConfig, model: Any, tokenizer: Any) -> Any:
    """The run's rollout engine: inside a Ray actor when ``workers.use_ray`` (and ``engine_placement: actor``), else
    here."""
    if cfg.workers.use_ray and cfg.workers.engine_placement == "actor":
        from rockroll.trainer.learner.ray_workers import RayEngine

        check_engine_available(cfg.rollout.engine)  # fail here, with the one-line hint, before an actor starts
        return RayEngine(cfg, {k: v.detach().cpu() for k, v in model.state_dict().items()}, tokenizer)
    return engine_for(cfg, model, tokenizer)


def make_rollout(cfg: TrainConfig, model: Any, tokenizer: Any, source: EnvSource) -> Rollout:
    """The run's rollout (plan, multiturn or rlvr) around its engine; the rollout owns the engine and closes it."""
    engine = build_engine(cfg, model, tokenizer)
    # the engine may sleep through the update when no rollout runs ahead of the weights
    sync = EngineSync(engine, may_sleep=cfg.rollout.scheduler.async_generation_ratio == 0)
    try:
        if cfg.rollout.mode == "multiturn":
            return MultiTurnDriver(cfg, engine, source, sync=sync)
        if cfg.rollout.mode == "rlvr" and cfg.rollout.envs:
            return RLVRWithEnvs(cfg, tokenizer, engine, source, sync=sync)
        if cfg.rollout.mode == "rlvr":
            return RLVRRollout(cfg, tokenizer, engine, sync=sync)
        return PlanDriver(cfg, tokenizer, engine, source, sync=sync)
    except BaseException:
        asyncio.run(engine.close())
        raise
