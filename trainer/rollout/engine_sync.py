"""The trainer's rollout engine: built from ``rollout.engine`` through the registry, and kept in sync.

:func:`engine_for` is the one place the trainer makes an engine: ``make_engine(kind, ...)`` with the
options of ``rollout.engine`` (:mod:`rockroll.agentrl.engines.config`) plus what the run owns: the
policy (a frozen copy of the trainer's model for ``hf``; the model folder for ``vllm``/``sglang``, whose
host loads it and then takes every update), the tokenizer and the seed. With ``workers.use_ray`` the
same engine is built inside a Ray actor (:class:`rockroll.trainer.learner.ray_workers.RayEngine`;
:func:`rockroll.trainer.rollout.setup.build_engine` picks).

Placement: on CPU the engine lives beside the trainer (``hf`` in the driver process, ``vllm`` in a
host process the driver starts). On a GPU the same code colocates them on one device: ``vllm`` with
``sleep_mode: true`` releases its KV cache (level 1: weights offloaded too) while the trainer updates
and is woken before the new weights load (:class:`EngineSync`); apart (``workers.colocate: false``),
the engine keeps its own GPU and never sleeps.

:class:`EngineSync` pushes the weights after every update. An engine that dies during the sync
(:class:`~rockroll.agentrl.engines.EngineDeadError`) is restarted (it comes back with the last weights
it had) and the sync is tried again; restarts are counted (``rollout/engine_restarts``), whether they
happened in a sync or in the rollout (a dead engine's episodes are retried there as infra failures).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rockroll.agentrl.engines import EngineDeadError, make_engine
from rockroll.agentrl.engines.config import check_engine_available, engine_options
from rockroll.envs.config import ConfigError

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = ["engine_for", "EngineSync", "weights_nbytes"]

Loader = Callable[[Any, int], None]


def engine_for(cfg: TrainConfig, model: Any, tokenizer: Any) -> Any:
    """The engine ``rollout.engine`` names, in this process (the Ray engine actor calls this too)."""
    e = cfg.rollout.engine
    check_engine_available(e)
    if e.kind == "openai" and (cfg.total_steps > 0 or cfg.sft.steps > 0):
        raise ConfigError(
            "rollout.engine.kind",
            "rollout.engine.kind: openai takes no weight updates, so it cannot follow training; use hf, vllm or "
            "sglang (openai fits total_steps: 0 and sft.steps: 0, an evaluation of the model as it is)",
            value="openai",
        )
    owned: dict[str, Any] = {"tokenizer": tokenizer}
    if e.kind == "hf":
        from rockroll.trainer.learner.models import frozen_copy

        owned.update(model=frozen_copy(model), seed=cfg.seed)
    elif e.kind in ("vllm", "sglang"):
        owned.update(model_path=cfg.model.path, seed=cfg.seed)
    return make_engine(e.kind, **owned, **engine_options(e))


def weights_nbytes(weights: Any) -> int:
    """Bytes of a weight sync: the tensors handed to the engine (their in-memory size)."""
    if not isinstance(weights, dict):
        return 0
    return sum(t.numel() * t.element_size() for t in weights.values() if hasattr(t, "element_size"))


class EngineSync:
    """Weights from the trainer to the engine after every update (see the module docstring).

    Args:
        engine: the rollout engine.
        may_sleep: the engine may sleep while the trainer updates (nothing generates meanwhile: no
            rollout runs ahead of the weights); it sleeps only where it can (``sleep()`` returns True).
        attempts: syncs tried per update; an engine dead at every try raises its EngineDeadError.
    """

    def __init__(self, engine: Any, *, may_sleep: bool = False, attempts: int = 3) -> None:
        self.engine, self.may_sleep, self.attempts = engine, may_sleep, attempts
        self.asleep = False
        self.sync_restarts = 0  # restarts made by a failed sync (the rest happened in rollout)
        self._restarts_seen = self._restarts()

    def _restarts(self) -> int:
        return int(getattr(self.engine, "restarts", 0) or 0)

    def new_restarts(self) -> float:
        """Engine restarts since the last call (in rollout or in a sync): ``rollout/engine_restarts``."""
        now = self._restarts()
        new, self._restarts_seen = now - self._restarts_seen, now
        return float(new)

    def release(self) -> None:
        """The trainer is about to update: let the engine sleep (release its memory) where it can."""
        sleep = getattr(self.engine, "sleep", None)
        if self.may_sleep and callable(sleep) and not self.asleep:
            self.asleep = bool(sleep(level=1))

    def push(self, weights: Any, version: int, load: Loader | None = None) -> dict[str, float]:
        """Wake the engine if it sleeps, then load ``weights`` as ``version`` (``load``: how, default the
        engine's ``update_weights``); a dead engine is restarted and the load tried again."""
        load = load or self.engine.update_weights
        t0 = time.perf_counter()
        if self.asleep:
            self.engine.wake_up()
            self.asleep = False
        for attempt in range(1, self.attempts + 1):
            try:
                load(weights, version)
                break
            except EngineDeadError:
                restart = getattr(self.engine, "restart", None)
                if attempt == self.attempts or not callable(restart):
                    raise
                restart()  # back with the weights it had before this update; then this update again
                self.sync_restarts += 1
        return {
            "time/sync": time.perf_counter() - t0,
            "system/sync_bytes": float(weights_nbytes(weights)),
            "system/weight_version": float(version),
        }
