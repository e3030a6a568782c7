"""The training controller: one loop that reads top to bottom.

    rollout: plan mode (PlanRollout; prefetched one step ahead when ``async_generation_ratio > 0``)
             or multiturn mode (agentrl's RolloutScheduler + AsyncRollout sample buffer)
    -> old / reference logprobs (and critic values)
    -> advantages (``algo.adv_estimator``), sample masks
    -> PPO epochs over minibatches (``algo.pg_variant``)
    -> weight sync to the rollout engine (with the new version)
    -> metrics (metrics.jsonl, TensorBoard, W&B) -> evaluation -> checkpoint

:func:`run_training` is the one entry point: the CLI (``rockroll train``) and the jobs API
(``POST /v1/jobs`` with kind ``train``) both call it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import hashlib
import random
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rockroll.agentrl.engines.hf import HFEngine
from rockroll.agentrl.env_source import EnvSource, LocalSource, SandboxSource
from rockroll.sandbox.manager import SandboxManager
from rockroll.trainer.actor import single_pass
from rockroll.trainer.config import TrainConfig
from rockroll.trainer.multiturn import MultiTurnDriver, check_context, episode_config, mean_success, write_episode
from rockroll.trainer.report import env_references, run_report
from rockroll.trainer.selection import BestCheckpoint, select_seeds
from rockroll.trainer.turns import merge_identical, merge_ok, turn_rows, turn_values

__all__ = ["run_training", "sandbox_manager", "sandbox_manager_name", "ProgressCallback", "EventCallback"]

ProgressCallback = Callable[[int, int, dict[str, float]], None]
EventCallback = Callable[[str, dict[str, Any]], None]  # progress: sft_step, eval_start, eval_end (trainer/progress.py)


def _seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def sandbox_manager(cfg: TrainConfig, run_dir: Path) -> SandboxManager:
    """The run's own sandbox manager (``rollout.sandbox`` backend, SQLite under the run dir).

    Its name carries a digest of the run dir: a manager adopts the sandboxes labelled with its name and
    removes those it has no record of, so two runs of one config name in different run dirs (a test
    beside a bench, two users) must not share one, while a resumed run keeps its own.
    """
    return SandboxManager(
        backend=cfg.rollout.sandbox,
        name=sandbox_manager_name(cfg.name, run_dir),
        db_url=f"sqlite:///{run_dir.resolve()}/sandboxes.db",
    )


def sandbox_manager_name(name: str, run_dir: Path) -> str:
    """``train-<run name>-<digest of the run dir>``: the label of run ``name``'s sandboxes in ``run_dir``."""
    return f"train-{name}-{hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:8]}"


def _env_source(cfg: TrainConfig, stack: ExitStack, run_dir: Path) -> EnvSource:
    """Where envs come from: in-process, or sessions in process/docker sandboxes of the run's own manager."""
    if cfg.rollout.sandbox == "none":
        return LocalSource()
    manager = sandbox_manager(cfg, run_dir)
    stack.callback(manager.close)
    return SandboxSource(manager)


def _tasks(cfg: TrainConfig, step: int) -> list[Any]:
    """The episodes of ``step``: ``groups_per_step`` (+ ``extra_groups``) training seeds, ``group_size``
    (+ ``group_size_redundancy``) samples each."""
    from rockroll.trainer.plan_rollout import PlanTask

    r = cfg.rollout
    rng = random.Random(cfg.seed * 1_000_003 + step)
    tasks = []
    for g in range(r.groups_per_step + r.extra_groups):
        seed = rng.randrange(r.train_seeds or r.eval_seed_offset)
        tasks += [
            PlanTask(seed, f"s{step}g{g}", f"s{step}g{g}e{i}") for i in range(r.group_size + r.group_size_redundancy)
        ]
    return tasks


