"""Hedging stalled episodes: a second copy on another sandbox, the first result wins.

An env call (a reset or a step) that has run longer than the ``hedge_quantile`` of its env's recent
calls (and at least ``hedge_min_s``) marks its episode as stalled. The scheduler then starts a copy of
the episode (same env seed, same sampling seeds, the same end-to-end deadline) on an env placed
away from the stalled one's sandbox. Whichever copy delivers a trajectory first wins; the other is
cancelled and gives its env back. A copy that fails (masked) does not win: the other plays on. At
most ``hedge_max_share`` of a batch's episodes are hedged, and each episode at most once.

:class:`CallWatch` is the env manager's side (which calls are running, where, and how long calls of
each env take); :class:`Hedger` is the scheduler's (which episodes are due).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from rockroll.agentrl.rollout.config import SchedulerConfig
    from rockroll.agentrl.trajectory import Trajectory


class EpisodeSpec(Protocol):
    """What hedging reads of an episode's spec (the env manager's ``EpisodeSpec``, a dataclass)."""

    episode_id: str
    env_id: str
    hedge: bool


Task = asyncio.Task[Any]

__all__ = ["CallWatch", "Hedger", "AttemptKey"]

#: an episode attempt: its episode id and whether it is the hedged copy
AttemptKey = tuple[str, bool]


class CallWatch:
    """Env calls in flight per episode attempt, where each attempt's env runs, and recent call times per env id."""

    def __init__(self, window: int = 512) -> None:
        self.window = window
        self.inflight: dict[AttemptKey, float] = {}  # attempt -> start of its running env call
        self.where: dict[AttemptKey, str | None] = {}  # attempt -> its env's place (sandbox id)
        self.durations: dict[str, collections.deque[float]] = {}

    @contextmanager
    def call(self, key: AttemptKey, env_id: str) -> Iterator[None]:
        """Time one env call of attempt ``key`` (a call that raises is not a sample of the env's speed)."""
        start = time.monotonic()
        self.inflight[key] = start
        try:
            yield
        finally:
            self.inflight.pop(key, None)
        self.durations.setdefault(env_id, collections.deque(maxlen=self.window)).append(time.monotonic() - start)

    def forget(self, key: AttemptKey) -> None:
        self.inflight.pop(key, None)
        self.where.pop(key, None)

    def quantile(self, env_id: str, q: float, min_samples: int) -> float | None:
        """Quantile ``q`` of the env's recent call times (None: fewer than ``min_samples`` yet)."""
        d = self.durations.get(env_id)
        if d is None or len(d) < min_samples:
            return None
        return float(np.quantile(np.fromiter(d, float), q))


class Hedger:
    """Which running episodes are due for a hedge, and which copy of a hedged pair counts (see the module docstring)."""

    def __init__(self, config: SchedulerConfig, watch: CallWatch) -> None:
        self.config = config
        self.watch = watch
        self.spec_of: dict[Task, EpisodeSpec] = {}  # running episode tasks of the scheduler
        self.partner: dict[Task, Task] = {}  # both copies of a hedged episode, each to the other

    def track(self, task: Task, spec: EpisodeSpec) -> None:
        self.spec_of[task] = spec

    def forget(self, task: Task) -> None:
        self.spec_of.pop(task, None)
        other = self.partner.pop(task, None)
        if other is not None:
            self.partner.pop(other, None)

    def due(self, running: Mapping[Task, Any], now: float) -> list[tuple[Task, EpisodeSpec]]:
        """The running primaries that stall and are not hedged yet, each with its copy's spec."""
        out = []
        for task in running:
            spec = self.spec_of.get(task)
            if spec is None or spec.hedge or task in self.partner:
                continue
            if self.stalled(spec.episode_id, spec.env_id, now):
                copy = dataclasses.replace(spec, hedge=True, avoid=self.avoid(spec.episode_id))  # type: ignore[type-var]
                out.append((task, copy))
        return out

    def pair(self, primary: Task, copy: Task, spec: EpisodeSpec) -> None:
        self.track(copy, spec)
        self.partner[primary], self.partner[copy] = copy, primary

    def settle(self, task: Task, traj: Trajectory, running: Mapping[Task, Any]) -> tuple[bool, Task | None]:
        """A copy ended: whether its trajectory counts, and the other copy to cancel (the loser).

        A masked copy does not count while the other still runs: the other plays on and counts alone.
        """
        self.spec_of.pop(task, None)
        other = self.partner.pop(task, None)
        if other is None:
            return True, None
        self.partner.pop(other, None)
        if other not in running:
            return True, None
        if traj.masked:
            return False, None
        return True, other

    @property
    def enabled(self) -> bool:
        return self.config.hedge_quantile is not None

    def budget(self, episodes_started: int) -> int:
        return math.ceil(self.config.hedge_max_share * episodes_started)

    def stalled(self, episode_id: str, env_id: str, now: float) -> bool:
        """Whether the primary attempt of ``episode_id`` has an env call running past the threshold."""
        c = self.config
        start = self.watch.inflight.get((episode_id, False))
        if start is None or c.hedge_quantile is None:
            return False
        q = self.watch.quantile(env_id, c.hedge_quantile, c.hedge_min_samples)
        return q is not None and now - start > max(c.hedge_min_s, q)

    def avoid(self, episode_id: str) -> tuple[str, ...]:
        where = self.watch.where.get((episode_id, False))
        return (where,) if where else ()
