"""Typed configuration of ``rockroll eval``; the YAML file maps 1:1 onto these dataclasses.

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

Unknown keys are errors (with the accepted keys listed), and every ``__post_init__`` says what to
change when a value is invalid.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rockroll.agentrl.config import EpisodeConfig

__all__ = ["EngineConfig", "SourceConfig", "EvalEnvConfig", "EvalConfig", "from_dict", "load_eval_config"]

T = TypeVar("T")
SOURCE_KINDS = ("local", "sandbox", "remote")


@dataclass
class EngineConfig:
    """Which LLM engine plays.

    Attributes:
        kind: ``random``, ``hf``, ``openai``, ``vllm`` or ``sglang`` (see ``agentrl.engines``).
        args: keyword arguments of the engine (e.g. ``model_path`` for hf, ``base_url`` and
            ``tokenizer`` for openai, ``actions`` and ``latency`` for random).
    """

    kind: str = "random"
    args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from rockroll.agentrl.engines import ENGINE_KINDS

        if self.kind not in ENGINE_KINDS:
            raise ValueError(f"engine.kind must be one of {', '.join(sorted(ENGINE_KINDS))}, got {self.kind!r}")
        if not isinstance(self.args, dict):
            raise ValueError("engine.args must be a mapping of keyword arguments, e.g. {model_path: /tmp/tiny}")


@dataclass
class SourceConfig:
    """Where the envs run.

    Attributes:
        kind: ``local`` (in this process), ``sandbox`` (sessions in a local SandboxManager, warm
            sandboxes reused) or ``remote`` (sessions of a ``rockroll serve`` control plane).
        backend: sandbox backend (``process``, ``docker`` or ``auto``) for ``sandbox``.
        max_sandboxes: most sandboxes the local manager starts.
        url: control-plane URL for ``remote``.
        token_env: environment variable holding the API token for ``remote``.
    """

    kind: str = "local"
    backend: str = "process"
    max_sandboxes: int = 2
    url: str = "http://127.0.0.1:8080"
    token_env: str = "ROCKROLL_TOKEN"

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"source.kind must be one of {', '.join(SOURCE_KINDS)}, got {self.kind!r}")
        if self.backend not in ("process", "docker", "auto"):
            raise ValueError(f"source.backend must be process, docker or auto, got {self.backend!r}")
        if self.max_sandboxes < 1:
            raise ValueError(f"source.max_sandboxes must be >= 1, got {self.max_sandboxes}")


@dataclass
class EvalEnvConfig:
    """One entry of ``envs``: an env id or a tag (all envs with that tag), N episodes each.

    Attributes:
        env: env id (``FrozenLake-v0``); give exactly one of ``env`` and ``tag``.
        tag: registry tag (``grid``); expands to every env carrying it.
        episodes: episodes per env, on seeds ``seed, seed+1, ...``.
        kwargs: env constructor kwargs.
    """

    env: str = ""
    tag: str = ""
    episodes: int = 10
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if bool(self.env) == bool(self.tag):
            raise ValueError(
                f"each envs entry needs exactly one of 'env' or 'tag', got env={self.env!r} tag={self.tag!r}"
            )
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes} (for {self.env or self.tag})")


@dataclass
class EvalConfig:
    """A whole evaluation.

    Attributes:
        name: label of the report.
        engine: the model.
        source: where envs run.
        envs: what to play.
        episode: how episodes are played (turns, tokens, temperature, timeouts, retries).
        seed: first env seed of every env.
        concurrency: episodes played at once.
        output_dir: where ``report.json`` and ``report.md`` go (None: not written).
    """

    name: str = "eval"
    engine: EngineConfig = field(default_factory=EngineConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    envs: list[EvalEnvConfig] = field(default_factory=lambda: [EvalEnvConfig(env="FrozenLake-v0")])
    episode: EpisodeConfig = field(default_factory=lambda: EpisodeConfig(temperature=0.0))
    seed: int = 1000
    concurrency: int = 16
    output_dir: str | None = None

    def __post_init__(self) -> None:
        if not self.envs:
            raise ValueError("envs must list at least one entry, e.g. [{env: FrozenLake-v0, episodes: 10}]")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")


_NESTED: dict[str, Any] = {"engine": EngineConfig, "source": SourceConfig, "episode": EpisodeConfig}


def from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from ``data``; unknown keys raise ValueError listing the known ones."""
    if not isinstance(data, dict):
        raise ValueError(f"{where or cls.__name__} must be a mapping, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} in {where or 'the config'}; known: {', '.join(sorted(names))}"
        )
    values = dict(data)
    for key, sub in _NESTED.items():
        if key in values and key in names and isinstance(values[key], dict):
            values[key] = from_dict(sub, values[key], key)
    if cls is EvalConfig and "envs" in values:
        if not isinstance(values["envs"], list):
            raise ValueError("envs must be a list of {env: ID, episodes: N} or {tag: TAG, episodes: N}")
        values["envs"] = [
            e if isinstance(e, EvalEnvConfig) else from_dict(EvalEnvConfig, e, f"envs[{i}]")
            for i, e in enumerate(values["envs"])
        ]
    return cls(**values)


def load_eval_config(path: str | Path) -> EvalConfig:
    """Read a YAML file into an :class:`EvalConfig` (ValueError on bad content)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path} is not valid YAML: {e}") from e
    return from_dict(EvalConfig, data)