def _demo_seeds(cfg: TrainConfig) -> list[int]:
    """Seeds of SFT demonstrations: after the fixed training maps (if any), never an eval seed."""
    r = cfg.rollout
    start = r.train_seeds
    evals = range(r.eval_seed_offset, r.eval_seed_offset + r.eval_episodes)
    return [s for s in range(start, start + cfg.sft.num_demos + r.eval_episodes) if s not in evals][: cfg.sft.num_demos]


def _rollout(cfg: TrainConfig, rollout: Any, engine: Any, step: int) -> list[Any]:
    r = cfg.rollout
    coro = rollout.run(
        engine,
        _tasks(cfg, step),
        max_new_tokens=r.max_new_tokens,
        temperature=r.temperature,
        top_p=r.top_p,
        sample_seed=cfg.seed * 7919 + step,
    )
    return asyncio.run(coro)


def _nbytes(weights: dict[str, Any]) -> int:
    """Bytes of a weight sync: the tensors handed to the engine (their in-memory size)."""
    return sum(t.numel() * t.element_size() for t in weights.values() if hasattr(t, "element_size"))


def _truncated(traj: Any) -> bool:
    """Whether any response of the episode was cut at the token cap."""
    return any(t.finish_reason == "length" for t in traj.turns)


def _env_metrics(trajs: list[Any], tags: list[str]) -> dict[str, float]:
    """``env/<tag>/success`` and ``env/<tag>/reward`` per env of the delivered (unmasked) episodes."""
    out: dict[str, float] = {}
    for tag in tags:
        mine = [t for t in trajs if (t.env_tag or tags[0]) == tag]
        n = max(len(mine), 1)
        out[f"env/{tag}/success"] = sum(t.success for t in mine) / n
        out[f"env/{tag}/reward"] = sum(t.final_reward for t in mine) / n
    out["rollout/truncated"] = sum(_truncated(t) for t in trajs) / max(len(trajs), 1)
    return out


