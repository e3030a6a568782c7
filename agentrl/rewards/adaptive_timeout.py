"""Adaptive timeouts of sandboxed test runs (the reward of code tasks), per task: RollPacker's rule.

A code task's reward is a run of its hidden tests. A wrong answer can make that run slow (a loop,
a sleep, a deadlock) and hold a sandbox until the fixed limit ``t_max_s``; correct answers of the
same task tell how long a good run takes. Per task::

    T = min(max(t_min_s, lam * T_anchor), t_max_s)

where ``T_anchor`` is the longest test run among the task's correct (resolved) answers so far;
before any correct answer, ``T = t_max_s``. A run that exceeds ``T`` is killed and scores 0: the
agent's outcome (a slow answer), not an infra failure (a sandbox that died or stalled, which the
env manager masks and retries). The cost: a correct answer slower than ``T`` is cut off too
(``lam`` is the margin against that).

The state lives on the rollout side (many sandboxes serve one task) in one
:class:`AdaptiveTimeouts`, thread-safe. The env manager (``EpisodeConfig.adaptive_reward_timeout``)
gives the env the reset options of :meth:`AdaptiveTimeouts.reset_options` (SWE-v0 honours them, see
below), and reports the episode's end with
:meth:`AdaptiveTimeouts.episode_ended`, which reads the last step's ``test_run_s``,
``tests_timed_out`` and ``success``.

Task keys: a task is keyed by its env and the reset info's ``task_id`` (one task's anchor serves
every seed that picks it). ``T`` is needed at reset, before the env says which task the seed chose,
so the env manager sends the whole table, :meth:`AdaptiveTimeouts.reset_options`: the reset option
``test_timeouts`` maps every task with an anchor to its ``T``, and the env applies the entry of the
task it picks (the limit it applied comes back as the submit info's ``test_timeout_s``). Envs
without a ``task_id`` are keyed by ``(env, seed)`` and adapt when seeds repeat
(:meth:`AdaptiveTimeouts.reset_timeout`, a single ``test_timeout_s``).

Counters (:meth:`AdaptiveTimeouts.snapshot`): runs observed, cut-offs (runs that timed out under a
``T`` shorter than ``t_max_s``), an estimate of the seconds saved (``t_max_s - T`` per cut-off: an
upper bound, reached by runs that would have run into ``t_max_s``), timeouts issued and their sum.
Whether a cut-off run was correct cannot be known; ``bench/adaptive_timeouts.py`` measures it.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any

__all__ = ["AdaptiveTimeouts"]


class AdaptiveTimeouts:
    """Per-task test-run timeouts (see the module docstring).

    Args:
        t_min_s: shortest timeout ever given once a task has an anchor.
        lam: margin over the longest correct run.
        t_max_s: the fixed limit (before any correct answer, and the cap).
        max_seeds: seeds whose task is remembered (oldest forgotten first).
    """

    def __init__(self, t_min_s: float, lam: float, t_max_s: float, *, max_seeds: int = 100_000) -> None:
        for name, v in (("t_min_s", t_min_s), ("lam", lam), ("t_max_s", t_max_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if t_min_s > t_max_s:
            raise ValueError(f"t_min_s ({t_min_s}) must not exceed t_max_s ({t_max_s})")
        self.t_min_s, self.lam, self.t_max_s = float(t_min_s), float(lam), float(t_max_s)
        self.max_seeds = max_seeds
        self._lock = threading.Lock()
        self._anchor: dict[Hashable, float] = {}  # task key -> longest correct run (s)
        self._task_of: dict[tuple[str, int], Hashable] = {}  # (env, seed) -> task key, learned at reset
        #: adaptive_runs, adaptive_cutoffs, adaptive_saved_s, adaptive_issued, adaptive_timeout_s
        self.counts: Counter[str] = Counter()

    # ------------------------------------------------------------ the rule
    def timeout(self, task_key: Hashable) -> float:
        """The test-run timeout of ``task_key`` now."""
        with self._lock:
            return self._timeout(task_key)

    def _timeout(self, task_key: Hashable) -> float:
        anchor = self._anchor.get(task_key)
        if anchor is None:
            return self.t_max_s
        return min(max(self.t_min_s, self.lam * anchor), self.t_max_s)

    def observe(
        self, task_key: Hashable, run_s: float, correct: bool, timed_out: bool, timeout_s: float | None = None
    ) -> None:
        """Record one test run of ``task_key``: ``run_s`` seconds, ``correct`` (resolved), ``timed_out``
        (killed at ``timeout_s``, default: the task's timeout now). A correct run that finished raises
        the task's anchor; a timed-out run under a timeout shorter than ``t_max_s`` is a cut-off."""
        with self._lock:
            limit = self._timeout(task_key) if timeout_s is None else float(timeout_s)
            self.counts["adaptive_runs"] += 1
            if timed_out and limit < self.t_max_s:
                self.counts["adaptive_cutoffs"] += 1
                self.counts["adaptive_saved_s"] += self.t_max_s - limit
            if correct and not timed_out and math.isfinite(run_s) and run_s >= 0:
                self._anchor[task_key] = max(self._anchor.get(task_key, 0.0), float(run_s))

    def snapshot(self) -> Counter[str]:
        """A copy of the counters (subtract two for a batch's share)."""
        with self._lock:
            return self.counts.copy()

    # ------------------------------------------------------------ episodes
    def reset_timeout(self, env: str, seed: int) -> float:
        """The timeout of an episode about to reset on ``(env, seed)`` (counted as issued)."""
        with self._lock:
            t = self._timeout(self._task_of.get((env, seed), (env, seed)))
            self.counts["adaptive_issued"] += 1
            self.counts["adaptive_timeout_s"] += t
            return t

    def reset_options(self, env: str) -> dict[str, Any]:
        """The reset option of an episode of ``env``: ``{"test_timeouts": {task_id: T}}`` for every task
        of ``env`` with an anchor (the others keep their own limit, ``t_max_s`` at most)."""
        with self._lock:
            table = {
                str(key[2]): self._timeout(key)
                for key in self._anchor
                if isinstance(key, tuple) and len(key) == 3 and key[0] == env and key[1] == "task"
            }
            return {"test_timeouts": table}  # issued limits are counted when the env reports the one it applied

    def episode_ended(
        self,
        env: str,
        seed: int,
        reset_info: Mapping[str, Any],
        end_info: Mapping[str, Any],
        timeout_s: float | None = None,
    ) -> bool:
        """Learn the seed's task from ``reset_info`` and observe the test run the last step's
        ``end_info`` reports (``test_run_s``, ``tests_timed_out``, ``success``); False when it
        reports none (the episode never submitted, or the env runs no tests)."""
        task_id = reset_info.get("task_id")
        key: Hashable = (env, seed) if task_id is None else (env, "task", str(task_id))
        if task_id is not None:
            with self._lock:
                self._task_of.pop((env, seed), None)
                self._task_of[(env, seed)] = key
                if len(self._task_of) > self.max_seeds:
                    self._task_of.pop(next(iter(self._task_of)))
        run_s = end_info.get("test_run_s")
        if not isinstance(run_s, (int, float)) or isinstance(run_s, bool):
            return False
        timed_out = bool(end_info.get("tests_timed_out", False))
        applied = end_info.get("test_timeout_s", timeout_s)  # the limit the env applied, when it says
        limit = float(applied) if isinstance(applied, (int, float)) and not isinstance(applied, bool) else None
        if timeout_s is None and limit is not None:
            with self._lock:
                self.counts["adaptive_issued"] += 1
                self.counts["adaptive_timeout_s"] += min(limit, self.t_max_s)
        self.observe(key, float(run_s), bool(end_info.get("success", False)), timed_out, limit)
        return True

    def __repr__(self) -> str:
        return f"AdaptiveTimeouts(t_min_s={self.t_min_s:g}, lam={self.lam:g}, t_max_s={self.t_max_s:g})"
