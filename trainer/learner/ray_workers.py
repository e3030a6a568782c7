"""Ray workers: ``num_workers`` data-parallel actor workers (torch.distributed), a reference worker,
and the rollout engine as a Ray actor, placed colocated or apart.

* :class:`TrainWorker` (``@ray.remote``): one rank of the actor (and critic, for PPO with GAE);
  joins a ``torch.distributed`` group (gloo on CPU, nccl on CUDA) and runs
  :class:`rockroll.trainer.learner.actor.PolicyTrainer` with ``rank``/``world``: every rank gets the whole batch and
  takes its rows of each minibatch, gradients are summed with ``all_reduce``.
* :class:`RefWorker`: the frozen reference policy (only when ``algo.kl_coef > 0``).
* critic worker (``workers.critic_placement: apart``, PPO with GAE): the critic in its own Ray actor
  (:class:`rockroll.trainer.learner.critic.CriticTrainer`), updated concurrently with the actor on the same batch.
  Under the deepspeed strategy with ZeRO-3 every rank sees the whole batch in forward passes and
  every rank is asked for the (collectively gathered) weights.
* :class:`EngineWorker` / :class:`RayEngine`: the engine ``rollout.engine`` names (built through the
  registry by :func:`rockroll.trainer.rollout.engine_sync.engine_for`) inside a Ray actor, and an
  in-controller proxy with the engine interface (``generate``, ``generate_batch``,
  ``update_weights(state_dict, version)``).

Device mapping (:func:`role_options`): colocated roles share devices (fractional GPUs, no CPU
reservation); apart, each role reserves its own GPU/CPU.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from rockroll.envs.carry import CarriedRegistrations, apply_registrations, carried_registrations
from rockroll.sandbox.ray_priority import workers_at_driver_priority
from rockroll.trainer.learner.actor import total_updates
from rockroll.trainer.strategies.common import free_port

if TYPE_CHECKING:
    import torch

    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.learner.batch import Batch

__all__ = ["RayWorkers", "RayEngine", "role_options", "free_port"]  # free_port lives in trainer.strategies.common


def role_options(cfg: TrainConfig, role: str) -> dict[str, Any]:
    """Ray actor options for ``role`` (train, ref, critic, rollout) under the device mapping."""
    gpus = cfg.workers.gpus_per_worker
    if cfg.workers.colocate:
        share = gpus / 4 if gpus else 0
        return {"num_cpus": 0, "num_gpus": share}
    return {"num_cpus": 1, "num_gpus": gpus}


#: a local Ray cluster (no RAY_ADDRESS) binds loopback only, never the machine's interface address
LOCAL_NODE_IP = "127.0.0.1"


def _init_ray() -> Any:
    if not os.environ.get("RAY_ADDRESS"):  # a local cluster's workers run the update and generation
        workers_at_driver_priority()
    import ray

    if not ray.is_initialized():
        local = {} if os.environ.get("RAY_ADDRESS") else {"_node_ip_address": LOCAL_NODE_IP}
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, num_cpus=None, **local)
    return ray


def _worker_config(cfg_dict: dict, carried: CarriedRegistrations | None) -> TrainConfig:
    """The run's config in a worker, after redoing the driver's own registrations (a plugin loss, estimator or
    env the config names; :mod:`rockroll.envs.carry`)."""
    from rockroll.trainer.config_io import config_from_dict

    apply_registrations(carried)
    return config_from_dict(cfg_dict)


class _TrainWorkerImpl:
    """Body of the Ray train worker (a plain class, so it is testable and picklable)."""

    def __init__(
        self, cfg_dict: dict, weights: dict, rank: int, world: int, addr: str, port: int,
        carried: CarriedRegistrations | None = None,
    ) -> None:  # fmt: skip
        import torch
        import torch.distributed as dist

        from rockroll.trainer.learner.models import Critic, load_policy
        from rockroll.trainer.strategies import make_trainer

        cfg = _worker_config(cfg_dict, carried)
        torch.set_num_threads(cfg.torch_threads)
        backend = cfg.workers.backend
        if backend == "auto":
            backend = "nccl" if torch.cuda.is_available() and cfg.workers.gpus_per_worker > 0 else "gloo"
        if world > 1:
            dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world)
        model, _ = load_policy(cfg.model)
        model.load_state_dict(weights)
        apart = cfg.workers.critic_placement == "apart"
        critic = Critic(model) if cfg.algo.needs_critic and not apart else None
        torch.manual_seed(cfg.seed)
        if critic is not None:  # same head init on every rank
            critic.head.reset_parameters()
            torch.nn.init.zeros_(critic.head.weight)
            torch.nn.init.zeros_(critic.head.bias)
        self.trainer = make_trainer(model, cfg, critic=critic, rank=rank, world=world)

    def logprobs(self, batch: Batch) -> torch.Tensor:
        return self.trainer.compute_logprobs(batch)

    def values(self, batch: Batch) -> torch.Tensor:
        return self.trainer.compute_values(batch)

    def update(self, batch: Batch, step: int) -> dict[str, float]:
        return self.trainer.update(batch, step)

    def weights(self) -> dict[str, Any]:
        return self.trainer.policy_weights()

    def state_dict(self) -> dict[str, Any]:
        return self.trainer.state_dict()

    def load_state_dict(self, s: dict[str, Any]) -> None:
        self.trainer.load_state_dict(s)


class _CriticWorkerImpl:
    """Body of the Ray critic worker (``workers.critic_placement: apart``): a :class:`rockroll.trainer.learner.critic.CriticTrainer`."""

    def __init__(self, cfg_dict: dict, weights: dict, carried: CarriedRegistrations | None = None) -> None:
        import torch

        from rockroll.trainer.learner.critic import CriticTrainer
        from rockroll.trainer.learner.models import Critic, load_policy

        cfg = _worker_config(cfg_dict, carried)
        torch.set_num_threads(cfg.torch_threads)
        model, _ = load_policy(cfg.model)
        model.load_state_dict(weights)
        critic = Critic(model)  # zero-initialised head, as the colocated critic
        self.trainer = CriticTrainer(critic, cfg.algo, cfg.optim, total_updates=total_updates(cfg), seed=cfg.seed)

    def values(self, batch: Batch) -> torch.Tensor:
        return self.trainer.values(batch)

    def update(self, batch: Batch, step: int) -> dict[str, float]:
        return self.trainer.update(batch, step)

    def state_dict(self) -> dict[str, Any]:
        return self.trainer.state_dict()

    def load_state_dict(self, s: dict[str, Any]) -> None:
        self.trainer.load_state_dict(s)


class _RefWorkerImpl:
    def __init__(self, cfg_dict: dict, weights: dict, carried: CarriedRegistrations | None = None) -> None:
        import torch

        from rockroll.trainer.learner.models import frozen_copy, load_policy

        cfg = _worker_config(cfg_dict, carried)
        torch.set_num_threads(cfg.torch_threads)
        model, _ = load_policy(cfg.model)
        model.load_state_dict(weights)
        self.model = frozen_copy(model)
        self.micro = cfg.optim.micro_batch_size

    def logprobs(self, batch: Batch) -> torch.Tensor:
        import torch

        from rockroll.trainer.learner.batch import module_device, token_logprobs

        out = []
        with torch.no_grad():
            for s in range(0, len(batch), self.micro):
                mb = batch.select(list(range(s, min(len(batch), s + self.micro)))).to(module_device(self.model))
                lp, _ = token_logprobs(
                    self.model, mb.input_ids, mb.attention_mask, need=mb.response_mask, allowed=mb.extras.get("allowed")
                )
                out.append(lp.cpu())
        return torch.cat(out)

    def state_dict(self) -> dict[str, Any]:
        return self.model.state_dict()

    def load_state_dict(self, s: dict[str, Any]) -> None:
        self.model.load_state_dict(s)


class _EngineWorkerImpl:
    def __init__(self, cfg_dict: dict, weights: dict, carried: CarriedRegistrations | None = None) -> None:
        import torch

        from rockroll.trainer.learner.models import load_policy
        from rockroll.trainer.rollout.engine_sync import engine_for

        cfg = _worker_config(cfg_dict, carried)
        torch.set_num_threads(cfg.torch_threads)
        model, tok = load_policy(cfg.model)
        model.load_state_dict(weights)
        self.engine = engine_for(cfg, model, tok)
        if cfg.rollout.engine.kind != "hf":  # a host process loaded the model folder: give it these weights
            self.engine.update_weights(weights, 0)

    async def generate_many(self, requests: list, together: bool = False) -> list:
        """Each request's result, or the exception it raised (one request's failure is its own).
        ``together``: a round of a lock-step rollout, served by the engine's ``generate_batch`` (one
        request's error fails the round there, so then each is tried on its own)."""
        import asyncio

        if together:
            try:
                return list(await self.engine.generate_batch(requests))
            except Exception:  # noqa: BLE001 - find out which request failed, and why, one by one
                pass
        return list(await asyncio.gather(*(self.engine.generate(r) for r in requests), return_exceptions=True))

    def update_weights(self, state_dict: dict, version: int) -> int:
        self.engine.update_weights(state_dict, version)
        return version

    async def close(self) -> None:
        await self.engine.close()


