"""What a job may reach and send beyond its sandboxes: every URL, defaults included, and its API-key variables.

Issue 48 items 2 and 7d. A job config can make its worker open connections of its own: the engine of a
train run (``rollout.engine.base_url``: ``openai`` has a default, ``sglang`` one when given), a judge
reward (``rollout.rlvr.rewards.routes.<tag>.options``: ``base_url`` has a default), a tracker
(``logging.wandb``: W&B's cloud). Each URL is resolved here as the worker would resolve it, the default
when the config leaves it unset, and must match ``Settings.job_engine_urls``
(:func:`rockroll.api.jobs.urls.check_url`); the resolved value is written into the effective config, so
the worker runs exactly what was checked. (An eval job's engine has no default URL: ``openai`` needs
``base_url``, checked by :mod:`rockroll.api.jobs.configs`; ``sglang`` without one starts its own server;
env sources (``remote``, ``openenv``) are dropped from job configs: a job's envs run in the server's
sandboxes.)

A judge's ``api_key_env`` names an environment variable of the worker whose value it sends as a bearer
token: a job may name only one ``Settings.job_api_key_envs`` lists (else 422 ``job_key_env``), or ``''``
(no key). Left unset, the default (``OPENAI_API_KEY``) stays when listed and becomes ``''`` otherwise, so
an unlisted variable is never read. :func:`key_env_values` gives what a worker's environment must hold
for its job: the listed variables its effective config names, with the server's values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rockroll.agentrl.rewards.judge import JudgeConfig, chat_url
from rockroll.api.jobs.urls import SERVER_PREFIX, check_key_env, check_url
from rockroll.envs.config import ConfigError

__all__ = ["check_train_outbound", "judge_options", "key_env_values", "WANDB_URL", "CHECKED_KEYS"]

#: where W&B's client sends a run when nothing else is configured (a job's worker gets no WANDB_* variable)
WANDB_URL = "https://api.wandb.ai"
#: dotted keys of a train config checked here (``check_strings`` leaves them alone; a judge's ``base_url`` it
#: checks too, as given, besides the URL the judge POSTs to)
CHECKED_KEYS = ("rollout.engine.base_url",)
_ROUTES = "rollout.rlvr.rewards.routes"


def check_train_outbound(cfg: Any, out: dict[str, Any], urls: Sequence[str], key_envs: Sequence[str]) -> None:
    """Check every URL a train job's worker would reach, and its key variables; pin the judges' resolved
    options in ``out`` (the effective config). ``cfg``: the validated ``TrainConfig``."""
    base = getattr(cfg.rollout.engine, "base_url", None)
    if base is not None:
        unset = "base_url" not in cfg.rollout.engine.model_fields_set
        check_url(str(base), urls, "rollout.engine.base_url", default=unset)
    routes = out.get("rollout", {}).get("rlvr", {}).get("rewards", {}).get("routes", {})
    for tag, route in routes.items():
        if isinstance(route, dict) and route.get("reward") == "judge":
            route["options"] = judge_options(route.get("options") or {}, f"{_ROUTES}.{tag}.options", urls, key_envs)
    if cfg.logging.wandb:
        check_url(WANDB_URL, urls, "logging.wandb")  # where W&B sends a run


def judge_options(options: Mapping[str, Any], key: str, urls: Sequence[str], key_envs: Sequence[str]) -> dict[str, Any]:
    """A judge route's options with ``base_url`` and ``api_key_env`` resolved and checked (see the module
    docstring); ``ConfigError`` naming ``key.<field>`` for bad options."""
    try:
        cfg = JudgeConfig(**dict(options))
    except ConfigError as e:
        problems = [(f"{key}.{k}" if k else key, f"{key}.{m}" if k else m) for k, m in e.problems]
        raise ConfigError(problems[0][0], problems[0][1], allowed=e.allowed, value=e.value, problems=problems) from e
    env = cfg.api_key_env
    if "api_key_env" in options:
        check_key_env(env, key_envs, f"{key}.api_key_env")
    elif env not in key_envs:
        env = ""  # the default names a variable the admin did not list: no key is read
    check_url(chat_url(cfg.base_url), urls, f"{key}.base_url", default="base_url" not in options)
    return {**options, "base_url": cfg.base_url, "api_key_env": env}


def key_env_values(
    config: Mapping[str, Any], allowed: Sequence[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables a job's worker needs in its environment: each ``api_key_env`` of the effective train
    ``config``'s judge routes that ``allowed`` (``Settings.job_api_key_envs``) lists and the server has set,
    with the server's value (``environ``: ``os.environ``). Nothing for an eval job."""
    environ = os.environ if environ is None else environ
    rollout = config.get("rollout")
    routes = rollout.get("rlvr", {}).get("rewards", {}).get("routes", {}) if isinstance(rollout, dict) else {}
    out: dict[str, str] = {}
    for route in routes.values() if isinstance(routes, dict) else ():
        options = route.get("options") if isinstance(route, dict) else None
        name = options.get("api_key_env") if isinstance(options, dict) else None
        if isinstance(name, str) and name in allowed and name in environ and not name.startswith(SERVER_PREFIX):
            out[name] = environ[name]
    return out
