"""Typed training config: one model per YAML section (``model:``, ``rollout:``, ``algo:``...).

The dialect of every rockroll config (:mod:`rockroll.envs.config`): pydantic models with
``extra="forbid"``, ``Literal`` choices (or ``OneOf`` a registry: advantage estimators, policy
losses, sandbox backends), a description on every field (``rockroll train --help-config`` prints
them) and a default; checks spanning fields raise ``ValueError`` saying what to set instead.
Load with :func:`rockroll.trainer.config_io.load_config` (YAML plus ``key=value`` overrides). The rollout
section lives in :mod:`rockroll.trainer.rollout.config`; its names are re-exported here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from rockroll.envs.config import ConfigModel, OneOf
from rockroll.trainer.algos import KL_ESTIMATORS, LOSS_AGG_MODES, REWARD_NORMS
from rockroll.trainer.algos.estimators import advantage_estimator_names, get_advantage_estimator
from rockroll.trainer.algos.losses import policy_loss_names
from rockroll.trainer.rollout.config import (
    EnvShareConfig,
    RolloutConfig,
    TrainEpisodeConfig,
    default_tag,
    expert_of,
    f,
)

__all__ = [
    "ModelConfig",
    "EnvShareConfig",
    "RolloutConfig",
    "AlgoConfig",
    "OptimConfig",
    "SFTConfig",
    "WorkersConfig",
    "LoggingConfig",
    "CheckpointConfig",
    "TrainConfig",
    "TrainEpisodeConfig",
    "default_tag",
]


class ModelConfig(ConfigModel):
    path: str = f(
        "runs/tiny-model", "model directory (HF format); a tiny model is built there when `build_tiny` and missing"
    )
    build_tiny: bool = f(True, "build a tiny local Qwen2-shaped model at `path` if it does not exist")
    tiny_hidden_size: int = f(128, "width of the tiny model (when built)", ge=1)
    tiny_layers: int = f(2, "transformer blocks of the tiny model (when built)", ge=1)
    tiny_envs: list[str] = f(
        ["FrozenLake-v0", "SimpleSokoban-v0"],
        "envs whose text (prompts, observations, answers) trains the tiny model's tokenizer (when built)",
    )
    tiny_vocab_size: int = f(512, "the tiny tokenizer's BPE vocabulary (when built)", ge=300)
    tiny_tokenizer: Literal["bpe", "chars"] = f(
        "bpe",
        "the tiny tokenizer (when built): bpe (byte-level, tiny_vocab_size tokens) or chars (one token per character "
        "of the tiny envs' text: about 80 tokens for FrozenLake)",
    )
    tiny_chat_template: Literal["chatml", "compact", "hermes"] = f(
        "chatml",
        "the tiny tokenizer's chat template (when built): chatml (role names: 8 tokens around a user turn) or "
        "compact (one token after each message: shorter prompts, a cheaper prefill and update)",
    )
    tiny_answer_tokens: bool = f(
        True,
        "one token per whole answer of the tiny envs' listed actions (<answer>Down</answer>): right for fixed "
        "action sets; off for envs whose commands name objects (ALFWorld, WebShop)",
    )
    tiny_copy_steps: int = f(
        0,
        "steps of copy pretraining of the tiny model (when built): random token runs that repeat, the loss on the "
        "repeat, so that it can copy from its context as any real checkpoint can (a tool env's ids and numbers); "
        "about 500 form its induction heads (a minute on one CPU thread)",
        ge=0,
    )
    dtype: Literal["float32", "bfloat16", "float16"] = f("float32", "training weights' dtype")
    device: Literal["auto", "cpu", "cuda"] = f("auto", "auto: cuda when available, else cpu")
    gradient_checkpointing: bool = f(False, "recompute activations in backward (saves memory on big models)")


class AlgoConfig(ConfigModel):
    adv_estimator: Annotated[str, OneOf(advantage_estimator_names)] = f(
        "grpo",
        "advantage estimator (grpo_mean: no std, RAFT++/Dr.GRPO; gae needs the critic); more register with "
        "rockroll.trainer.algos.register_advantage_estimator",
    )
    pg_variant: Annotated[str, OneOf(policy_loss_names)] = f(
        "ppo",
        "policy loss (ppo: clip and dual clip; gspo: sequence ratio); more register with "
        "rockroll.trainer.algos.register_policy_loss",
    )
    clip_low: float = f(0.2, "ratio clip below 1 (PPO/GSPO; CISPO lower bound)", ge=0)
    clip_high: float = f(0.28, "ratio clip above 1 (asymmetric 'clip higher', DAPO)", ge=0)
    dual_clip: float = f(3.0, "dual-clip constant for negative advantages (> 1; 0 disables)")
    loss_agg_mode: Annotated[str, OneOf(LOSS_AGG_MODES)] = f("token-mean", "how token losses are averaged")
    kl_coef: float = f(0.0, "weight of the KL to the reference model (0: no reference model)", ge=0)
    kl_estimator: Annotated[str, OneOf(KL_ESTIMATORS)] = f("k3", "KL estimator (Schulman's k1, k2, k3)")
    use_kl_loss: bool = f(True, "True: KL as a loss term (GRPO); False: KL as a per-token reward penalty (PPO)")
    entropy_coef: float = f(0.0, "entropy bonus weight", ge=0)
    gamma: float = f(1.0, "discount for GAE / REINFORCE++ returns", ge=0, le=1)
    lam: float = f(0.95, "GAE lambda", ge=0, le=1)
    reward_clip: float = f(0.0, "clip rewards to [-c, c] (0: off)", ge=0)
    reward_scale: float = f(1.0, "multiply rewards by this")
    reward_norm: Annotated[str, OneOf(REWARD_NORMS)] = f("none", "reward normalisation before advantages")
    adv_whiten: bool = f(False, "whiten advantages over the batch")
    adv_clip: float = f(0.0, "clip advantages to [-c, c] (0: off)", ge=0)
    dynamic_sampling: bool = f(True, "drop groups whose rewards are all equal (no GRPO signal)")
    mask_truncated: bool = f(False, "drop responses cut at rollout.episode.max_tokens_per_turn")
    tis_cap: float = f(
        0.0,
        "truncated importance sampling: each token's loss times min(exp(trainer logprob - engine logprob), cap), "
        "the engine's logprobs (rollout.engine, as it sampled) being the behaviour policy; corrects the "
        "trainer-engine gap (actor/logprob_gap_*) and stale turns (0: off)",
        ge=0,
    )
    behav_cap: float = f(
        5.0,
        "decoupled_ppo: cap of the detached behaviour weight pi_prox/pi_behav (the trainer's logprobs before the "
        "update over the engine's, as it sampled the tokens: rollout.engine is the behaviour policy); a token "
        "whose engine logprob is missing (NaN) gets weight 1",
        gt=0,
    )
    turn_credit: Literal["episode", "gigpo", "fork", "gae"] = f(
        "episode",
        "multiturn: per-turn advantages (episode: the episode's group advantage on every turn; gigpo: plus a "
        "step advantage among turns of the group that acted from the same state; fork: G_t - V(s_t) with V from "
        "fork_k continuations forked at fork_turns turns per episode; gae: PPO with a critic, GAE over turns "
        "with step_gamma and lam, the critic's value of each turn's prompt); adv_estimator applies to plan mode",
    )
    fork_k: int = f(4, "multiturn fork: continuations per forked turn", ge=1)
    fork_turns: int = f(2, "multiturn fork: forked turns per episode (spread over the episode)", ge=1)
    credit_std_norm: bool = f(True, "multiturn: divide episode advantages by the group's std (GRPO) or not (Dr.GRPO)")
    step_gamma: float = f(0.95, "multiturn gigpo/fork: discount of per-turn returns", ge=0, le=1)
    step_weight: float = f(1.0, "multiturn gigpo: weight of the step advantage added to the episode advantage", ge=0)
    merge_identical_turns: bool = f(
        True,
        "multiturn with a history window: train identical turns with same-sign advantages as one weighted row "
        "(same loss and gradient, fewer forward passes)",
    )
    tag_balance: bool = f(
        False,
        "multi-turn rows of several tags (RLVR beside envs, env mixes): scale each tag's rows so every tag holds "
        "the same share of the loss's tokens (the loss is the mean of each tag's token mean), so a domain of long "
        "answers or many turns does not outweigh the others; needs loss_agg_mode token-mean",
    )
    value_clip: float = f(0.2, "critic value clip (0: off)", ge=0)
    critic_coef: float = f(1.0, "critic loss weight", ge=0)

    @model_validator(mode="after")
    def _check(self) -> AlgoConfig:
        if self.dual_clip and self.dual_clip <= 1:
            raise ValueError(f"algo.dual_clip must be > 1 (typical 3.0) or 0 to disable; got {self.dual_clip}")
        if self.tag_balance and self.loss_agg_mode != "token-mean":
            raise ValueError(
                f"algo.tag_balance weighs tokens, so it needs algo.loss_agg_mode: token-mean (got {self.loss_agg_mode!r})"
            )
        return self

    @property
    def needs_critic(self) -> bool:
        return self.turn_credit == "gae" or get_advantage_estimator(self.adv_estimator).needs_critic


class OptimConfig(ConfigModel):
    lr: float = f(1e-4, "actor learning rate (1e-4 was stable on tiny models; 5e-4 collapsed)")
    critic_lr: float = f(1e-4, "critic learning rate")
    weight_decay: float = f(0.0, "AdamW weight decay", ge=0)
    betas: list[float] = f([0.9, 0.999], "AdamW betas")
    schedule: Literal["constant", "linear", "cosine"] = f(
        "constant", "learning-rate schedule after warmup, over total_steps"
    )
    warmup_steps: int = f(0, "linear warmup optimizer steps", ge=0)
    grad_clip: float = f(1.0, "max gradient norm (0: off)", ge=0)
    ppo_epochs: int = f(1, "passes over each rollout batch", ge=1)
    mini_batch_size: int = f(0, "samples per optimizer step (0: the whole batch, one step per epoch)", ge=0)
    micro_batch_size: int = f(16, "samples per forward/backward (gradient accumulation)", ge=1)
    tag_steps: bool = f(
        False,
        "one optimizer step per row tag (dataset tag or env tag) in each minibatch, each tag with AdamW moments of "
        "its own: in a mixed run each tag's step is the size a run of that tag alone would take (rows of "
        "multi-turn runs; strategy torch)",
    )

    @model_validator(mode="after")
    def _check(self) -> OptimConfig:
        if self.lr <= 0 or self.critic_lr <= 0:
            raise ValueError("optim.lr and optim.critic_lr must be > 0 (try 1e-4)")
        if len(self.betas) != 2:
            raise ValueError("optim.betas must be two numbers, e.g. [0.9, 0.999]")
        return self


class SFTConfig(ConfigModel):
    steps: int = f(0, "supervised warm-start steps on expert demonstrations before RL (0: none)", ge=0)
    lr: float = f(1e-3, "SFT learning rate", gt=0)
    batch_size: int = f(32, "demonstrations per SFT step", ge=1)
    num_demos: int = f(2000, "expert demonstrations generated (seeds below rollout.eval_seed_offset)", ge=1)
    explore: float = f(
        0.0,
        "multi-turn demos: chance per turn of a uniformly random candidate action instead of the expert's "
        "(the warm start then keeps mass on every action for RL to explore)",
        ge=0.0,
        le=1.0,
    )
    label: Literal["taken", "expert"] = f(
        "taken",
        "multi-turn demos: each turn's target: taken (the action played, sft.explore's random ones included) or "
        "expert (the expert's move in that state while the episode goes on with the action played, DAgger-style: "
        "sft.explore then reaches states the expert's own play rarely visits, each labelled with the expert's "
        "move; every episode is kept); expert needs rollout.episode.history: last_k",
    )
    loss_on: Literal["response", "all"] = f(
        "response",
        "the tokens the warm start is trained on: response (the assistant's turns only) or all (every token of the "
        "demonstration: system prompt, tools, observations and tool results too, as in pretraining on whole "
        "conversations; the repeated tool schemas teach a tiny model to copy from its context, which calling tools "
        "with ids and numbers from earlier results needs). The RL update always trains the sampled tokens only",
    )
    eval_every: int = f(
        0,
        "greedy validation success on rollout.select_episodes' seeds every N warm-start steps (the run summary's "
        "sft_val; 0: none)",
        ge=0,
    )
    stop_success: float | None = f(
        None,
        "end the warm start at the first validation whose success reaches this (needs sft.eval_every): a partial "
        "warm start keeps room and exploration for RL, and seeds' starting points closer together than a step "
        "count where how fast imitation takes off depends on the seed",
        ge=0,
        le=1,
    )


class WorkersConfig(ConfigModel):
    use_ray: bool = f(False, "run actor/reference/critic/rollout as Ray actors (False: all in this process)")
    num_workers: int = f(1, "data-parallel actor workers (torch.distributed; > 1 needs use_ray)", ge=1)
    backend: Literal["auto", "gloo", "nccl"] = f("auto", "torch.distributed backend (auto: nccl on CUDA, gloo on CPU)")
    colocate: bool = f(True, "place actor, reference, critic and rollout on the same devices")
    critic_placement: Literal["colocated", "apart"] = f(
        "colocated", "colocated: the critic trains inside the actor workers | apart: its own Ray actor (use_ray)"
    )
    strategy: Literal["torch", "deepspeed"] = f(
        "torch", "update engine; deepspeed is an optional extra: pip install 'rockroll[gpu]'"
    )
    zero_stage: Literal[0, 1, 2, 3] = f(2, "deepspeed strategy: ZeRO stage")
    deepspeed_config: dict[str, Any] = f(
        {}, "deepspeed strategy: extra DeepSpeed config keys, merged over the generated ones"
    )
    gpus_per_worker: float = f(0.0, "GPUs per Ray worker (0 on CPU)", ge=0)
    engine_placement: Literal["actor", "driver"] = f(
        "actor",
        "with use_ray, where the rollout engine runs: its own Ray actor, or the driver process beside the rollout "
        "loop (no Ray round trip per generation round: a CPU engine serving a tiny model spends more in that hop "
        "than in its forward); the update stays on the Ray workers either way",
    )

    @model_validator(mode="after")
    def _check(self) -> WorkersConfig:
        if self.critic_placement == "apart" and not self.use_ray:
            raise ValueError("workers.critic_placement 'apart' needs workers.use_ray: true")
        if self.num_workers > 1 and not self.use_ray:
            raise ValueError("workers.num_workers > 1 needs workers.use_ray: true")
        return self


class LoggingConfig(ConfigModel):
    run_dir: str = f("runs", "runs are written to <run_dir>/<name>/")
    tensorboard: bool = f(True, "write TensorBoard events (when tensorboard is installed)")
    wandb: bool = f(False, "log to Weights & Biases (when installed)")
    wandb_project: str = f("rockroll", "W&B project")
    progress: bool = f(True, "rich progress bar")


class CheckpointConfig(ConfigModel):
    every: int = f(0, "save a checkpoint every N steps (0: only at the end)", ge=0)
    every_s: float = f(
        0.0, "also save one when this many seconds of RL (time/run_s) passed since the last (0: off)", ge=0
    )
    keep: int = f(2, "checkpoints kept (oldest deleted)", ge=1)


class TrainConfig(ConfigModel):
    """A whole training run: ``rockroll train CONFIG.yaml [key=value ...]`` (see configs/)."""

    name: str = f("run", "run name: output goes to logging.run_dir/name")
    seed: int = f(0, "seed for torch, numpy and env seeds")
    total_steps: int = f(50, "RL steps (rollout + update)", ge=0)
    torch_threads: int = f(1, "torch.set_num_threads (1 is fastest on a shared 2-core box)", ge=1)
    time_budget_s: float = f(0.0, "stop RL after this many seconds (0: no limit)", ge=0)
    model: ModelConfig = Field(default_factory=ModelConfig, description="the policy model")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="how training episodes are played")
    algo: AlgoConfig = Field(default_factory=AlgoConfig, description="advantages and losses")
    optim: OptimConfig = Field(default_factory=OptimConfig, description="optimizer and update schedule")
    sft: SFTConfig = Field(default_factory=SFTConfig, description="supervised warm start")
    workers: WorkersConfig = Field(default_factory=WorkersConfig, description="placement and parallelism")
    logging: LoggingConfig = Field(default_factory=LoggingConfig, description="metrics and progress")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="checkpoints")

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        if get_advantage_estimator(self.algo.adv_estimator).group_based and self.rollout.scheduler.group_size < 2:
            raise ValueError(f"adv_estimator {self.algo.adv_estimator} needs rollout.scheduler.group_size >= 2")
        if self.rollout.plays_envs and self.sft.steps > 0:
            for env in self.rollout.env_mix():
                if not env.expert and expert_of(env.env_id) is None:
                    raise ValueError(
                        f"sft.steps > 0 needs an expert for {env.env_id} to demonstrate multi-turn play, and it "
                        "has none: register one (envhub.register(..., expert='module:factory')), leave the env out "
                        "of rollout.envs or set sft.steps: 0"
                    )
        episode: Any = self.rollout.episode  # a class built at import (with_defaults): opaque to the type checker
        if self.sft.label == "expert" and (self.rollout.mode != "multiturn" or episode.history != "last_k"):
            raise ValueError(
                "sft.label: expert labels each turn of multi-turn demos apart from what was played, so it needs "
                "per-turn rows: rollout.mode: multiturn and rollout.episode.history: last_k"
            )
        if self.sft.stop_success is not None and not self.sft.eval_every:
            raise ValueError("sft.stop_success needs sft.eval_every > 0 (the validations that can stop the warm start)")
        if self.sft.eval_every and (self.rollout.select_episodes == 0 or self.rollout.mode != "multiturn"):
            raise ValueError(
                "sft.eval_every validates on rollout.select_episodes' seeds: set it > 0 (rollout.mode: multiturn)"
            )
        if self.sft.explore and self.rollout.mode != "multiturn":
            raise ValueError(
                "sft.explore mixes random actions into multi-turn demos; plan mode's demos are whole plans"
            )
        if self.algo.turn_credit == "gae" and self.rollout.mode != "multiturn":
            raise ValueError(
                "algo.turn_credit: gae is per-turn credit for rollout.mode: multiturn; in plan mode a critic comes "
                "from algo.adv_estimator: gae"
            )
        if self.rollout.mode == "rlvr" and self.rollout.envs and self.algo.turn_credit in ("fork", "gae"):
            raise ValueError(
                f"algo.turn_credit: {self.algo.turn_credit} is not offered when rollout.mode: rlvr mixes in "
                "rollout.envs (a dataset answer has no env state to fork or value): use episode or gigpo"
            )
        if self.algo.tag_balance and not self.rollout.plays_envs:
            raise ValueError(
                "algo.tag_balance weighs the tags of multi-turn rows: it needs rollout.mode: multiturn, or rlvr "
                "with rollout.envs"
            )
        if self.optim.tag_steps and (not self.rollout.plays_envs or self.workers.strategy != "torch"):
            raise ValueError(
                "optim.tag_steps steps the tags of multi-turn rows apart: it needs rollout.mode: multiturn (or rlvr "
                "with rollout.envs) and workers.strategy: torch"
            )
        if not self.name or "/" in self.name:
            raise ValueError(f"name must be a non-empty string without '/', got {self.name!r}")
        return self