class RayEngine:
    """Controller-side proxy of the engine Ray actor, with the engine interface the rollout uses.

    Requests issued in the same event-loop tick (a turn of many live episodes) travel to the actor
    as one call: a Ray call costs about a millisecond on each side, which per request dominated a
    tiny model's turn. Each request still gets its own result or its own error.
    """

    name = "ray"

    def __init__(self, cfg: TrainConfig, weights: dict, tokenizer: Any) -> None:
        from rockroll.trainer.config_io import config_to_dict

        ray = _init_ray()
        self.tokenizer = tokenizer
        self.weight_version = 0
        #: the actor's engine restricts answers (SamplingParams.allowed) when it is an hf engine
        self.supports_allowed = cfg.rollout.engine.kind == "hf"
        self.calls = 0  # Ray calls made for generation (requests coalesce into fewer)
        self._pending: list[tuple[Any, Any]] = []
        self._flushes: set[Any] = set()  # running flush tasks (the loop keeps only weak references)
        self._actor = (
            ray.remote(_EngineWorkerImpl)
            .options(**role_options(cfg, "rollout"))
            .remote(config_to_dict(cfg), weights, carried_registrations())
        )

    async def generate(self, request: Any) -> Any:
        import asyncio

        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if not self._pending:
            loop.call_soon(self._start_flush, loop)
        self._pending.append((request, fut))
        return await fut

    def _start_flush(self, loop: Any) -> None:
        task = loop.create_task(self._flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        batch = [(r, f) for r, f in batch if not f.done()]  # cancelled before they left
        if not batch:
            return
        self.calls += 1
        try:
            results = await self._actor.generate_many.remote([r for r, _ in batch])
        except BaseException as exc:  # noqa: BLE001 - the actor died or the call failed: every request fails
            for _, f in batch:
                if not f.done():
                    f.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, f), res in zip(batch, results, strict=True):
            if f.done():
                continue
            if isinstance(res, BaseException):
                f.set_exception(res)
            else:
                f.set_result(res)

    async def generate_batch(self, requests: list) -> list:
        """One Ray call, served by the engine's own ``generate_batch`` (a lock-step round)."""
        if not requests:
            return []
        self.calls += 1
        results = await self._actor.generate_many.remote(list(requests), True)
        for res in results:
            if isinstance(res, BaseException):
                raise res
        return list(results)

    def update_weights(self, state_dict: dict, version: int) -> None:
        import ray

        self.weight_version = ray.get(self._actor.update_weights.remote(state_dict, version))

    async def close(self) -> None:
        import ray

        try:  # the engine's own processes (a vLLM host) stop with it; then the actor goes
            await self._actor.close.remote()
        finally:
            ray.kill(self._actor)


