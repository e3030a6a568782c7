"""What each job kind runs, inside its worker process (:mod:`rockroll.api.jobs.worker`).

* ``eval`` with a model-eval config (``engine``/``envs`` keys, the YAML of ``rockroll eval``):
  :func:`rockroll.agentrl.eval.run.run_eval_job` runs that engine on the envs, every session opened through
  ``ctx.open_session`` (a sandbox of the server, owned by the job's owner); an ``hf`` model plays with
  the prompt settings it was trained with where the config left them unset (read here, in the worker,
  from the model's folder: :func:`_with_model_episode`);
* ``eval`` with ``{"env", "episodes", "policy"}``: the ``random`` (or ``expert``) policy of
  :func:`rockroll.envs.play.play_episode` on one sandboxed session (the expert reads a replica of the
  session's env kept here in step through ``get_state``, see :class:`_Replica`: the sandboxed env's
  state is out of its reach; experts exist for built-in envs only, so no custom code runs here);
* ``train``: :func:`rockroll.trainer.run.jobs.run_job`, the pipeline of ``rockroll train``, its rollouts on
  sessions of the server's sandboxes (``ctx.env_source()``).

``ctx`` is a :class:`rockroll.api.jobs.worker.WorkerContext` (a :class:`JobContext`); configs are the
effective configs of :mod:`rockroll.api.jobs.configs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import rockroll.envhub as envhub
from rockroll.agentrl.eval.config import trained_episode
from rockroll.agentrl.eval.run import run_eval_job
from rockroll.api.jobs.configs import MODEL_EPISODE
from rockroll.api.server.schemas import PolicyEvalConfig, is_model_eval
from rockroll.envs.config import parse_config
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.play import play_episode
from rockroll.envs.tools import Action
from rockroll.sandbox.session import EnvSession
from rockroll.trainer.run.jobs import run_job


class JobContext(Protocol):
    """What a job kind gets (a :class:`rockroll.api.jobs.worker.WorkerContext`): its config, and calls to log,
    report, check cancellation and open env sessions (in the server's sandboxes)."""

    config: dict[str, Any]

    def log(self, line: str) -> None: ...

    def check(self) -> None: ...

    def report(self, *, progress: float | None = None, metrics: Mapping[str, object] | None = None) -> None: ...

    def open_session(self, env: str, kwargs: Mapping[str, object]) -> EnvSession: ...


__all__ = ["KINDS", "JobContext", "run_eval", "run_train"]


class _Replica:
    """A sandboxed session seen by an expert: calls go to the session; the expert reads a local
    replica of its env (same id and kwargs), set to the session's state after every reset and step.

    Experts read an env's private state (the map, the boxes), which a sandboxed env keeps to itself;
    ``get_state`` is its complete snapshot, so the replica is the session's env as it is now. The
    replica is never stepped: it runs none of the env's work (no tool, no shell), it only holds state.
    """

    def __init__(self, session: TextEnvProtocol, env_id: str, kwargs: dict[str, Any]) -> None:
        self.session = session
        self.replica = envhub.make(env_id, **kwargs)

    def _sync(self) -> None:
        self.replica.set_state(self.session.get_state())

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self.session.reset(seed=seed, options=options)
        self.replica.reset(seed=seed, options=options)
        self._sync()
        return obs, info

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        out = self.session.step(action)
        self._sync()
        return out

    def action_candidates(self) -> list[str]:
        return self.session.action_candidates()

    def close(self) -> None:
        self.replica.close()

    def __getattr__(self, name: str) -> Any:  # what the expert reads: the replica's env (spec, unwrapped, ...)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.replica, name)


def _with_model_episode(config: dict[str, Any]) -> dict[str, Any]:
    """An effective hf eval config with the episode settings :data:`MODEL_EPISODE` lists taken from the model's
    folder (``rockroll_episode.json`` of a run's export), where it has them."""
    config = dict(config)
    keys = config.pop(MODEL_EPISODE, None) or []
    model = config.get("engine", {}).get("args", {}).get("model_path")
    trained = trained_episode(Path(model)) if keys and isinstance(model, str) else {}
    if trained:
        config["episode"] = {**config.get("episode", {}), **{k: trained[k] for k in keys if k in trained}}
    return config


def run_eval(ctx: JobContext) -> Mapping[str, object]:
    """Play ``episodes`` episodes with a simple policy in a sandbox; metrics under ``eval/<env>/``."""
    if is_model_eval(ctx.config):
        ctx.config = _with_model_episode(ctx.config)
        return run_eval_job(ctx)
    cfg = parse_config(PolicyEvalConfig, ctx.config)
    env_id, episodes, policy, seed0 = cfg.env, cfg.episodes, cfg.policy, cfg.seed
    if policy == "expert" and envhub.spec(env_id).expert is None:
        raise ValueError(f"{env_id} has no expert policy (use policy random)")
    session = ctx.open_session(env_id, dict(cfg.kwargs))
    ctx.log(f"eval {env_id} with the {policy} policy, {episodes} episodes, on sandbox {session.sandbox_id}")
    player: TextEnvProtocol = session
    wins = steps = 0
    total = 0.0
    metrics: dict[str, object] = {}
    try:
        if policy == "expert":
            player = _Replica(session, env_id, dict(cfg.kwargs))
        for i in range(episodes):
            ctx.check()
            res = play_episode(player, policy, seed0 + i)
            wins, steps, total = wins + res.success, steps + res.steps, total + res.total_reward
            metrics = {
                f"eval/{env_id}/success": wins / (i + 1),
                f"eval/{env_id}/return": total / (i + 1),
                f"eval/{env_id}/steps": steps / (i + 1),
                "episodes": i + 1,
            }
            ctx.report(progress=(i + 1) / episodes, metrics=metrics)
            ctx.log(
                f"episode {i}: seed={seed0 + i} steps={res.steps} return={res.total_reward:+.2f} success={res.success}"
            )
    finally:
        if player is not session:
            player.close()
        session.close()
    return metrics


def run_train(ctx: JobContext) -> Mapping[str, object]:
    """Hand the job to :func:`rockroll.trainer.run.jobs.run_job` (the same pipeline as ``rockroll train``)."""
    return run_job(ctx.config, ctx) or {}


#: job kind -> what its worker runs
KINDS: dict[str, Callable[[JobContext], Mapping[str, object]]] = {"eval": run_eval, "train": run_train}
