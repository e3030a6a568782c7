"""Typed configuration of ``rockroll eval`` and of eval jobs; the YAML file maps 1:1 onto these models.

Example::

    name: tiny-frozenlake
    engine: {kind: hf, args: {model_path: /tmp/tiny, max_batch_size: 32}}
    source: {kind: sandbox, backend: process, max_sandboxes: 2}
    envs:
      - {env: FrozenLake-v0, episodes: 20}
      - {tag: puzzle, episodes: 5}          # every env tagged "puzzle"
    episode: {max_turns: 10, max_tokens_per_turn: 64, temperature: 0.0}
    seed: 1000
    concurrency: 16
    output_dir: eval-out

An entry may list its env seeds instead (``{env: FrozenLake-v0, seeds: [5000, 5001, 5007]}``): one
episode per seed, exactly those. ``rockroll eval --model DIR --env ID --seeds A:B`` (the direct form)
builds such a config with :func:`model_eval_config`; :func:`parse_seeds` and :func:`parse_env_kwargs`
read its command-line values.

Loaded by the one config loader (:mod:`rockroll.envs.config_loader`): unknown keys, wrong types
and bad choices raise :class:`~rockroll.envs.config.ConfigError` naming the dotted key
(``envs.0.episodes``) and what it accepts; ``key=value`` overrides work as for ``rockroll train``.
The choices of ``engine.kind``, ``source.kind`` and ``source.backend`` are their registries' names.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Field, model_validator

import rockroll.envhub as envhub
from rockroll.agentrl.engines import ENGINE_KINDS
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.sources.kinds import SOURCE_KINDS
from rockroll.envs.config import ConfigModel, OneOf, parse_config
from rockroll.envs.config_loader import apply_overrides, load_config
from rockroll.sandbox.backends import backend_names

__all__ = [
    "EngineConfig",
    "SourceConfig",
    "EvalEnvConfig",
    "EvalConfig",
    "from_dict",
    "load_eval_config",
    "model_eval_config",
    "parse_env_kwargs",
    "parse_seeds",
]

#: most episodes one seeds expression may ask for
MAX_SEEDS = 1_000_000


def source_kinds() -> tuple[str, ...]:
    """Registered env-source kinds (``remote`` included: a lazy entry, imported when first asked for)."""
    return tuple(SOURCE_KINDS)


class EngineConfig(ConfigModel):
    """Which LLM engine plays."""

    kind: Annotated[str, OneOf(ENGINE_KINDS)] = Field("random", description="engine kind (rockroll.agentrl.engines)")
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="keyword arguments of the engine, e.g. model_path for hf; base_url and tokenizer for openai; "
        "actions and latency for random",
    )


class SourceConfig(ConfigModel):
    """Where the envs run."""

    kind: Annotated[str, OneOf(source_kinds)] = Field(
        "local",
        description="local: in this process; sandbox: sessions in a local SandboxManager (warm sandboxes reused); "
        "remote: sessions of a `rockroll serve` control plane; openenv: an OpenEnv env server at url "
        "(agentrl/sources/openenv.py); other kinds: register_source_kind (agentrl/sources/kinds.py)",
    )
    backend: Annotated[str, OneOf(backend_names)] = Field("process", description="sandbox backend (kind sandbox)")
    max_sandboxes: int = Field(2, ge=1, description="most sandboxes the local manager starts (kind sandbox)")
    url: str = Field("http://127.0.0.1:8080", description="control-plane URL (kind remote) or env server URL (openenv)")
    token_env: str = Field("ROCKROLL_TOKEN", description="environment variable holding the API token (kind remote)")


class EvalEnvConfig(ConfigModel):
    """One entry of ``envs``: an env id or a tag (all envs with that tag), N episodes each."""

    env: str = Field("", description="env id (FrozenLake-v0); give exactly one of env and tag")
    tag: str = Field("", description="registry tag (grid); expands to every env carrying it")
    episodes: int = Field(10, ge=1, description="episodes per env, on seeds seed, seed+1, ... (unless seeds is given)")
    seeds: list[int] | None = Field(
        None, description="the env seeds to play, one episode each (null: `episodes` seeds counting up from `seed`)"
    )
    kwargs: dict[str, Any] = Field(default_factory=dict, description="env constructor kwargs")

    @model_validator(mode="after")
    def _check(self) -> EvalEnvConfig:
        if bool(self.env) == bool(self.tag):
            raise ValueError(
                f"each envs entry needs exactly one of 'env' or 'tag', got env={self.env!r} tag={self.tag!r}"
            )
        if self.seeds is not None:
            _check_seeds(self.seeds)
        return self

    def env_seeds(self, first: int) -> list[int]:
        """The seeds this entry plays: ``seeds``, else ``first, first+1, ...`` (``episodes`` of them)."""
        return list(self.seeds) if self.seeds is not None else list(range(first, first + self.episodes))


class EvalConfig(ConfigModel):
    """A whole evaluation (``rockroll eval CONFIG``, or an ``eval`` job with ``engine``/``envs`` keys)."""

    name: str = Field("eval", description="label of the report")
    engine: EngineConfig = Field(default_factory=EngineConfig, description="the model")
    source: SourceConfig = Field(default_factory=SourceConfig, description="where envs run")
    envs: list[EvalEnvConfig] = Field(
        default_factory=lambda: [EvalEnvConfig(env="FrozenLake-v0")],
        description="what to play: [{env: ID, episodes: N}, {tag: TAG, episodes: N}, ...]",
    )
    episode: EpisodeConfig = Field(
        default_factory=lambda: EpisodeConfig(temperature=0.0),
        description="how episodes are played (turns, tokens, temperature, timeouts, retries)",
    )
    seed: int = Field(1000, ge=0, description="first env seed of every env")
    concurrency: int = Field(16, ge=1, description="episodes played at once")
    output_dir: str | None = Field(None, description="where report.json and report.md go (null: not written)")

    @model_validator(mode="after")
    def _check(self) -> EvalConfig:
        if not self.envs:
            raise ValueError("envs must list at least one entry, e.g. [{env: FrozenLake-v0, episodes: 10}]")
        return self


def from_dict(cls: type[Any], data: Any) -> Any:
    """Validate ``data`` into ``cls`` (:func:`~rockroll.envs.config.parse_config`)."""
    return parse_config(cls, data)


def load_eval_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> EvalConfig:
    """Read a YAML file (plus ``key=value`` overrides) into an :class:`EvalConfig` (ConfigError on bad content)."""
    return load_config(EvalConfig, path, overrides)


def _check_seeds(seeds: list[int]) -> None:
    if not seeds:
        raise ValueError("seeds must list at least one seed, e.g. [5000, 5001] (or null for episodes from seed)")
    if min(seeds) < 0:
        raise ValueError(f"seeds must be >= 0, got {min(seeds)}")
    if len(set(seeds)) != len(seeds):
        twice = sorted(s for s, n in Counter(seeds).items() if n > 1)[:5]
        raise ValueError(f"seeds must not repeat, got {', '.join(map(str, twice))} more than once")


def parse_seeds(text: str) -> list[int]:
    """Seeds from ``A:B`` (A, A+1, ..., B-1), ``N`` or a comma list of both (``0:10,42``), in that order.

    Raises ValueError saying what is wrong (an empty range such as ``10:5``, a negative or repeated seed).
    """
    seeds: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        a, colon, b = part.partition(":")
        if not colon:
            seeds.append(_int(a, text))
            continue
        start, stop = _int(a, text), _int(b, text)
        if start >= stop:
            raise ValueError(f"seed range {part} is empty: A:B means A, A+1, ..., B-1, so A < B")
        if stop - start + len(seeds) > MAX_SEEDS:
            raise ValueError(f"seeds {text!r} ask for more than {MAX_SEEDS:,} episodes")
        seeds += range(start, stop)
    _check_seeds(seeds)
    return seeds


def _int(raw: str, text: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(
            f"cannot read seeds {text!r}: use A:B (A, A+1, ..., B-1), N, or a comma list of them"
        ) from None


def parse_env_kwargs(items: Iterable[str]) -> dict[str, Any]:
    """``["is_slippery=true", "size=4"]`` -> ``{"is_slippery": True, "size": 4}`` (values read as YAML)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"env kwargs must look like key=value (e.g. is_slippery=true), got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ValueError(f"env kwarg {key.strip()}: cannot read {raw!r} as a value") from e
    return out


