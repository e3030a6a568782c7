"""The DeepSpeed strategy: :class:`rockroll.trainer.learner.actor.PolicyTrainer`'s update run through DeepSpeed engines.

Only DeepSpeed's public API is used: ``deepspeed.init_distributed``, ``deepspeed.initialize``
(``model``, ``model_parameters``, ``optimizer``, ``lr_scheduler``, ``config``),
``engine.backward``, ``engine.step``, ``engine.set_gradient_accumulation_boundary``,
``engine.get_global_grad_norm``, ``engine.save_checkpoint``/``load_checkpoint`` and
``deepspeed.zero.GatheredParameters``.

Mapping from the rockroll config (:func:`ds_config`):

* ``workers.zero_stage`` -> ``zero_optimization.stage`` (0-3);
* ``model.dtype`` bfloat16 / float16 -> ``bf16.enabled`` / ``fp16.enabled`` (float32: neither);
* ``optim.grad_clip`` -> ``gradient_clipping``; ``optim.micro_batch_size`` ->
  ``train_micro_batch_size_per_gpu``; the micro-batches of one minibatch on one rank ->
  ``gradient_accumulation_steps``;
* the optimizer is torch AdamW (``optim.lr``, ``betas``, ``weight_decay``) and the schedule
  :func:`rockroll.trainer.learner.actor.make_scheduler`, both handed to ``deepspeed.initialize`` as callables;
* ``workers.deepspeed_config`` is merged over the result (escape hatch for any other key).

The update math is unchanged. DeepSpeed *averages* gradients over data-parallel ranks and divides
the loss by ``gradient_accumulation_steps``, while rockroll's losses are already divided by the
global denominator of the minibatch (gradients are *summed*), so :meth:`DeepSpeedTrainer._backward`
multiplies the loss by ``world * gradient_accumulation_steps`` first. The accumulation boundary
is set explicitly at the last micro-batch of each minibatch, and every rank runs the same number
of micro-batches (zero-weight pads), which ZeRO-3's parameter gathers require.

Checkpoints: :meth:`DeepSpeedTrainer.state_dict` holds the gathered weights (enough for the
run's ``state.pt`` and for evaluation); :meth:`save_checkpoint` / :meth:`load_checkpoint` write
and read DeepSpeed's own (sharded) checkpoint, optimizer and schedule included.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rockroll.trainer.learner.actor import PolicyTrainer, make_scheduler
from rockroll.trainer.strategies.common import free_port, require_deepspeed

if TYPE_CHECKING:
    import torch
    from deepspeed import DeepSpeedEngine
    from torch.optim.lr_scheduler import LRScheduler

    from rockroll.trainer.config import AlgoConfig, OptimConfig, WorkersConfig

__all__ = ["DeepSpeedTrainer", "ds_config", "init_distributed"]


def ds_config(optim: OptimConfig, workers: WorkersConfig, dtype: str, gas: int) -> dict[str, Any]:
    """The DeepSpeed config dict for one engine (see the module docstring for the mapping)."""
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": optim.micro_batch_size,
        "gradient_accumulation_steps": gas,
        "gradient_clipping": optim.grad_clip,
        "zero_optimization": {"stage": workers.zero_stage},
        "bf16": {"enabled": dtype == "bfloat16"},
        "fp16": {"enabled": dtype == "float16"},
        "zero_allow_untested_optimizer": True,  # torch AdamW (runs on CPU, unlike FusedAdam)
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    return _merge(cfg, workers.deepspeed_config)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def init_distributed(backend: str, rank: int, world: int) -> None:
    """Join (or reuse) the torch.distributed group through ``deepspeed.init_distributed``.

    Inside a Ray worker with ``world > 1`` the group already exists; in-process (one rank) a
    single-member group on a free local port is made.
    """
    import torch
    import torch.distributed as dist

    deepspeed = require_deepspeed()
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    # what DeepSpeed's launcher would set; a Ray worker sees its own device(s) only, hence LOCAL_RANK 0
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    os.environ.setdefault("LOCAL_RANK", "0")
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        dist.init_process_group(backend, rank=rank, world_size=world)
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False)


class DeepSpeedTrainer(PolicyTrainer):
    """:class:`PolicyTrainer` whose actor (and critic) are DeepSpeed engines (see the module docstring)."""

    def __init__(
        self,
        model: torch.nn.Module,
        algo: AlgoConfig,
        optim: OptimConfig,
        *,
        workers: WorkersConfig,
        dtype: str = "float32",
        total_updates: int,
        critic: torch.nn.Module | None = None,
        rank: int = 0,
        world: int = 1,
        seed: int = 0,
    ) -> None:
        import torch

        deepspeed = require_deepspeed()
        init_distributed(workers.backend, rank, world)
        self.model, self.critic, self.algo, self.optim = model, critic, algo, optim
        self.rank, self.world, self.seed = rank, world, seed
        self.zero_stage = workers.zero_stage
        self.share_prefix = workers.zero_stage != 3  # sharing changes the number of forwards per rank
        # micro-batches per rank in a full minibatch (mini_batch_size 0: the whole batch, size unknown here)
        per_rank = -(-optim.mini_batch_size // world)
        self.gas = max(1, -(-per_rank // optim.micro_batch_size))

        def build(module: torch.nn.Module, lr: float) -> tuple[DeepSpeedEngine, torch.optim.Optimizer, LRScheduler]:
            def make_opt(params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
                return torch.optim.AdamW(params, lr=lr, betas=tuple(optim.betas), weight_decay=optim.weight_decay)

            def make_sched(opt: torch.optim.Optimizer) -> LRScheduler:
                return make_scheduler(opt, optim.schedule, optim.warmup_steps, total_updates)

            engine, opt, _, sched = deepspeed.initialize(
                model=module,
                model_parameters=[p for p in module.parameters() if p.requires_grad],
                optimizer=make_opt,
                lr_scheduler=make_sched,
                config=ds_config(optim, workers, dtype, self.gas),
            )
            return engine, opt, sched

        self.engine, self.ds_opt, self.sched = build(model, optim.lr)
        self.opt = self.engine  # what _step receives
        self.critic_engine = self.critic_opt = self.critic_sched = None
        if critic is not None:
            self.critic_engine, _, self.critic_sched = build(critic, optim.critic_lr)
            self.critic_opt = self.critic_engine

    # ------------------------------------------------------------------ strategy hooks
    def _micro_rows(self, rows: list[int]) -> list[list[int]]:
        """This rank's micro-batches, padded with empty ones so every rank runs the same number."""
        out = super()._micro_rows(rows)
        per_rank = -(-len(rows) // self.world)
        n = max(1, -(-per_rank // self.optim.micro_batch_size))
        return out + [[] for _ in range(n - len(out))]

    def _module(self, role: str) -> Any:
        """The engine: its forward keeps ZeRO-3's micro-step count (accumulate, not overwrite, gradients)."""
        return self.engine if role == "actor" else self.critic_engine

    def _zero_grad(self) -> None:
        """Nothing to do: ``engine.step`` clears gradients at each accumulation boundary."""

    def _backward(self, loss: torch.Tensor, role: str, last: bool) -> None:
        """``engine.backward`` with the boundary set at the minibatch's last micro-batch (sum semantics kept)."""
        engine = self.engine if role == "actor" else self.critic_engine
        engine.set_gradient_accumulation_boundary(last)
        engine.backward(loss * (self.world * self.gas))

    def _step(self, module: Any, opt: Any, sched: Any) -> float:
        """``engine.step()`` (clip, optimizer, schedule, zero grads); return the global grad norm."""
        import torch

        engine = opt
        engine.set_gradient_accumulation_boundary(True)
        pre = None
        if self.zero_stage == 0:  # plain engine: gradients are in p.grad, already all-reduced
            grads = [p.grad.float().reshape(-1) for p in engine.module.parameters() if p.grad is not None]
            pre = float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0
        engine.step()
        norm = engine.get_global_grad_norm()
        if norm is None:
            return pre if pre is not None else 0.0
        return float(norm)

    # ------------------------------------------------------------------ weights and state
    def _gathered(self, module: torch.nn.Module) -> contextlib.AbstractContextManager[object]:
        """Context in which ``module``'s full parameters are present (ZeRO-3 gathers them, read-only)."""
        if self.zero_stage != 3:
            return contextlib.nullcontext()
        import deepspeed

        return deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None)

    def policy_weights(self, cpu: bool = True) -> dict[str, Any]:
        """Full policy weights (gathered under ZeRO-3; all ranks must call), copied to CPU unless ``cpu=False``."""
        with self._gathered(self.model):
            return super().policy_weights(cpu=cpu)

    def _full_state(self, module: torch.nn.Module) -> dict[str, torch.Tensor]:
        with self._gathered(module):
            return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}

    def _load_full(self, module: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
        if self.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=0):
                module.load_state_dict(weights)
        else:
            module.load_state_dict(weights)
        # ZeRO 1/2 and bf16/fp16 keep fp32 master copies inside the optimizer: reload them from the module
        opt = (self.engine if module is self.model else self.critic_engine).optimizer
        if hasattr(opt, "refresh_fp32_params"):
            opt.refresh_fp32_params()

    def state_dict(self) -> dict[str, Any]:
        """Gathered weights (policy and critic) and schedule positions; optimizer state lives in
        :meth:`save_checkpoint` (DeepSpeed's sharded format)."""
        s: dict[str, Any] = {"model": self._full_state(self.model), "sched": self.sched.state_dict()}
        if self.critic is not None:
            s.update(critic=self._full_state(self.critic), critic_sched=self.critic_sched.state_dict())
        return s

    def load_state_dict(self, s: dict[str, Any]) -> None:
        """Load weights (and schedules) saved by :meth:`state_dict` or by the torch strategy."""
        self._load_full(self.model, s["model"])
        self.sched.load_state_dict(s["sched"])
        if self.critic is not None and "critic" in s:
            self._load_full(self.critic, s["critic"])
            self.critic_sched.load_state_dict(s["critic_sched"])

    def save_checkpoint(self, path: str | Path) -> None:
        """DeepSpeed checkpoint (weights, optimizer, schedule) of the actor (tag ``actor``) and critic (``critic``)."""
        self.engine.save_checkpoint(str(path), tag="actor")
        if self.critic_engine is not None:
            self.critic_engine.save_checkpoint(str(path), tag="critic")

    def load_checkpoint(self, path: str | Path) -> None:
        """Load a checkpoint written by :meth:`save_checkpoint` (same ZeRO stage and world size)."""
        self.engine.load_checkpoint(str(path), tag="actor")
        if self.critic_engine is not None:
            self.critic_engine.load_checkpoint(str(path), tag="critic")