class RayWorkers:
    """The worker group on Ray, with :class:`rockroll.trainer.learner.workers.LocalWorkers`' methods."""

    def __init__(self, model: Any, cfg: TrainConfig, weights: dict | None = None) -> None:
        import ray as _ray

        from rockroll.trainer.config_io import config_to_dict

        ray = _init_ray()
        w = weights if weights is not None else {k: v.detach().cpu() for k, v in model.state_dict().items()}
        cd = config_to_dict(cfg)
        carried = carried_registrations()  # the user's own losses, estimators and envs (rockroll.envs.carry)
        world = cfg.workers.num_workers
        port = free_port()
        remote = ray.remote(_TrainWorkerImpl).options(**role_options(cfg, "train"))
        self.train = [remote.remote(cd, w, r, world, "127.0.0.1", port, carried) for r in range(world)]
        self.ref = (
            ray.remote(_RefWorkerImpl).options(**role_options(cfg, "ref")).remote(cd, w, carried)
            if cfg.algo.kl_coef > 0
            else None
        )
        self.has_critic = cfg.algo.needs_critic
        self.critic = (
            ray.remote(_CriticWorkerImpl).options(**role_options(cfg, "critic")).remote(cd, w, carried)
            if self.has_critic and cfg.workers.critic_placement == "apart"
            else None
        )
        # ZeRO-3 gathers parameters collectively in every forward: all ranks must see the same rows
        self.same_rows = cfg.workers.strategy == "deepspeed" and cfg.workers.zero_stage == 3
        self._ray = _ray
        self._first("weights")  # fail early if a worker cannot start

    def _first(self, method: str) -> Any:
        """Rank 0's answer to ``method()``; under ZeRO-3 every rank is called (the weights gather is collective)."""
        ranks = self.train if self.same_rows else self.train[:1]
        return self._ray.get([getattr(t, method).remote() for t in ranks])[0]

    def _sharded(self, method: str, batch: Batch) -> torch.Tensor:
        """Split rows across train workers, compute, and concatenate in order."""
        import torch

        if self.same_rows:
            return self._ray.get([getattr(t, method).remote(batch) for t in self.train])[0]
        n, world = len(batch), len(self.train)
        bounds = [round(i * n / world) for i in range(world + 1)]
        refs = [
            getattr(t, method).remote(batch.select(list(range(bounds[i], bounds[i + 1]))))
            for i, t in enumerate(self.train)
            if bounds[i + 1] > bounds[i]
        ]
        return torch.cat(self._ray.get(refs))

    def old_logprobs(self, batch: Batch) -> torch.Tensor:
        return self._sharded("logprobs", batch)

    def ref_logprobs(self, batch: Batch) -> torch.Tensor | None:
        return None if self.ref is None else self._ray.get(self.ref.logprobs.remote(batch))

    def values(self, batch: Batch) -> torch.Tensor | None:
        if self.critic is not None:
            return self._ray.get(self.critic.values.remote(batch))
        return self._sharded("values", batch) if self.has_critic else None

    def update(self, batch: Batch, step: int) -> dict[str, float]:
        critic = [self.critic.update.remote(batch, step)] if self.critic is not None else []
        results = self._ray.get([t.update.remote(batch, step) for t in self.train] + critic)
        return {**results[0], **(results[-1] if critic else {})}

    def policy_weights(self) -> dict[str, Any]:
        return self._first("weights")

    def state_dict(self) -> dict[str, Any]:
        s = self._first("state_dict")
        if self.critic is not None:
            s.update(self._ray.get(self.critic.state_dict.remote()))
        if self.ref is not None:
            s["ref"] = self._ray.get(self.ref.state_dict.remote())
        return s

    def load_state_dict(self, s: dict[str, Any]) -> None:
        self._ray.get([t.load_state_dict.remote(s) for t in self.train])
        if self.critic is not None:
            self._ray.get(self.critic.load_state_dict.remote(s))
        if self.ref is not None and "ref" in s:
            self._ray.get(self.ref.load_state_dict.remote(s["ref"]))

    def close(self) -> None:
        for a in [*self.train, *(x for x in (self.ref, self.critic) if x is not None)]:
            self._ray.kill(a)
