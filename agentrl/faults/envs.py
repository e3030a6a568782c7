"""Envs that are slow, hang or die on purpose: for testing the rollout error model and for benches.

:class:`FaultyEnv` wraps any registered env (``inner``) and, per episode or per step, adds latency
drawn from a :class:`~rockroll.agentrl.faults.latency.Latency`, hangs, raises, or kills the process it runs in
(``os._exit``: inside a sandbox this kills the sandbox server, so the session is lost).
Register it under any id with :func:`register_fault_env`; the faults are drawn from an RNG of their
own (seeded by ``fault_seed``, else from OS entropy), never from the env's RNG, so the game itself
stays deterministic per seed. In sandboxes, :mod:`rockroll.agentrl.faults.sandbox_envs` registers them at server
start from ``$ROCKROLL_FAULT_ENVS``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np

import rockroll.envhub as envhub
from rockroll.agentrl.faults.latency import Latency
from rockroll.envhub.errors import UnknownEnvError
from rockroll.envs.action_wire import tools_of
from rockroll.envs.tools import Action, Tool

__all__ = ["FaultyEnv", "register_fault_env", "register_from_environ", "FAULT_MODES", "FAULT_ENVS_VAR"]

FAULT_MODES = ("raise", "hang", "exit")
FAULT_ENVS_VAR = "ROCKROLL_FAULT_ENVS"


class InjectedFault(RuntimeError):
    """The failure a :class:`FaultyEnv` raises in ``raise`` mode."""


class FaultyEnv(gym.Wrapper[str, str, str, str]):
    """A registered env with injected latency and faults.

    Args:
        inner: id of the wrapped env (built with ``envhub.make``).
        inner_kwargs: kwargs of the wrapped env.
        step_latency: ``Latency`` fields (dict) for a delay before every ``step``.
        reset_latency: ``Latency`` fields (dict) for a delay before every ``reset``.
        mode: what a fault does: ``raise`` (InjectedFault), ``hang`` (sleep ``hang_s``) or ``exit``
            (``os._exit(3)``: kills the process; only use it inside a sandbox).
        fault_prob: probability that an episode is faulty (drawn at ``reset``).
        fault_seeds: env seeds whose episodes are always faulty.
        fault_at_step: the step (1-based) at which a faulty episode faults; 0: at ``reset``.
        hang_s: how long a hang lasts.
        fault_seed: seeds the fault RNG (None: OS entropy).
        fault_every: every ``fault_every``-th episode started in this process is faulty (0: off);
            deterministic faults for tests, whatever the seeds.
    """

    _resets = 0  # episodes started in this process (for ``fault_every``)
    _resets_lock = threading.Lock()

    def __init__(
        self,
        inner: str = "FrozenLake-v0",
        inner_kwargs: dict[str, Any] | None = None,
        step_latency: dict[str, Any] | None = None,
        reset_latency: dict[str, Any] | None = None,
        mode: str = "raise",
        fault_prob: float = 0.0,
        fault_seeds: list[int] | tuple[int, ...] = (),
        fault_at_step: int = 1,
        hang_s: float = 30.0,
        fault_seed: int | None = None,
        fault_every: int = 0,
    ) -> None:
        if mode not in FAULT_MODES:
            raise ValueError(f"mode must be one of {', '.join(FAULT_MODES)}, got {mode!r}")
        if not 0.0 <= fault_prob <= 1.0 or fault_at_step < 0 or hang_s < 0 or fault_every < 0:
            raise ValueError("need 0 <= fault_prob <= 1 and fault_at_step, hang_s, fault_every >= 0")
        super().__init__(envhub.make(inner, **(inner_kwargs or {})))
        self.step_latency = Latency(**(step_latency or {}))
        self.reset_latency = Latency(**(reset_latency or {}))
        self.mode = mode
        self.fault_prob = fault_prob
        self.fault_seeds = {int(s) for s in fault_seeds}
        self.fault_at_step = fault_at_step
        self.hang_s = hang_s
        self.fault_rng = np.random.default_rng(fault_seed)
        self.fault_every = fault_every
        self.faulty = False
        self.steps = 0

    def _fault(self) -> None:
        if self.mode == "hang":
            time.sleep(self.hang_s)
        elif self.mode == "exit":
            os._exit(3)
        else:
            raise InjectedFault(f"injected fault at step {self.steps}")

    def _sleep(self, latency: Latency) -> None:
        delay = latency.sample(self.fault_rng)
        if delay > 0:
            time.sleep(delay)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.steps = 0
        with FaultyEnv._resets_lock:
            FaultyEnv._resets += 1
            nth = FaultyEnv._resets
        self.faulty = (
            (seed is not None and seed in self.fault_seeds)
            or (self.fault_every > 0 and nth % self.fault_every == 0)
            or bool(self.fault_rng.random() < self.fault_prob)
        )
        self._sleep(self.reset_latency)
        if self.faulty and self.fault_at_step == 0:
            self._fault()
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        self._sleep(self.step_latency)
        if self.faulty and self.steps == self.fault_at_step:
            self._fault()
        return self.env.step(action)

    def system_prompt(self) -> str:
        return self.env.system_prompt()

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tools_of(self.env)

    def action_candidates(self) -> list[str]:
        return self.env.action_candidates()

    def get_state(self) -> dict[str, Any]:
        return self.env.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state)

    def render(self) -> str:  # type: ignore[override]
        return self.env.render()


def register_fault_env(env_id: str, **kwargs: Any) -> Any:
    """Register (or replace) ``env_id`` as a :class:`FaultyEnv` with ``kwargs``; return its spec.

    The spec names the wrapped env's expert (the same game, only slower or faultier), so a warm start
    on the fault env imitates it.
    """
    inner = kwargs.get("inner", "FrozenLake-v0")
    try:
        expert = envhub.spec(inner).expert
    except UnknownEnvError:  # an inner id unknown here (registered in a sandbox only): no expert
        expert = None
    return envhub.register(
        env_id,
        "rockroll.agentrl.faults.envs:FaultyEnv",
        kwargs=kwargs,
        description="fault-injection wrapper (tests and benches)",
        tags=("test",),
        expert=expert,
        override=True,
    )


def register_from_environ(var: str = FAULT_ENVS_VAR) -> list[str]:
    """Register the fault envs that ``$ROCKROLL_FAULT_ENVS`` lists as JSON ``{env_id: kwargs}``.

    For sandboxes: start them with ``ROCKROLL_ENV_MODULES=rockroll.agentrl.faults.sandbox_envs`` and this variable,
    and the in-sandbox server registers the envs at start-up (before it serves any ``env.make``).
    """
    import json

    raw = os.environ.get(var, "")
    if not raw:
        return []
    specs = json.loads(raw)
    for env_id, kwargs in specs.items():
        register_fault_env(env_id, **kwargs)
    return list(specs)
