"""The rollout section of the training config (``rollout:``): :class:`RolloutConfig` and the envs of a mix.

Split from :mod:`rockroll.trainer.config`, which re-exports every name here (import them from there);
it also holds :func:`f`, the field helper every section of the training config uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, ValidationInfo, model_validator

import rockroll.envhub as envhub
from rockroll.agentrl.engines.config import EngineConfig, HFEngineConfig
from rockroll.agentrl.rollout.config import BatchConfig, EpisodeConfig, check_hedging
from rockroll.agentrl.rollout.env_mix import ratio_slots
from rockroll.envs.config import ConfigModel, OneOf, with_defaults
from rockroll.envs.experts import EXPERTS, is_known_expert
from rockroll.sandbox.backends import backend_names
from rockroll.trainer.rollout.plan import PlanConfig
from rockroll.trainer.rollout.rlvr_config import RLVRConfig

__all__ = ["EnvShareConfig", "RolloutConfig", "TrainEpisodeConfig", "default_tag", "expert_of", "f"]


def f(default: Any, description: str, **constraints: Any) -> Any:
    """A field with its description (lists and dicts get a factory, so no default is shared)."""
    if isinstance(default, (list, dict)):
        return Field(default_factory=lambda: type(default)(default), description=description, **constraints)
    return Field(default, description=description, **constraints)


def expert_of(env_id: str) -> Any:
    """The expert entry point on ``env_id``'s spec; ``""`` when the id is not registered here (it may be a custom
    env registered inside its sandbox only: the warm start then reports it)."""
    try:
        return envhub.spec(env_id).expert
    except Exception:  # noqa: BLE001 - unknown here; checked again when the demos are built
        return ""


def default_tag(env_id: str) -> str:
    """The metric tag of an env without one: its name before the version, without the owner's namespace
    (``FrozenLake-v0`` -> ``FrozenLake``, ``alice/Nim-v0`` -> ``Nim``): a tag holds no '/'."""
    return env_id.rsplit("/", 1)[-1].split("-")[0]


def _known_expert(target: str, info: ValidationInfo) -> str:
    """An expert override must be a registered expert or the expert the env's spec declares, compared as text:
    nothing a config names is imported here (a job's config is checked in the control plane), and the answer
    is the same whether or not a module of that name exists."""
    if target and not is_known_expert(target, expert_of(str(info.data.get("env_id", "")))):
        raise ValueError(
            f"expert {target!r} is not a registered expert: name one of {', '.join(EXPERTS)} "
            "(rockroll.envs.experts.register_expert adds one), the 'module:factory' the env's spec declares, "
            "or leave it empty for the env's own expert"
        )
    return target


ExpertName = Annotated[str, AfterValidator(_known_expert)]


class EnvShareConfig(ConfigModel):
    """One env of a training mix (``rollout.envs``)."""

    env_id: str = f("FrozenLake-v0", "envhub id of the env")
    env_kwargs: dict[str, Any] = f({}, "keyword arguments for envhub.make (e.g. {is_slippery: true})")
    ratio: float = f(1.0, "share of each batch's groups, relative to the other entries' (2 and 1: two thirds)", gt=0)
    tag: str = f("", "metric tag: env/<tag>/..., eval/<tag>/... (empty: the env id before its version)")
    expert: ExpertName = f(
        "", "the warm start's demonstrator, 'module:factory' (empty: the expert the env's spec names)"
    )


_SAME_NAME_EPISODE = ("max_turns", "max_invalid_actions", "max_context_tokens", "system_prompt", "observation_format",
                      "temperature", "top_p", "reward_timeout_s", "adaptive_reward_timeout", "episode_timeout_s",
                      "start_timeout_s", "step_timeout_s", "generation_timeout_s", "max_retries")  # fmt: skip
_SAME_NAME_SCHEDULER = ("group_size", "group_size_redundancy", "extra_groups", "max_concurrent_episodes",
                        "async_generation_ratio", "tail", "max_carry_batches", "hedge_quantile")  # fmt: skip

# agentrl's EpisodeConfig with a training run's defaults. episode_timeout_s: a step waits for its slowest group, so
# this caps how long one stuck episode can stall training: one sandbox start at its limit plus 2 minutes of play,
# ~10x a healthy 20-turn episode of a 0.5B model on a GPU.
TrainEpisodeConfig = with_defaults(
    EpisodeConfig,
    "TrainEpisodeConfig",
    "agentrl's EpisodeConfig with a training run's defaults (rollout.episode).",
    max_turns=20,
    max_tokens_per_turn=24,
    history="last_k",
    history_k=2,
    lockstep="auto",
    max_invalid_actions=5,
    episode_timeout_s=240.0,
)


class RolloutConfig(ConfigModel):
    """The trainer's rollout section: the envs of the run and its evaluation seeds; how episodes are played
    (``episode``), how batches are shaped (``scheduler``) and the plan mode (``plan``) are the rollout's own
    models, nested."""

    env_id: str = f("FrozenLake-v0", "envhub id of the training env (one env; rollout.envs mixes several)")
    env_kwargs: dict[str, Any] = f({}, "keyword arguments for envhub.make (e.g. {is_slippery: false})")
    expert: ExpertName = f(
        "",
        "the multi-turn warm start's demonstrator: a registered expert (e.g. alfworld_searcher, ALFWorld's expert "
        "that acts only on what the agent saw; rockroll.envs.experts.register_expert adds one) or the "
        "'module:factory' the env's spec declares; empty: the expert the env's spec names",
    )
    envs: list[EnvShareConfig] = f(
        [],
        "several envs mixed by ratio, e.g. [{env_id: FrozenLake-v0, ratio: 2}, {env_id: Sokoban-v0, ratio: 1}] "
        "(multiturn): each batch's groups follow the ratios, metrics and evaluation per tag, the warm start draws "
        "demos from each env's expert in proportion; empty: the one env of env_id/env_kwargs. With mode: rlvr, "
        "envs played beside the dataset's prompts, their groups set against rollout.rlvr.ratio",
    )
    mode: Literal["plan", "multiturn", "rlvr"] = f(
        "multiturn",
        "multiturn: one action per turn, the env answering each turn (agentrl scheduler); plan: one response holds "
        "the whole action plan, executed open loop (cheap, but blind to the env's answers); rlvr: one answer per "
        "dataset prompt, scored by a verifiable reward (rollout.rlvr), mixed by ratio with the multi-turn envs of "
        "rollout.envs, if any",
    )
    sandbox: Annotated[str, OneOf(lambda: ("none", *backend_names()))] = f(
        "none",
        "none: env in-process | a sandbox backend (process, docker, auto...): env sessions in sandboxes of a manager",
    )
    sandbox_sessions: int = f(
        16,
        "env sessions one sandbox hosts (rollout.sandbox backends): each round of lock-step turns is one round trip "
        "per sandbox, so light envs (FrozenLake) go faster packed into few sandboxes, heavy ones in many",
        ge=1,
        le=4096,
    )
    select_episodes: int = f(
        0,
        "validation episodes (seeds apart from training and eval) that pick the best checkpoint, "
        "exported as export/final (0: the last step is final; multiturn). Where the env has an exact "
        "evaluator (slippery FrozenLake, history_k 0: trainer/evaluation/exact.py) these are maps scored "
        "exactly; otherwise played greedy episodes, of which 1,000 or more tell steps apart",
        ge=0,
    )
    select_background: bool = f(
        True,
        "score exact validation (where the env has an exact evaluator and restricted answers with one choice: "
        "FrozenLake) on a CPU copy of the policy in a background thread while training goes on, instead of "
        "through the rollout engine at the step (trainer/evaluation/background.py)",
    )
    cap_hit_warn: float = f(
        0.2,
        "warn (progress line, report) when more than this share of a step's answers hit max_tokens_per_turn "
        "(rollout/cap_hit_share: a format collapse, the end-of-turn token lost)",
        ge=0,
        le=1,
    )
    eval_episodes: int = f(64, "held-out episodes for greedy evaluation (per env of a mix)", ge=0)
    eval_every: int = f(10, "evaluate every N steps (0: only at start and end)", ge=0)
    select_every: int | None = f(
        None,
        "validate (select_episodes) every N steps, apart from the played evaluation (None: with each evaluation; "
        "0: only at the end). An exact validator costs a fraction of a played evaluation, so it can run often "
        "while played evaluation runs only at the start and the end (eval_every: 0)",
        ge=0,
    )
    eval_seed_offset: int = f(1_000_000, "held-out seeds start here (training seeds never reach it)", ge=0)
    train_seeds: int = f(
        0,
        "0: training maps drawn from all seeds below eval_seed_offset; N: only seeds 0..N-1 (small fixed task sets)",
        ge=0,
    )

    episode: TrainEpisodeConfig = Field(
        default_factory=TrainEpisodeConfig,
        description="how each episode is played (agentrl's EpisodeConfig; plan mode reads its sampling, response "
        "length, timeouts and retries)",
    )
    scheduler: BatchConfig = Field(
        default_factory=BatchConfig,
        description="the shape and pacing of each step's batch (agentrl's BatchConfig; plan mode reads the group "
        "shape, async_generation_ratio and max_concurrent_episodes)",
    )
    plan: PlanConfig = Field(default_factory=PlanConfig, description="the plan rollout's own settings (mode: plan)")
    rlvr: RLVRConfig = Field(
        default_factory=RLVRConfig, description="single-turn RLVR's dataset, rewards and sampling (mode: rlvr)"
    )
    engine: EngineConfig = Field(
        default_factory=HFEngineConfig,
        description="the engine that generates every rollout and evaluation: kind (hf, vllm, sglang, openai) plus "
        "that kind's options, e.g. {kind: vllm, dtype: float32, weight_transport: bytes}; weights are synced to it "
        "after every update (rockroll.agentrl.engines.config)",
    )

    # keys of this section that moved into its nested models (an old key is a ConfigError naming the new one)
    moved_keys: ClassVar[Mapping[str, str]] = {
        **{k: f"episode.{k}" for k in _SAME_NAME_EPISODE},
        **{k: f"scheduler.{k}" for k in _SAME_NAME_SCHEDULER},
        "max_new_tokens": "episode.max_tokens_per_turn",
        "history_window": "episode.history (last_k, with episode.history_k: N; full: the whole conversation)",
        "turn_batching": "episode.lockstep (auto, true: lockstep, false: episode)",
        "groups_per_step": "scheduler.num_env_groups",
        "max_actions": "plan.max_actions",
        "prompt_style": "plan.prompt_style",
    }

    @model_validator(mode="after")
    def _check(self) -> RolloutConfig:
        if self.train_seeds == 0 and self.eval_seed_offset < 1:
            raise ValueError(
                "rollout.eval_seed_offset must be >= 1 when train_seeds is 0 (training seeds lie below it)"
            )
        if self.envs:
            self._check_envs()
        check_hedging(self.scheduler, self.episode)
        if self.mode == "rlvr":
            self._check_rlvr()
        return self

    def _check_rlvr(self) -> None:
        """RLVR's batch shape is its own; agentic envs (``envs``) may join it by ratio, played in sandboxes
        when ``sandbox`` names a backend (code rewards start their own)."""
        s = self.scheduler
        wrong = [
            ("rollout.sandbox", self.sandbox != "none" and not self.envs,
             "code rewards start their own process sandboxes (rollout.rlvr.rewards.routes.<tag>.options.sandboxes); "
             "rollout.sandbox places the sessions of rollout.envs"),
            ("rollout.scheduler.extra_groups", s.extra_groups > 0, "RLVR oversamples with rollout.rlvr.oversample"),
            ("rollout.scheduler.async_generation_ratio", s.async_generation_ratio > 0,
             "RLVR generates each batch on-policy (set it to 0)"),
        ]  # fmt: skip
        for key, bad, why in wrong:
            if bad:
                raise ValueError(f"{key} does not apply to rollout.mode: rlvr: {why}")
        if self.envs:
            rlvr_groups, env_groups = self.rlvr_env_groups()
            if not rlvr_groups or not env_groups:
                raise ValueError(
                    f"rollout.scheduler.num_env_groups ({s.num_env_groups}) split by rollout.rlvr.ratio "
                    f"({self.rlvr.ratio}) and the envs' ratios gives {rlvr_groups} dataset and {env_groups} env "
                    "groups; each side needs one: raise num_env_groups or bring the ratios closer"
                )

    def rlvr_env_groups(self) -> tuple[int, int]:
        """``(dataset groups, env groups)`` of each batch of an RLVR run with ``envs``: ``num_env_groups``
        split by ``rlvr.ratio`` against the envs' summed ratios (agentrl's ratio slots, so 3:1 of 8 is 6 + 2)."""
        n = self.scheduler.num_env_groups
        slots = ratio_slots([self.rlvr.ratio, self.env_ratio_sum], 0, n)
        return slots.count(0), slots.count(1)

    @property
    def env_ratio_sum(self) -> float:
        """The summed ratios of ``envs``: what ``rlvr.ratio`` is set against in an RLVR run beside envs."""
        return sum(e.ratio for e in self.envs)

    @property
    def plays_envs(self) -> bool:
        """Whether batches hold multi-turn env episodes (``multiturn``, or ``rlvr`` beside ``envs``)."""
        return self.mode == "multiturn" or (self.mode == "rlvr" and bool(self.envs))

    def _check_envs(self) -> None:
        """Tags filled in and distinct; env_id/env_kwargs left alone (or equal to the first entry, as a saved
        config writes them); plan mode plays one env."""
        for e in self.envs:
            e.tag = e.tag or default_tag(e.env_id)
        tags = [e.tag for e in self.envs]
        twice = sorted({t for t in tags if tags.count(t) > 1})
        if twice:
            raise ValueError(
                f"rollout.envs: tag {twice[0]!r} names more than one entry; give each entry its own tag "
                f"(e.g. tag: {twice[0].lower()}_b)"
            )
        if any("/" in t for t in tags):
            raise ValueError(f"rollout.envs: tags are metric names and cannot hold '/', got {tags}")
        first = self.envs[0]
        if {"env_id", "env_kwargs"} & self.model_fields_set and (self.env_id, self.env_kwargs) != (
            first.env_id,
            first.env_kwargs,
        ):
            raise ValueError(
                "rollout.env_id/env_kwargs describe one env and rollout.envs a mix: set one of them (to train on "
                "one env of the mix, keep that entry alone in rollout.envs, or set rollout.envs: [])"
            )
        self.env_id, self.env_kwargs = first.env_id, dict(first.env_kwargs)  # a saved config reads back equal
        if self.mode == "plan" and len(self.envs) > 1:
            raise ValueError(
                f"rollout.mode: plan plays one env, and rollout.envs lists {len(self.envs)} ({', '.join(tags)}): "
                "set rollout.mode: multiturn to mix envs, or keep one entry in rollout.envs"
            )

    def env_mix(self) -> list[EnvShareConfig]:
        """The envs of the run: ``envs``, or the one env of ``env_id``/``env_kwargs`` (ratio 1, default tag)."""
        if self.envs:
            return list(self.envs)
        return [
            EnvShareConfig(
                env_id=self.env_id, env_kwargs=dict(self.env_kwargs), tag=default_tag(self.env_id), expert=self.expert
            )
        ]

    @property
    def mixed(self) -> bool:
        """Whether the run mixes several envs."""
        return len(self.envs) > 1
