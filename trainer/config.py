"""Typed training config: one dataclass per section, YAML maps onto it 1:1.

Every field has help text (the ``help`` metadata, shown by ``rockroll train --help-config``) and
a default; ``__post_init__`` raises ``ValueError`` saying what to set instead. Loading,
``key=value`` overrides and dumping live in :mod:`rockroll.trainer.config_io`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ModelConfig",
    "RolloutConfig",
    "AlgoConfig",
    "OptimConfig",
    "SFTConfig",
    "WorkersConfig",
    "LoggingConfig",
    "CheckpointConfig",
    "TrainConfig",
    "ADV_ESTIMATORS",
]

ADV_ESTIMATORS = ("grpo", "grpo_mean", "rloo", "reinforce_pp", "gae")
_PG = ("ppo", "cispo", "topr", "gspo")
_AGG = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")


def f(default: Any, help: str) -> Any:  # noqa: A002 - "help" reads best in the field list
    """A dataclass field with help text (lists/dicts get a factory)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


def _choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {value!r}")


@dataclass
class ModelConfig:
    path: str = f(
        "runs/tiny-model", "model directory (HF format); a tiny model is built there when `build_tiny` and missing"
    )
    build_tiny: bool = f(True, "build a tiny local Qwen2-shaped model at `path` if it does not exist")
    tiny_hidden_size: int = f(128, "width of the tiny model (when built)")
    tiny_layers: int = f(2, "transformer blocks of the tiny model (when built)")
    dtype: str = f("float32", "float32 | bfloat16 | float16 (training weights)")
    device: str = f("auto", "auto | cpu | cuda")
    gradient_checkpointing: bool = f(False, "recompute activations in backward (saves memory on big models)")

    def __post_init__(self) -> None:
        _choice("model.dtype", self.dtype, ("float32", "bfloat16", "float16"))
        _choice("model.device", self.device, ("auto", "cpu", "cuda"))


