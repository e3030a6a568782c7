"""Job configs: checked when a job is submitted, and turned into the *effective* config its worker runs.

The effective config is the validated config with every path resolved inside the owner's job
directory (:mod:`rockroll.api.jobs.paths`) and every URL checked against the allowlist
(:mod:`rockroll.api.jobs.urls`):

* ``train``: the merged :class:`~rockroll.trainer.config.TrainConfig` (``config_path`` file, keys, then
  ``overrides``) as a mapping; ``logging.run_dir`` and ``model.path`` absolute; the run name not ``..``;
  every env of the run a built-in env or one the owner may play (its own custom envs and public ones,
  by their full id ``OWNER/NAME-vN``; another owner's private env is 404 ``env_not_found``, as for
  sessions). A custom env plays only in the owner's sandboxes (the worker's sessions), so settings
  that need a local copy of it (a warm start's expert, plan mode) are refused here
  (:func:`rockroll.trainer.rollout.env_check.check_train_envs`). ``rollout.sandbox`` is moot: a job's envs
  always run in this server's sandboxes. An RLVR dataset (``rollout.rlvr.dataset.path``, ``heldout_path``) is
  confined like a model (symlinks followed: inside the owner's folder or ``job_model_dirs``) and made absolute;
  every URL the worker would reach, defaults included (engine, judge rewards, W&B), is allowed and a judge's
  ``api_key_env`` listed (:mod:`rockroll.api.jobs.outbound`);
* ``eval`` with a model: the :class:`~rockroll.agentrl.eval.config.EvalConfig` mapping with ``output_dir``
  and the engine's ``model_path``/``tokenizer`` absolute, its URLs allowed, and no ``source`` (a job's
  envs always run in this server's sandboxes); for an ``hf`` model, :data:`MODEL_EPISODE` lists the
  prompt settings the caller left unset, which the worker takes from the model's folder (how it was
  trained: :func:`rockroll.agentrl.eval.config.trained_episode`), never read here;
* ``eval`` with a policy: as given (it names no path).

Plug-ins a config names are checked as text, never imported here (issue 35, hole C): engines, losses,
estimators and backends are names of their registries, and an expert (``rollout.expert``) must be a
registered expert or the one the env's spec declares (:func:`rockroll.envs.experts.is_known_expert`);
what they name loads only in the job's worker.

Env kwargs of every kind are checked for paths out of the owner's folder, answering the same whether a
file is there or not (:func:`rockroll.api.jobs.paths.check_env_kwargs`).

Errors: 400 ``invalid_job`` naming a bad key; 404 ``env_not_found`` for an env the owner may not play;
422 ``job_path``, ``job_url``, ``job_key_env`` (an ``api_key_env`` ``job_api_key_envs`` does not list) or
``job_plugin`` (an expert that is not registered) naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rockroll.envhub as envhub
from rockroll.agentrl.eval.config import PROMPT_KEYS, EvalConfig
from rockroll.agentrl.sources.kinds import CallableSource
from rockroll.api.jobs.outbound import CHECKED_KEYS, check_train_outbound
from rockroll.api.jobs.paths import JobDirs, JobPathError, check_env_kwargs, check_strings, config_file, confine
from rockroll.api.jobs.urls import KEY_SETTING, SETTING, JobKeyEnvError, JobUrlError, check_url
from rockroll.api.server.errors import ApiError
from rockroll.api.server.schemas import EvalJobConfig, is_model_eval
from rockroll.envs.config import ConfigError, parse_config
from rockroll.envs.config_loader import config_to_dict
from rockroll.trainer.rollout.env_check import check_train_envs
from rockroll.trainer.run.jobs import config_for_job

__all__ = ["effective_config", "check_expert", "MODEL_EPISODE"]

#: engine arguments that name a model or tokenizer to read
_MODEL_ARGS = ("model_path", "tokenizer")
#: key of an effective hf eval config: the prompt settings (``episode.*``) to take from the model's folder
MODEL_EPISODE = "_model_episode"
#: config keys that name a plug-in to load (an expert): a bad one is 422 ``job_plugin``
_PLUGIN_KEY = re.compile(r"(^|\.)expert$")
#: resolves an env id for the job's owner (the catalog's exact ids; UnknownEnvError when the owner may not play it)
EnvResolver = Callable[[str], Any]
#: dataset files an RLVR run reads (``rollout.rlvr.dataset.<name>``)
_DATASET_KEYS = ("path", "heldout_path")


def effective_config(
    kind: str,
    config: Any,
    *,
    dirs: JobDirs,
    owner_dir: Path,
    engine_urls: tuple[str, ...] = (),
    resolve_env: EnvResolver | None = None,
    key_envs: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The config a ``kind`` job's worker runs (see the module docstring); ``ApiError`` when it cannot run.

    ``resolve_env``: the owner's view of the env catalog (None: built-in envs only); ``key_envs``: the
    variables a judge's ``api_key_env`` may name (``Settings.job_api_key_envs``)."""
    try:
        if kind == "train":
            return _train(config, dirs, owner_dir, (engine_urls, key_envs), resolve_env)
        return _eval(config, dirs, owner_dir, engine_urls)
    except ConfigError as e:
        details = {"key": e.key, "allowed": e.allowed, "problems": [{"key": k, "message": m} for k, m in e.problems]}
        if any(_PLUGIN_KEY.search(k) for k, _ in e.problems):
            raise ApiError(422, "job_plugin", f"invalid {kind} config: {e}", details) from e
        raise ApiError(400, "invalid_job", f"invalid {kind} config: {e}", details) from e
    except envhub.UnknownEnvError as e:
        raise ApiError(404, "env_not_found", str(e), {"env_id": e.env_id, "suggestions": e.suggestions}) from e
    except FileNotFoundError as e:
        raise ApiError(400, "invalid_job", f"invalid {kind} config: {e}", {"key": "config_path"}) from e
    except JobPathError as e:
        raise ApiError(422, "job_path", str(e), {"key": e.key}) from e
    except JobUrlError as e:
        raise ApiError(422, "job_url", str(e), {"key": e.key, "setting": SETTING}) from e
    except JobKeyEnvError as e:
        raise ApiError(422, "job_key_env", str(e), {"key": e.key, "setting": KEY_SETTING}) from e