def run_training(
    cfg: TrainConfig,
    progress_callback: ProgressCallback | None = None,
    *,
    resume: bool = False,
    on_event: EventCallback | None = None,
    env_source: EnvSource | None = None,
) -> dict[str, Any]:
    """Train with ``cfg``; return a summary (success before/after, run dir, timings).

    ``progress_callback(step, total_steps, metrics)`` is called after every step. ``resume``
    continues from the run's latest checkpoint (exactly: weights, optimizer, schedule, RNG, buffer).
    ``on_event(kind, info)`` reports the warm start's steps and each evaluation (a progress display).
    ``env_source`` replaces the one ``rollout.sandbox`` describes (a job's: the control plane's sandboxes).
    """
    emit: EventCallback = on_event or (lambda kind, info: None)
    import torch

    from rockroll.trainer import checkpoint as ckpt
    from rockroll.trainer.batch import collate
    from rockroll.trainer.config_io import config_to_dict, save_config
    from rockroll.trainer.evaluate import evaluate_plans
    from rockroll.trainer.export import export_model, export_weights
    from rockroll.trainer.metrics import MetricsLogger
    from rockroll.trainer.models import frozen_copy, load_policy
    from rockroll.trainer.plan_rollout import PlanRollout, plan_batch
    from rockroll.trainer.prepare import compute_advantages
    from rockroll.trainer.sft import build_demos, build_mixed_turn_demos, build_turn_demos, sft_train
    from rockroll.trainer.workers import make_workers

    multiturn = cfg.rollout.mode == "multiturn"
    torch.set_num_threads(cfg.torch_threads)
    _seed_everything(cfg.seed)
    run_dir = Path(cfg.logging.run_dir) / cfg.name
    state = ckpt.load_latest(run_dir) if resume else None
    if resume and state is None:
        raise FileNotFoundError(f"--resume: no checkpoint under {run_dir}/checkpoints")
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    logger = MetricsLogger(
        run_dir, tensorboard=cfg.logging.tensorboard, wandb=cfg.logging.wandb, wandb_project=cfg.logging.wandb_project,
        config=config_to_dict(cfg), truncate_after=state["step"] if state else -1,
    )  # fmt: skip
    summary: dict[str, Any] = {"run_dir": str(run_dir)}
    r = cfg.rollout
    envs = r.env_mix()  # one env, or a mix (multiturn)
    tags = [e.tag for e in envs]
    eval_seeds = list(range(r.eval_seed_offset, r.eval_seed_offset + r.eval_episodes))
    pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
    with ExitStack() as stack:
        model, tok = load_policy(cfg.model)
        if multiturn:
            check_context(cfg, tok)  # a history window that cannot fit fails here, before any rollout
        source = env_source or _env_source(cfg, stack, run_dir)
        rollout = PlanRollout(
            r.env_id, r.env_kwargs, tok, source=source, prompt_style=r.prompt_style, max_actions=r.max_actions,
            env_workers=r.max_concurrent_episodes or 8, tag=tags[0], limits=episode_config(cfg),
        )  # fmt: skip
        driver: Any = None  # multiturn: agentrl's scheduler + sample buffer, started once the weights are final
        stack.callback(rollout.close)
        if cfg.workers.use_ray:  # the rollout engine as a Ray actor (placed by workers.colocate)
            from rockroll.trainer.ray_workers import RayEngine

            engine: Any = RayEngine(cfg, {k: v.detach().cpu() for k, v in model.state_dict().items()}, tok)
        else:
            engine = HFEngine(model=frozen_copy(model), tokenizer=tok, max_batch_size=256, seed=cfg.seed)
        stack.callback(lambda: asyncio.run(engine.close()))
        if multiturn:
            driver = MultiTurnDriver(cfg, engine, source)
            stack.callback(driver.close)
        best = BestCheckpoint(select_seeds(cfg)) if multiturn else None

        def evaluate(prefix: str = "eval") -> dict[str, float]:
            t0 = time.perf_counter()
            emit("eval_start", {"prefix": prefix, "episodes": len(eval_seeds)})
            if driver is not None:
                m = driver.evaluate(eval_seeds, prefix)
            else:
                m = evaluate_plans(rollout, engine, eval_seeds, max_new_tokens=r.max_new_tokens, prefix=prefix)
            m["time/eval"] = time.perf_counter() - t0
            emit("eval_end", {"prefix": prefix, "metrics": m})
            return m

        start_step, buffer = 0, None
        if state is None:
            if cfg.sft.steps > 0:
                pre = evaluate("eval_pre_sft")
                summary["success_before_sft"] = mean_success(pre, "eval_pre_sft", tags)
                summary["eval_pre_sft"] = pre
                demo_metrics: dict[str, float] = {}
                if multiturn and len(envs) > 1:  # each env's expert, in proportion to the ratios
                    demos, demo_metrics = build_mixed_turn_demos(
                        envs, tok, episode_config(cfg), _demo_seeds(cfg), explore=cfg.sft.explore
                    )
                elif multiturn:
                    demos = build_turn_demos(
                        r.env_id,
                        r.env_kwargs,
                        tok,
                        episode_config(cfg),
                        _demo_seeds(cfg),
                        explore=cfg.sft.explore,
                        expert=r.expert,
                    )
                else:
                    demos = build_demos(rollout, _demo_seeds(cfg))
                sft_m = sft_train(
                    model,
                    demos,
                    steps=cfg.sft.steps,
                    lr=cfg.sft.lr,
                    batch_size=cfg.sft.batch_size,
                    seed=cfg.seed,
                    pad_id=tok.pad_token_id,
                    on_step=lambda i, m: emit("sft_step", {"step": i, "total": cfg.sft.steps, "metrics": m}),
                )
                engine.update_weights(model.state_dict(), 0)
                warm = export_model(model, tok, run_dir / "export" / "warmstart")
                summary["export_warmstart"] = str(write_episode(warm, cfg))
                logger.log(-1, {**pre, **sft_m, **demo_metrics})
        workers = make_workers(model, cfg)
        stack.callback(workers.close)
        version = 0
        if state is not None:
            workers.load_state_dict(state["workers"])
            ckpt.restore_rng(state["rng"])
            start_step, version, buffer = state["step"] + 1, state["version"], state.get("buffer")
            if driver is not None:  # the scheduler's seed stream goes on at the next step's batch
                driver.start_at(start_step)
            engine.update_weights(workers.policy_weights(), version)
            summary.update(state.get("summary", {}))
        if state is None:
            m0 = evaluate()
            summary["success_start"] = mean_success(m0, "eval", tags)
            summary["eval_start"] = m0
            summary["_eval0"] = m0
        t_run = time.perf_counter()
        ran_before = float(summary.get("rl_time_s", 0.0))  # RL seconds of the run before a resume
        saved_at = ran_before  # time/run_s of the last checkpoint (checkpoint.every_s)
        prefetch: cf.Future | None = None
        step = start_step - 1
        for step in range(start_step, cfg.total_steps):
            t0 = time.perf_counter()
            # 1. rollout (from the one-step-ahead buffer when async)
            rollout_metrics: dict[str, float] = {}
            if driver is not None:
                trajs, rollout_metrics = driver.next_batch()
            elif buffer is not None:
                trajs, buffer = buffer, None
            elif prefetch is not None:
                trajs, prefetch = prefetch.result(), None
            else:
                trajs = _rollout(cfg, rollout, engine, step)
            if driver is None and r.async_generation_ratio > 0 and step + 1 < cfg.total_steps:
                prefetch = pool.submit(_rollout, cfg, rollout, engine, step + 1)
            if driver is None:  # plan mode: complete groups of unmasked episodes, as the scheduler delivers
                trajs, rollout_metrics = plan_batch(trajs, r.groups_per_step, r.group_size)
            else:  # every failed attempt (retried or masked), over the scheduler's stages
                rollout_metrics["rollout/infra_failures"] = float(
                    sum(v for k, v in rollout_metrics.items() if k.startswith("rollout/infra_failures/"))
                )
            t1 = time.perf_counter()
            rows = None
            if driver is not None:
                forks = None
                if cfg.algo.turn_credit == "fork":
                    forks, fork_metrics = driver.fork_values(trajs)
                    rollout_metrics.update(fork_metrics)
                layout = "concat" if r.history_window is None else "per_turn"
                values_by_turn = None
                if cfg.algo.turn_credit == "gae":
                    values_by_turn = turn_values(trajs, layout, workers.values, tok.pad_token_id)
                rows = turn_rows(trajs, cfg.algo, layout, forks, values_by_turn)
                if merge_ok(cfg):
                    rows = merge_identical(rows)
                samples = rows.samples
            else:
                samples = [s for t in trajs for s in t.to_samples("concat")]
            if samples:
                batch = collate(samples, tok.pad_token_id)
                if rows is None:
                    batch.extras["truncated"] = torch.tensor([float(_truncated(t)) for t in trajs])
                # 2. old / reference logprobs, values
                if rows is None or not single_pass(cfg, len(batch)):
                    batch.extras["old_logprobs"] = workers.old_logprobs(batch)
                ref = workers.ref_logprobs(batch)
                if ref is not None:
                    batch.extras["ref_logprobs"] = ref
                values = workers.values(batch)
                if values is not None:
                    batch.extras["values"] = values
                t2 = time.perf_counter()
                # 3. advantages, 4. PPO update
                if rows is not None:
                    batch.extras["advantages"] = rows.advantage_tensor(batch.input_ids.shape[1])
                    batch.extras["loss_mask"] = batch.response_mask * rows.loss_weights()
                    if rows.returns is not None:
                        batch.extras["returns"] = rows.returns_tensor(batch.input_ids.shape[1])
                    metrics = dict(rows.metrics)
                else:
                    metrics = compute_advantages(batch, cfg.algo, r.max_new_tokens)
                metrics.update(workers.update(batch, step))
                t3 = time.perf_counter()
                # 5. weight sync
                version += 1
                weights = workers.policy_weights()
                (driver or engine).update_weights(weights, version)
                t4 = time.perf_counter()
                tokens = float(batch.attention_mask.sum())
                metrics["system/sync_bytes"] = float(_nbytes(weights))
            else:  # no episode of the batch carries a learning signal: no update, but the step counts
                metrics = {**(rows.metrics if rows else {}), "actor/updates": 0.0, "system/sync_bytes": 0.0}
                t2 = t3 = t4 = time.perf_counter()
                tokens = 0.0
            # 6. metrics, evaluation, checkpoint
            metrics.update({**rollout_metrics, **_env_metrics(trajs, tags)})
            metrics.update({
                "time/rollout": t1 - t0, "time/logprobs": t2 - t1, "time/train": t3 - t2, "time/sync": t4 - t3,
                "time/step": t4 - t0, "system/tokens_per_s": tokens / max(t4 - t0, 1e-9), "system/weight_version": float(version),
                "rollout/staleness": float(version - 1 - min((t.oldest_weight_version for t in trajs), default=version - 1)),
            })  # fmt: skip
            if step == 0 and "_eval0" in summary:
                metrics.update(summary.pop("_eval0"))
            last = step == cfg.total_steps - 1
            out_of_time = bool(cfg.time_budget_s) and time.perf_counter() - t_run > cfg.time_budget_s
            if (r.eval_every and (step + 1) % r.eval_every == 0) or last or out_of_time:
                metrics.update(evaluate())
                if best is not None and driver is not None:
                    metrics.update(best.consider(driver, step, workers.policy_weights()))
            # seconds of RL so far, evaluations included (a resumed run goes on from its checkpoint's):
            # the x-axis of success against wall time
            summary["rl_time_s"] = metrics["time/run_s"] = ran_before + time.perf_counter() - t_run
            logger.log(step, metrics)
            if progress_callback is not None:
                progress_callback(step, cfg.total_steps, metrics)
            every_s = cfg.checkpoint.every_s and summary["rl_time_s"] - saved_at >= cfg.checkpoint.every_s
            if (cfg.checkpoint.every and (step + 1) % cfg.checkpoint.every == 0) or every_s or last or out_of_time:
                saved_at = summary["rl_time_s"]
                if prefetch is not None:
                    buffer, prefetch = prefetch.result(), None
                save = {
                    "workers": workers.state_dict(),
                    "version": version,
                    "buffer": buffer,
                    "summary": {k: v for k, v in summary.items() if not k.startswith("_")},
                }
                ckpt.save_checkpoint(run_dir, step, save, keep=cfg.checkpoint.keep)
            if out_of_time:
                break
        if prefetch is not None:
            prefetch.result()
        if best is not None and best.weights is not None and best.step != step:
            (driver or engine).update_weights(
                best.weights, version + 1
            )  # the final evaluation scores the selected policy
            summary["best_step"] = best.step
        final = evaluate()
        chosen = best.weights if best is not None and best.weights is not None else workers.policy_weights()
        meta = {"run_dir": str(run_dir), "export": "final", "step": summary.get("best_step", step)}
        final_dir = export_weights(chosen, cfg.model.path, run_dir / "export" / "final", metadata=meta)
        summary["export_final"] = str(write_episode(final_dir, cfg))
        summary["success_end"] = mean_success(final, "eval", tags)
        summary["eval_end"] = final
        summary["steps"] = step + 1
        summary["rl_time_s"] = ran_before + time.perf_counter() - t_run
        refs = {
            e.tag: env_references(e.env_id, e.env_kwargs, eval_seeds, r.max_turns) if multiturn else None for e in envs
        }
        summary["report"] = run_report(summary, envs, refs, maps=len(eval_seeds))
        (run_dir / "report.md").write_text(summary["report"] + "\n")
        logger.close()
    pool.shutdown()
    (run_dir / "summary.json").write_text(__import__("json").dumps(summary, indent=2, default=str))
    return summary
