"""Typed configuration of env managers and the rollout scheduler (YAML maps 1:1 onto these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EpisodeConfig", "RolloutConfig"]


@dataclass
class EpisodeConfig:
    """How one env manager plays one episode.

    Attributes:
        max_turns: model turns per episode; the episode is ``truncated`` after that many.
        max_tokens_per_turn: response budget of one turn (``max_new_tokens``).
        temperature: sampling temperature (0: greedy).
        top_p: nucleus sampling mass.
        history: ``full`` (every turn extends the previous prompt; ``concat`` layout) or
            ``last_k`` (system + last ``history_k`` exchanges; ``per_turn`` layout).
        history_k: exchanges kept in ``last_k`` mode.
        max_context_tokens: prompt + response budget; exceeding it ends the episode as an agent
            failure (None: unlimited).
        episode_timeout_s: deadline of the whole episode, sandbox start and retries included.
        start_timeout_s: most seconds to open an env (sandbox start).
        step_timeout_s: most seconds for one ``reset`` or ``step``.
        generation_timeout_s: most seconds for one response.
        max_retries: fresh starts after an infra failure before the episode is masked.
    """

    max_turns: int = 10
    max_tokens_per_turn: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    history: str = "full"
    history_k: int = 2
    max_context_tokens: int | None = None
    episode_timeout_s: float = 600.0
    start_timeout_s: float = 120.0
    step_timeout_s: float = 60.0
    generation_timeout_s: float = 300.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_tokens_per_turn < 1:
            raise ValueError(
                "max_turns and max_tokens_per_turn must be >= 1 (try max_turns: 10, max_tokens_per_turn: 64)"
            )
        if self.history not in ("full", "last_k"):
            raise ValueError(f"history must be 'full' or 'last_k', got {self.history!r}")
        if self.history_k < 0:
            raise ValueError(f"history_k must be >= 0, got {self.history_k}")
        if self.max_context_tokens is not None and self.max_context_tokens <= self.max_tokens_per_turn:
            raise ValueError(
                f"max_context_tokens ({self.max_context_tokens}) must exceed max_tokens_per_turn "
                f"({self.max_tokens_per_turn}); raise it or set it to null"
            )
        for name in ("episode_timeout_s", "start_timeout_s", "step_timeout_s", "generation_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")


@dataclass
class RolloutConfig:
    """One rollout batch: ``num_env_groups`` groups of ``group_size`` episodes, one seed per group.

    Attributes:
        env_ids: envs the groups are drawn from, cycled group by group.
        env_kwargs: constructor kwargs per env id (e.g. ``{"FrozenLake-v0": {"size": 4}}``).
        num_env_groups: groups delivered per batch.
        group_size: episodes delivered per group (all on the group's seed).
        group_size_redundancy: extra episodes started per group; the first ``group_size`` to
            finish win, the stragglers are cancelled.
        extra_groups: extra groups started per batch; the first ``num_env_groups`` complete groups
            win. A group that cannot complete (too many masked episodes) is replaced by a new one.
        max_group_launches: most groups one batch may start (a stop against endless failures).
        max_concurrent_episodes: episodes running at once (None: all of a batch).
        async_generation_ratio: rollout may run ahead of training by at most this many weight
            versions; samples older than that are dropped (0: on-policy).
        seed: seeds the groups' env seeds.
        episode: how each episode is played.
    """

    env_ids: list[str] = field(default_factory=lambda: ["FrozenLake-v0"])
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    num_env_groups: int = 8
    group_size: int = 8
    group_size_redundancy: int = 0
    extra_groups: int = 0
    max_group_launches: int | None = None
    max_concurrent_episodes: int | None = None
    async_generation_ratio: int = 0
    seed: int = 0
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)

    def __post_init__(self) -> None:
        if isinstance(self.episode, dict):
            self.episode = EpisodeConfig(**self.episode)
        if not self.env_ids:
            raise ValueError("env_ids must name at least one env, e.g. ['FrozenLake-v0']")
        if self.num_env_groups < 1 or self.group_size < 1:
            raise ValueError("num_env_groups and group_size must be >= 1")
        if self.group_size_redundancy < 0 or self.extra_groups < 0:
            raise ValueError("group_size_redundancy and extra_groups must be >= 0 (0 disables redundancy)")
        if self.async_generation_ratio < 0:
            raise ValueError(f"async_generation_ratio must be >= 0 (0: on-policy), got {self.async_generation_ratio}")
        if self.max_concurrent_episodes is not None and self.max_concurrent_episodes < 1:
            raise ValueError("max_concurrent_episodes must be >= 1 or null (no limit)")
        if self.max_group_launches is not None and self.max_group_launches < self.num_env_groups:
            raise ValueError("max_group_launches must be >= num_env_groups or null (4x the groups)")

    @property
    def group_launch_limit(self) -> int:
        return self.max_group_launches or 4 * (self.num_env_groups + self.extra_groups)
