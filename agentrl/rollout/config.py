"""Typed configuration of env managers and the rollout scheduler (YAML maps 1:1 onto these).

All are :class:`~rockroll.envs.config.ConfigModel`\\ s (the one config dialect), and each setting
is declared here once: :class:`EpisodeConfig` (how one episode is played), :class:`BatchConfig`
(the shape and pacing of one batch) and :class:`SchedulerConfig` (a batch plus the envs it draws
from, the seeds and the episode settings). The trainer's ``rollout:`` section nests the first two
as ``rollout.episode`` and ``rollout.scheduler`` and adds only what a training run owns (the env
mix, evaluation seeds, the plan mode).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from rockroll.agentrl.models.chat import HistoryMode, ObservationFormat
from rockroll.agentrl.tools import TOOL_PARSERS
from rockroll.envs.config import ConfigModel, OneOf

__all__ = ["AdaptiveTimeoutConfig", "BatchConfig", "EpisodeConfig", "SchedulerConfig", "check_hedging"]


class AdaptiveTimeoutConfig(ConfigModel):
    """Per-task timeouts of sandboxed test runs (:mod:`rockroll.agentrl.rewards.adaptive_timeout`):
    ``T = min(max(t_min_s, lam * T_anchor), t_max_s)``, ``T_anchor`` the task's longest correct run so far."""

    t_min_s: float = Field(2.0, gt=0, description="shortest timeout once a task has a correct run")
    lam: float = Field(2.0, gt=0, description="margin: the timeout is lam times the task's longest correct run")
    t_max_s: float = Field(
        60.0,
        gt=0,
        description="the fixed limit: before a task's first correct run, and the cap (the env caps it again at "
        "a task's own test_timeout_s, 60 for the generated SWE tasks)",
    )
    env_ids: list[str] = Field(
        default_factory=list,
        description="envs whose resets get the test_timeouts option (empty: every env; envs that reject "
        "unknown reset options, like WebShop-v0, must be left out)",
    )

    @model_validator(mode="after")
    def _check(self) -> AdaptiveTimeoutConfig:
        if self.t_min_s > self.t_max_s:
            raise ValueError(f"t_min_s ({self.t_min_s}) must not exceed t_max_s ({self.t_max_s})")
        return self

    def applies(self, env_id: str) -> bool:
        """Whether episodes of ``env_id`` get adaptive timeouts."""
        return not self.env_ids or env_id in self.env_ids