@dataclass
class RolloutConfig:
    env_id: str = f("FrozenLake-v0", "envhub id of the training env")
    env_kwargs: dict = f({}, "keyword arguments for envhub.make (e.g. {is_slippery: false})")
    mode: str = f(
        "plan",
        "plan: one response holds the whole action plan (cheap); multiturn: one action per turn (agentrl scheduler)",
    )
    prompt_style: str = f(
        "short",
        "short: observation + one instruction line; grid: the same with map cells spaced apart (one token per cell, best for tiny models); env: the env's own system prompt too",
    )
    group_size: int = f(8, "responses sampled per prompt (GRPO group)")
    groups_per_step: int = f(8, "prompts per training step")
    max_new_tokens: int = f(24, "response length cap in tokens")
    max_actions: int = f(8, "plan mode: actions of a plan that are executed (more is a failure)")
    temperature: float = f(1.0, "sampling temperature for training rollouts")
    top_p: float = f(1.0, "nucleus sampling for training rollouts")
    sandbox: str = f(
        "none", "none: env in-process | process: env runs in a process sandbox through the sandbox manager"
    )
    async_generation_ratio: float = f(
        0.0, "0: synchronous; >0: rollouts may be this many steps stale (agentrl scheduler)"
    )
    eval_episodes: int = f(64, "held-out episodes for greedy evaluation")
    eval_every: int = f(10, "evaluate every N steps (0: only at start and end)")
    eval_seed_offset: int = f(1_000_000, "held-out seeds start here (training seeds never reach it)")
    train_seeds: int = f(
        0, "0: training maps drawn from all seeds below eval_seed_offset; N: only seeds 0..N-1 (small fixed task sets)"
    )

    def __post_init__(self) -> None:
        _choice("rollout.mode", self.mode, ("plan", "multiturn"))
        _choice("rollout.prompt_style", self.prompt_style, ("short", "grid", "env"))
        _choice("rollout.sandbox", self.sandbox, ("none", "process", "docker"))
        if self.group_size < 1 or self.groups_per_step < 1:
            raise ValueError("rollout.group_size and rollout.groups_per_step must be >= 1 (GRPO needs group_size >= 2)")
        if self.max_new_tokens < 1 or self.max_actions < 1:
            raise ValueError("rollout.max_new_tokens and rollout.max_actions must be >= 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("rollout.temperature must be >= 0 and rollout.top_p in (0, 1]")
        if self.train_seeds < 0 or (self.train_seeds == 0 and self.eval_seed_offset < 1):
            raise ValueError("rollout.train_seeds must be >= 0, and eval_seed_offset >= 1 when train_seeds is 0")
        if self.async_generation_ratio < 0:
            raise ValueError("rollout.async_generation_ratio must be >= 0 (0 = synchronous)")


@dataclass
class AlgoConfig:
    adv_estimator: str = f(
        "grpo", "grpo | grpo_mean (no std, RAFT++/Dr.GRPO) | rloo | reinforce_pp | gae (needs the critic)"
    )
    pg_variant: str = f("ppo", "ppo (clip, dual clip) | cispo | topr | gspo (sequence ratio)")
    clip_low: float = f(0.2, "ratio clip below 1 (PPO/GSPO; CISPO lower bound)")
    clip_high: float = f(0.28, "ratio clip above 1 (asymmetric 'clip higher', DAPO)")
    dual_clip: float = f(3.0, "dual-clip constant for negative advantages (> 1; 0 disables)")
    loss_agg_mode: str = f("token-mean", "token-mean | seq-mean-token-sum | seq-mean-token-mean")
    kl_coef: float = f(0.0, "weight of the KL to the reference model (0: no reference model)")
    kl_estimator: str = f("k3", "k1 | k2 | k3")
    use_kl_loss: bool = f(True, "True: KL as a loss term (GRPO); False: KL as a per-token reward penalty (PPO)")
    entropy_coef: float = f(0.0, "entropy bonus weight")
    gamma: float = f(1.0, "discount for GAE / REINFORCE++ returns")
    lam: float = f(0.95, "GAE lambda")
    reward_clip: float = f(0.0, "clip rewards to [-c, c] (0: off)")
    reward_scale: float = f(1.0, "multiply rewards by this")
    reward_norm: str = f("none", "none | batch | group: reward normalisation before advantages")
    adv_whiten: bool = f(False, "whiten advantages over the batch")
    adv_clip: float = f(0.0, "clip advantages to [-c, c] (0: off)")
    dynamic_sampling: bool = f(True, "drop groups whose rewards are all equal (no GRPO signal)")
    mask_truncated: bool = f(False, "drop responses cut at max_new_tokens")
    tis_cap: float = f(0.0, "truncated importance sampling cap between trainer and rollout logprobs (0: off)")
    value_clip: float = f(0.2, "critic value clip (0: off)")
    critic_coef: float = f(1.0, "critic loss weight")

    def __post_init__(self) -> None:
        _choice("algo.adv_estimator", self.adv_estimator, ADV_ESTIMATORS)
        _choice("algo.pg_variant", self.pg_variant, _PG)
        _choice("algo.loss_agg_mode", self.loss_agg_mode, _AGG)
        _choice("algo.kl_estimator", self.kl_estimator, ("k1", "k2", "k3"))
        _choice("algo.reward_norm", self.reward_norm, ("none", "batch", "group"))
        if self.dual_clip and self.dual_clip <= 1:
            raise ValueError(f"algo.dual_clip must be > 1 (typical 3.0) or 0 to disable; got {self.dual_clip}")
        if self.clip_low < 0 or self.clip_high < 0:
            raise ValueError("algo.clip_low and algo.clip_high must be >= 0")
        if not 0 <= self.gamma <= 1 or not 0 <= self.lam <= 1:
            raise ValueError("algo.gamma and algo.lam must be in [0, 1]")
        if self.kl_coef < 0 or self.entropy_coef < 0:
            raise ValueError("algo.kl_coef and algo.entropy_coef must be >= 0")

    @property
    def needs_critic(self) -> bool:
        return self.adv_estimator == "gae"


@dataclass
class OptimConfig:
    lr: float = f(1e-4, "actor learning rate (1e-4 was stable on tiny models; 5e-4 collapsed)")
    critic_lr: float = f(1e-4, "critic learning rate")
    weight_decay: float = f(0.0, "AdamW weight decay")
    betas: list = f([0.9, 0.999], "AdamW betas")
    schedule: str = f("constant", "constant | linear | cosine (after warmup, over trainer.total_steps)")
    warmup_steps: int = f(0, "linear warmup optimizer steps")
    grad_clip: float = f(1.0, "max gradient norm (0: off)")
    ppo_epochs: int = f(1, "passes over each rollout batch")
    mini_batch_size: int = f(0, "samples per optimizer step (0: the whole batch, one step per epoch)")
    micro_batch_size: int = f(16, "samples per forward/backward (gradient accumulation)")

    def __post_init__(self) -> None:
        _choice("optim.schedule", self.schedule, ("constant", "linear", "cosine"))
        if self.lr <= 0 or self.critic_lr <= 0:
            raise ValueError("optim.lr and optim.critic_lr must be > 0 (try 1e-4)")
        if self.ppo_epochs < 1 or self.micro_batch_size < 1 or self.mini_batch_size < 0:
            raise ValueError("optim.ppo_epochs and optim.micro_batch_size must be >= 1, optim.mini_batch_size >= 0")
        if len(self.betas) != 2:
            raise ValueError("optim.betas must be two numbers, e.g. [0.9, 0.999]")


@dataclass
class SFTConfig:
    steps: int = f(0, "supervised warm-start steps on expert demonstrations before RL (0: none)")
    lr: float = f(1e-3, "SFT learning rate")
    batch_size: int = f(32, "demonstrations per SFT step")
    num_demos: int = f(2000, "expert demonstrations generated (seeds below rollout.eval_seed_offset)")

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch_size < 1 or self.num_demos < 1:
            raise ValueError("sft.steps must be >= 0, sft.batch_size and sft.num_demos >= 1")


@dataclass
class WorkersConfig:
    use_ray: bool = f(False, "run actor/reference/critic/rollout as Ray actors (False: all in this process)")
    num_workers: int = f(1, "data-parallel actor workers (torch.distributed)")
    backend: str = f("auto", "auto (nccl on CUDA, gloo on CPU) | gloo | nccl")
    colocate: bool = f(True, "place actor, reference, critic and rollout on the same devices")
    critic_placement: str = f(
        "colocated", "colocated: the critic trains inside the actor workers | apart: its own Ray actor (use_ray)"
    )
    strategy: str = f("torch", "torch | deepspeed (optional extra: pip install 'rockroll[gpu]')")
    zero_stage: int = f(2, "deepspeed strategy: ZeRO stage 0 | 1 | 2 | 3")
    deepspeed_config: dict = f({}, "deepspeed strategy: extra DeepSpeed config keys, merged over the generated ones")
    gpus_per_worker: float = f(0.0, "GPUs per Ray worker (0 on CPU)")

    def __post_init__(self) -> None:
        _choice("workers.backend", self.backend, ("auto", "gloo", "nccl"))
        _choice("workers.strategy", self.strategy, ("torch", "deepspeed"))
        _choice("workers.critic_placement", self.critic_placement, ("colocated", "apart"))
        if self.critic_placement == "apart" and not self.use_ray:
            raise ValueError("workers.critic_placement 'apart' needs workers.use_ray: true")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"workers.zero_stage must be 0, 1, 2 or 3; got {self.zero_stage!r}")
        if self.num_workers < 1:
            raise ValueError("workers.num_workers must be >= 1")
        if self.num_workers > 1 and not self.use_ray:
            raise ValueError("workers.num_workers > 1 needs workers.use_ray: true")


