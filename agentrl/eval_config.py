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

Loaded by the one config loader (:mod:`rockroll.agentrl.config_loader`): unknown keys, wrong types
and bad choices raise :class:`~rockroll.agentrl.config_loader.ConfigError` naming the dotted key
(``envs.0.episodes``) and what it accepts; ``key=value`` overrides work as for ``rockroll train``.
The choices of ``engine.kind``, ``source.kind`` and ``source.backend`` are their registries' names.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from rockroll.agentrl.config import EpisodeConfig
from rockroll.agentrl.config_loader import ConfigModel, OneOf, load_config, parse_config
from rockroll.agentrl.engines import ENGINE_KINDS
from rockroll.agentrl.env_source import ENTRY_POINT_GROUP, SOURCE_KINDS
from rockroll.sandbox.backends import backend_names

__all__ = ["EngineConfig", "SourceConfig", "EvalEnvConfig", "EvalConfig", "from_dict", "load_eval_config"]


def source_kinds() -> tuple[str, ...]:
    """Registered env-source kinds, plus those an entry point will register when first asked for."""
    return tuple(dict.fromkeys([*SOURCE_KINDS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))]))


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
        "remote: sessions of a `rockroll serve` control plane",
    )
    backend: Annotated[str, OneOf(backend_names)] = Field("process", description="sandbox backend (kind sandbox)")
    max_sandboxes: int = Field(2, ge=1, description="most sandboxes the local manager starts (kind sandbox)")
    url: str = Field("http://127.0.0.1:8080", description="control-plane URL (kind remote)")
    token_env: str = Field("ROCKROLL_TOKEN", description="environment variable holding the API token (kind remote)")


class EvalEnvConfig(ConfigModel):
    """One entry of ``envs``: an env id or a tag (all envs with that tag), N episodes each."""

    env: str = Field("", description="env id (FrozenLake-v0); give exactly one of env and tag")
    tag: str = Field("", description="registry tag (grid); expands to every env carrying it")
    episodes: int = Field(10, ge=1, description="episodes per env, on seeds seed, seed+1, ...")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="env constructor kwargs")

    @model_validator(mode="after")
    def _check(self) -> EvalEnvConfig:
        if bool(self.env) == bool(self.tag):
            raise ValueError(
                f"each envs entry needs exactly one of 'env' or 'tag', got env={self.env!r} tag={self.tag!r}"
            )
        return self


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
    """Validate ``data`` into ``cls`` (:func:`~rockroll.agentrl.config_loader.parse_config`)."""
    return parse_config(cls, data)


def load_eval_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> EvalConfig:
    """Read a YAML file (plus ``key=value`` overrides) into an :class:`EvalConfig` (ConfigError on bad content)."""
    return load_config(EvalConfig, path, overrides)