class EpisodeConfig(ConfigModel):
    """How one env manager plays one episode."""

    max_turns: int = Field(10, ge=1, description="model turns per episode; the episode is truncated after that many")
    max_tokens_per_turn: int = Field(
        64, ge=1, description="response budget of one turn in tokens (max_new_tokens; a plan rollout: of its response)"
    )
    temperature: float = Field(1.0, ge=0, description="sampling temperature (0: greedy)")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling mass")
    history: HistoryMode = Field(
        "full",
        description="full: every turn extends the previous prompt (concat layout); "
        "last_k: system + the last history_k exchanges (per_turn layout)",
    )
    history_k: int = Field(2, ge=0, description="exchanges kept in last_k mode")
    system_prompt: Literal["env", "none"] = Field(
        "env", description="env: the env's instructions as the system message; none: no system message"
    )
    observation_format: ObservationFormat = Field(
        "raw",
        description="raw: observations as the env renders them; cells: the characters of each line spaced apart "
        "(one token per grid cell, which helps tiny models on grid envs)",
    )
    tool_call_parser: Annotated[str, OneOf(TOOL_PARSERS)] = Field(
        "hermes",
        description="tool envs only: the tool-call style the model writes its calls in (hermes: Qwen2.5's "
        "<tool_call> blocks; llama3_json; mistral): the warm start renders the expert's calls in it",
    )
    max_context_tokens: int | None = Field(
        None,
        description="prompt + response budget; exceeding it ends the episode as an agent failure (null: unlimited)",
    )
    episode_timeout_s: float = Field(
        600.0, gt=0, description="deadline of the whole episode, sandbox start and retries included"
    )
    start_timeout_s: float = Field(120.0, gt=0, description="most seconds to open an env (sandbox start)")
    step_timeout_s: float = Field(60.0, gt=0, description="most seconds for one reset or step")
    generation_timeout_s: float = Field(300.0, gt=0, description="most seconds for one response")
    max_retries: int = Field(2, ge=0, description="fresh starts after an infra failure before the episode is masked")
    lockstep: bool | Literal["auto"] = Field(
        False,
        description="play the turns of all live episodes in rounds: one batched generation and one batch of env "
        "steps per round (fast for short prompts such as history_k 0; a round waits for its slowest step); "
        "false: each episode at its own pace; auto: lockstep when history is last_k with history_k 0",
    )
    restrict_answers: bool = Field(
        True,
        description="on an env that declares its action set (EnvSpec.action_set: FrozenLake's moves), sample only "
        "those full answers (<answer>X</answer> + end of turn; the trainer's logprobs use the same restricted "
        "distribution) with an engine that can (hf); false: sample freely",
    )
    restrict_tool_calls: bool = Field(
        False,
        description="on a tool env, sample only turns whose tool calls parse, name a declared tool and fit its "
        "parameters schema (a grammar, rockroll.agentrl.engines.tool_grammar; the trainer's logprobs use the same "
        "restriction); hf engine and the hermes tool_call_parser only",
    )
    max_invalid_actions: int | None = Field(
        None,
        ge=1,
        description="consecutive invalid actions that end the episode (truncated, tagged as the agent's failure; "
        "null: no cap)",
    )
    reward_workers: int | None = Field(
        None,
        ge=1,
        description="most threads computing rewards at once, apart from the env threads (the pool grows to it as "
        "rewards queue up; null: min(32, CPUs + 4)); async reward functions run on the event loop",
    )
    reward_timeout_s: float | None = Field(
        None,
        gt=0,
        description="most seconds for one episode's reward, queueing included; a slower reward is an infra failure "
        "of stage reward (masked, not retried) (null: no limit)",
    )
    adaptive_reward_timeout: AdaptiveTimeoutConfig | None = Field(
        None,
        description="per-task timeouts of the env's test runs (reset option test_timeouts, SWE-v0): "
        "min(max(t_min_s, lam * longest correct run), t_max_s); a run past it scores 0 (null: the env's own limit)",
    )

    @model_validator(mode="after")
    def _check(self) -> EpisodeConfig:
        if self.lockstep == "auto":  # resolved once: code reads a bool
            self.lockstep = self.history == "last_k" and self.history_k == 0
        if self.restrict_tool_calls and self.tool_call_parser != "hermes":
            raise ValueError(
                f"restrict_tool_calls knows the hermes tool-call style only, not {self.tool_call_parser!r}: set "
                "tool_call_parser to hermes or restrict_tool_calls to false"
            )
        if self.max_context_tokens is not None and self.max_context_tokens <= self.max_tokens_per_turn:
            raise ValueError(
                f"max_context_tokens ({self.max_context_tokens}) must exceed max_tokens_per_turn "
                f"({self.max_tokens_per_turn}); raise it or set it to null"
            )
        return self


class BatchConfig(ConfigModel):
    """The shape and pacing of one rollout batch: ``num_env_groups`` groups of ``group_size`` episodes."""

    num_env_groups: int = Field(8, ge=1, description="groups delivered per batch")
    group_size: int = Field(8, ge=1, description="episodes delivered per group (all on the group's seed)")
    group_size_redundancy: int = Field(
        0,
        ge=0,
        description="extra episodes started per group; the first group_size to finish win, stragglers are cancelled",
    )
    extra_groups: int = Field(
        0,
        ge=0,
        description="extra groups started per batch; the first num_env_groups complete groups win "
        "(a group that cannot complete is replaced)",
    )
    max_group_launches: int | None = Field(
        None, description="most groups one batch may start, a stop against endless failures (null: 4x the groups)"
    )
    max_concurrent_episodes: int | None = Field(
        None, ge=1, description="episodes running at once (null: all of a batch; a plan rollout: 8 env threads)"
    )
    tail: Literal["cancel", "carry"] = Field(
        "cancel",
        description="the groups still running when a batch has its num_env_groups: cancel them, or carry them "
        "into the next batch, where they keep playing and take the place of new groups (tail batching: no "
        "batch waits for the long tail and no episode is thrown away; needs async_generation_ratio >= 1)",
    )
    max_carry_batches: int = Field(
        1, ge=1, description="batches a carried group may run on before it is cancelled (bounds staleness)"
    )
    hedge_quantile: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="hedge an episode whose env call has run longer than this quantile of its env's recent calls: "
        "a copy starts on another sandbox and the first result wins (null: no hedging; episode mode only)",
    )
    hedge_min_s: float = Field(1.0, ge=0, description="a call is stalled only after at least this many seconds")
    hedge_max_share: float = Field(0.1, gt=0, le=1, description="most episodes of a batch that may be hedged")
    hedge_min_samples: int = Field(20, ge=1, description="env calls timed before an env's quantile is trusted")
    async_generation_ratio: int = Field(
        0,
        ge=0,
        description="rollout may run ahead of training by at most this many weight versions; "
        "older samples are dropped (0: on-policy)",
    )
    weight_sync: Literal["turn", "batch"] = Field(
        "turn",
        description="when new weights reach an engine that runs ahead (async_generation_ratio >= 1): turn: as soon "
        "as the update ends, between two turns (which turns use which weights depends on timing); batch: only "
        "between two batches, so each batch is generated by one weight version (ratio 1: exactly one behind the "
        "trainer), whatever the machine's load",
    )

    @model_validator(mode="after")
    def _check_batch(self) -> BatchConfig:
        if self.tail == "carry" and self.async_generation_ratio < 1:
            raise ValueError(
                "tail: carry needs async_generation_ratio >= 1 (a carried group has turns from older weights, "
                "which an on-policy run drops as stale)"
            )
        if self.weight_sync == "batch" and (self.async_generation_ratio < 1 or self.tail == "carry"):
            raise ValueError(
                "weight_sync: batch needs async_generation_ratio >= 1 (on-policy batches are one version already) "
                "and tail: cancel (a carried group spans batches)"
            )
        if self.max_group_launches is not None and self.max_group_launches < self.num_env_groups:
            raise ValueError("max_group_launches must be >= num_env_groups or null (4x the groups)")
        return self

    @property
    def group_launch_limit(self) -> int:
        return self.max_group_launches or 4 * (self.num_env_groups + self.extra_groups)