@dataclass
class LoggingConfig:
    run_dir: str = f("runs", "runs are written to <run_dir>/<name>/")
    tensorboard: bool = f(True, "write TensorBoard events (when tensorboard is installed)")
    wandb: bool = f(False, "log to Weights & Biases (when installed)")
    wandb_project: str = f("rockroll", "W&B project")
    progress: bool = f(True, "rich progress bar")


@dataclass
class CheckpointConfig:
    every: int = f(0, "save a checkpoint every N steps (0: only at the end)")
    keep: int = f(2, "checkpoints kept (oldest deleted)")

    def __post_init__(self) -> None:
        if self.every < 0 or self.keep < 1:
            raise ValueError("checkpoint.every must be >= 0 and checkpoint.keep >= 1")


@dataclass
class TrainConfig:
    name: str = f("run", "run name: output goes to logging.run_dir/name")
    seed: int = f(0, "seed for torch, numpy and env seeds")
    total_steps: int = f(50, "RL steps (rollout + update)")
    torch_threads: int = f(1, "torch.set_num_threads (1 is fastest on a shared 2-core box)")
    time_budget_s: float = f(0.0, "stop RL after this many seconds (0: no limit)")
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    def __post_init__(self) -> None:
        if self.total_steps < 0 or self.torch_threads < 1:
            raise ValueError("total_steps must be >= 0 and torch_threads >= 1")
        if self.algo.adv_estimator in ("grpo", "grpo_mean", "rloo") and self.rollout.group_size < 2:
            raise ValueError(f"adv_estimator {self.algo.adv_estimator} needs rollout.group_size >= 2")
        if not self.name or "/" in self.name:
            raise ValueError(f"name must be a non-empty string without '/', got {self.name!r}")