def _train(
    config: Any,
    dirs: JobDirs,
    owner_dir: Path,
    allowed: tuple[tuple[str, ...], tuple[str, ...]],
    resolve_env: EnvResolver | None,
) -> dict[str, Any]:
    urls, key_envs = allowed
    data = dict(config) if isinstance(config, dict) else config
    if isinstance(data, dict) and data.get("config_path") is not None:
        data["config_path"] = str(config_file(dirs, owner_dir, data["config_path"]))
    cfg = config_for_job(data)
    out = config_to_dict(cfg)
    run_dir = confine(owner_dir, cfg.logging.run_dir or ".", "logging.run_dir")
    if cfg.name in (".", ".."):
        raise JobPathError("name", f"name {cfg.name!r} would leave logging.run_dir; name the run")
    out["logging"]["run_dir"] = str(run_dir)
    out["logging"]["progress"] = False  # the job record shows progress; a bar would only fill the worker's log
    model = confine(owner_dir, cfg.model.path, "model.path", read_dirs=dirs.model_dirs)
    if not model.is_relative_to(owner_dir.resolve()) and not (model / "config.json").exists() and cfg.model.build_tiny:
        raise JobPathError("model.path", f"model.path {cfg.model.path!r} has no model, and model folders are read-only")
    out["model"]["path"] = str(model)
    dataset = out["rollout"]["rlvr"]["dataset"]
    for name in _DATASET_KEYS:
        if dataset.get(name):
            key = f"rollout.rlvr.dataset.{name}"
            dataset[name] = str(confine(owner_dir, dataset[name], key, read_dirs=dirs.model_dirs))
    check_env_kwargs(out["rollout"]["env_kwargs"], "rollout.env_kwargs", owner_dir)
    for i, env in enumerate(out["rollout"]["envs"]):
        check_env_kwargs(env["env_kwargs"], f"rollout.envs.{i}.env_kwargs", owner_dir)
    check_train_outbound(cfg, out, urls, key_envs)
    skip = ("rollout.env_kwargs", "rollout.envs.*.env_kwargs", "model.path", "logging.run_dir", *CHECKED_KEYS)
    check_strings(out, "", skip=(*skip, *(f"rollout.rlvr.dataset.{n}" for n in _DATASET_KEYS)), engine_urls=urls)
    check_train_envs(cfg, CallableSource(_opens_nothing, check=resolve_env or _builtin_only))
    return out


def _opens_nothing(env_id: str, kwargs: dict[str, Any]) -> Any:
    raise RuntimeError("the control plane opens no env while checking a job")


def _builtin_only(env_id: str) -> None:
    envhub.spec(env_id)


def _eval(config: Any, dirs: JobDirs, owner_dir: Path, urls: tuple[str, ...]) -> dict[str, Any]:
    parse_config(EvalJobConfig, config)
    if not is_model_eval(config):
        check_strings(config, "", skip=("kwargs",), engine_urls=urls)
        check_env_kwargs(config.get("kwargs") or {}, "kwargs", owner_dir)
        if config.get("policy") == "expert":
            check_expert(str(config.get("env")))
        return dict(config)
    cfg = parse_config(EvalConfig, config)
    out = config_to_dict(cfg)
    out.pop("source", None)  # a job's envs run in this server's sandboxes, whatever the config says
    if cfg.output_dir is not None:
        out["output_dir"] = str(confine(owner_dir, cfg.output_dir, "output_dir"))
    args = out["engine"]["args"]
    for name in _MODEL_ARGS:
        if isinstance(args.get(name), str):
            args[name] = str(confine(owner_dir, args[name], f"engine.args.{name}", read_dirs=dirs.model_dirs))
    if cfg.engine.kind == "hf" and isinstance(args.get("model_path"), str):
        out[MODEL_EPISODE] = [k for k in PROMPT_KEYS if k not in cfg.episode.model_fields_set]
    if "base_url" in args:
        check_url(str(args["base_url"]), urls, "engine.args.base_url")
    for i, env in enumerate(out["envs"]):
        check_env_kwargs(env.get("kwargs") or {}, f"envs.{i}.kwargs", owner_dir)
    skip = ("envs.*.kwargs", "output_dir", "engine.args.base_url", *(f"engine.args.{n}" for n in _MODEL_ARGS))
    if cfg.engine.kind == "openai":
        skip += ("engine.args.model",)  # the served model's name, sent to the allowed server
    check_strings(out, "", skip=skip, engine_urls=urls)
    return out


def check_expert(env_id: str) -> None:
    """400 ``invalid_job`` unless ``env_id`` is an env of this server's registry with an expert."""
    try:
        spec = envhub.spec(env_id)
    except envhub.UnknownEnvError as e:
        raise ApiError(
            400,
            "invalid_job",
            f"the expert policy plays registered envs only; {env_id!r} is not one (use policy random)",
            {"key": "policy"},
        ) from e
    if spec.expert is None:
        raise ApiError(400, "invalid_job", f"{env_id} has no expert policy (use policy random)", {"key": "policy"})