def check_hedging(batch: BatchConfig, episode: EpisodeConfig) -> None:
    """Hedging needs episode mode (a lockstep round cannot hand one episode's call to another sandbox)."""
    if batch.hedge_quantile is not None and episode.lockstep:
        raise ValueError("hedging (hedge_quantile) needs episode mode: set episode.lockstep false or hedge null")


class SchedulerConfig(BatchConfig):
    """One rollout batch of the scheduler (its :class:`BatchConfig` fields), the envs its groups are drawn from,
    one seed per group, and how each episode is played."""

    env_ids: list[str] = Field(
        default_factory=lambda: ["FrozenLake-v0"],
        description="envs the groups are drawn from: cycled group by group, or mixed by env_ratios",
    )
    env_kwargs: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="constructor kwargs per env id, e.g. {FrozenLake-v0: {size: 4}}, or per tag (an entry keyed "
        "by an env's tag wins: one env id twice with different kwargs)",
    )
    env_tags: list[str] = Field(
        default_factory=list,
        description="metric tag of each env_ids entry (env/<tag>/...), distinct (empty: the env id)",
    )
    env_ratios: list[float] = Field(
        default_factory=list,
        description="sampling ratio of each env_ids entry, e.g. [2, 1]: every batch's groups follow the ratio "
        "(deterministic: a stream of group slots that keeps every env within one group of its share over the run; "
        "a failed group is replaced by one of the same env) (empty: cycle group by group)",
    )
    seed: int = Field(0, description="seeds the groups' env seeds and every turn's sampling")
    first_batch: int = Field(
        0, ge=0, description="index of the first batch (a resumed run continues the seed stream where it stopped)"
    )
    max_env_seed: int = Field(
        2**31 - 1, ge=1, description="group env seeds are drawn below this (keep held-out seeds above it)"
    )
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig, description="how each episode is played")

    @model_validator(mode="after")
    def _check(self) -> SchedulerConfig:
        if not self.env_ids:
            raise ValueError("env_ids must name at least one env, e.g. ['FrozenLake-v0']")
        n = len(self.env_ids)
        if self.env_tags:
            if len(self.env_tags) != n:
                raise ValueError(f"env_tags needs one tag per env_ids entry ({n}), got {len(self.env_tags)}")
            bad = [t for t in self.env_tags if not t or "/" in t]
            if bad or len(set(self.env_tags)) != n:
                raise ValueError(f"env_tags must be distinct, non-empty and without '/', got {self.env_tags}")
        if self.env_ratios:
            if len(self.env_ratios) != n:
                raise ValueError(f"env_ratios needs one ratio per env_ids entry ({n}), got {len(self.env_ratios)}")
            if any(not r > 0 for r in self.env_ratios):
                raise ValueError(f"env_ratios must all be > 0 (leave an env out instead), got {self.env_ratios}")
        check_hedging(self, self.episode)
        return self

    def tag(self, i: int) -> str:
        """The metric tag of env entry ``i`` (its env id when no tags are set)."""
        return self.env_tags[i] if self.env_tags else self.env_ids[i]

    def kwargs(self, i: int) -> dict[str, Any]:
        """Constructor kwargs of env entry ``i`` (keyed by its tag, else by its env id)."""
        if self.env_tags and self.env_tags[i] in self.env_kwargs:
            return dict(self.env_kwargs[self.env_tags[i]])
        return dict(self.env_kwargs.get(self.env_ids[i], {}))