#: the file beside an exported model that records how its training episodes were played
EPISODE_FILE = "rockroll_episode.json"
#: the episode settings a trained policy depends on (its prompt format); eval defaults to them
PROMPT_KEYS = ("history", "history_k", "system_prompt", "observation_format", "max_tokens_per_turn")


def trained_episode(model_dir: Path) -> dict[str, Any]:
    """The prompt-format settings a model was trained with (``{}`` when it was not exported by a run)."""
    f = model_dir / EPISODE_FILE
    if not f.is_file():
        return {}
    data = json.loads(f.read_text())
    return {k: data[k] for k in PROMPT_KEYS if k in data}


def model_eval_config(
    model: str | Path,
    env: str,
    seeds: list[int],
    *,
    env_kwargs: dict[str, Any] | None = None,
    temperature: float = 0.0,
    max_turns: int | None = None,
    max_tokens_per_turn: int | None = None,
    history_k: int | None = None,
    device: str = "cpu",
    threads: int | None = None,
    concurrency: int = 16,
    name: str | None = None,
    overrides: Iterable[str] = (),
    env_view: Mapping[str, Any] | None = None,
) -> EvalConfig:
    """The config of ``rockroll eval --model DIR --env ID --seeds A:B``: the hf engine on ``model``, one
    in-process env, one episode per seed (multi-turn: one action per turn, the env answering).

    Checked before anything loads, each with a one-line ValueError: ``model`` is a model directory,
    ``env`` is registered and accepts ``env_kwargs``. ``env_view``: a control plane's view of an env
    registered there (``id``, ``max_steps``; ``rockroll eval --url``): then it is not looked up here, and
    its kwargs are checked when its sessions open. ``max_turns`` None: the env's step limit.
    ``history_k`` None: full history; K: the system prompt and the last K exchanges. ``overrides``:
    dotted ``key=value`` pairs over the result (``episode.max_context_tokens=2048``).
    """
    path = Path(model)
    if not path.is_dir():
        raise ValueError(f"model directory {path} does not exist")
    if not (path / "config.json").is_file():
        raise ValueError(f"{path} is not a Hugging Face model directory (no config.json)")
    kwargs = dict(env_kwargs or {})
    if env_view is not None:
        env_id, limit = str(env_view["id"]), kwargs.get("max_steps", env_view.get("max_steps"))
    else:
        spec = envhub.spec(env)  # UnknownEnvError (a LookupError) names the nearest ids
        try:
            envhub.make(spec.id, **kwargs).close()
        except (TypeError, ValueError) as e:
            raise ValueError(str(e) if spec.id in str(e) else f"{spec.id}: {e}") from e
        env_id, limit = spec.id, kwargs.get("max_steps", spec.max_steps)
    turns = max_turns if max_turns is not None else (limit or 10)
    episode: dict[str, Any] = {**trained_episode(path), "temperature": temperature, "max_turns": turns}
    if max_tokens_per_turn is not None:
        episode["max_tokens_per_turn"] = max_tokens_per_turn
    if history_k is not None:
        episode.update(history="last_k", history_k=history_k)
    engine_args: dict[str, Any] = {"model_path": str(path), "device": device}
    if threads is not None:
        engine_args["num_threads"] = threads
    data = {
        "name": name or f"{path.name} on {env_id}",
        "engine": {"kind": "hf", "args": engine_args},
        "source": {"kind": "local"},
        "envs": [{"env": env_id, "seeds": list(seeds), "episodes": len(seeds), "kwargs": kwargs}],
        "episode": episode,
        "concurrency": concurrency,
    }
    return parse_config(EvalConfig, apply_overrides(data, list(overrides)))
