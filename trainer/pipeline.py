"""The training controller: one loop that reads top to bottom.

    1. rollout.next_batch(step)            (trainer/rollout/base.py: plan mode, or agentrl's scheduler)
    2-4. learn(...)                        (trainer/learner/learn.py: logprobs, advantages, PPO epochs)
    5. rollout.update_weights(weights, v)  (trainer/rollout/engine_sync.py: sleep/wake, restarts)
    6. metrics (metrics.jsonl, TensorBoard, W&B) -> evaluation -> checkpoint

The rollout and its engine (``rollout.engine``: hf, vllm, sglang, openai, built through the engine
registry) sit behind :class:`rockroll.trainer.rollout.base.Rollout`; the loop never reaches inside.

:func:`run_training` is the one entry point: the CLI (``rockroll train``) and the jobs API
(``POST /v1/jobs`` with kind ``train``) both call it.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rockroll.agentrl.sources.kinds import EnvSource
from rockroll.agentrl.tools.metrics import tool_metrics
from rockroll.trainer.config import TrainConfig
from rockroll.trainer.evaluation.background import BackgroundValidation, background_validation
from rockroll.trainer.evaluation.exact import exact_validator
from rockroll.trainer.evaluation.report import env_references, run_report
from rockroll.trainer.evaluation.selection import BestCheckpoint, run_notes, select_seeds, selection_summary
from rockroll.trainer.evaluation.sft_validation import sft_validator
from rockroll.trainer.learner.learn import cap_hit_share, learn, truncated
from rockroll.trainer.rollout.base import Rollout
from rockroll.trainer.rollout.env_check import check_train_envs
from rockroll.trainer.rollout.multiturn import check_context, env_instructions, mean_success, write_episode
from rockroll.trainer.rollout.setup import make_rollout
from rockroll.trainer.run.sandboxes import run_env_source, sandbox_manager, sandbox_manager_name

__all__ = ["run_training", "sandbox_manager", "sandbox_manager_name", "ProgressCallback", "EventCallback"]

ProgressCallback = Callable[[int, int, dict[str, float]], None]
EventCallback = Callable[
    [str, dict[str, Any]], None
]  # progress: sft_step, eval_start, eval_end (trainer/run/progress.py)


def _seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _demo_seeds(cfg: TrainConfig) -> list[int]:
    """Seeds of SFT demonstrations: after the fixed training maps (if any), never an eval seed."""
    r = cfg.rollout
    start = r.train_seeds
    evals = range(r.eval_seed_offset, r.eval_seed_offset + r.eval_episodes)
    return [s for s in range(start, start + cfg.sft.num_demos + r.eval_episodes) if s not in evals][: cfg.sft.num_demos]


def _env_metrics(trajs: list[Any], tags: list[str]) -> dict[str, float]:
    """``env/<tag>/success`` and ``env/<tag>/reward`` per env of the delivered (unmasked) episodes."""
    out: dict[str, float] = {}
    for tag in tags:
        mine = [t for t in trajs if (t.env_tag or tags[0]) == tag]
        n = max(len(mine), 1)
        out[f"env/{tag}/success"] = sum(t.success for t in mine) / n
        out[f"env/{tag}/reward"] = sum(t.final_reward for t in mine) / n
    out["rollout/truncated"] = sum(truncated(t) for t in trajs) / max(len(trajs), 1)
    out["rollout/cap_hit_share"] = cap_hit_share(trajs)
    out.update({f"rollout/tools/{k}": v for k, v in tool_metrics(trajs).items()})  # tool envs' turns only
    return out


def _cap_hits(run: _Run, step: int, metrics: dict[str, float]) -> None:
    """Flag a step whose answers hit the token cap beyond ``rollout.cap_hit_warn`` (``rollout/cap_hit_alert``,
    shown by the progress line) and count such steps for the report (``cap_hit_steps``, ``cap_hit_max``)."""
    share = metrics.get("rollout/cap_hit_share", 0.0)
    run.summary["cap_hit_max"] = max(run.summary.get("cap_hit_max", 0.0), share)
    if share > run.cfg.rollout.cap_hit_warn:
        metrics["rollout/cap_hit_alert"] = 1.0
        run.summary["cap_hit_steps"] = run.summary.get("cap_hit_steps", 0) + 1
        run.summary.setdefault("cap_hit_first_step", step)


@dataclass
class _Run:
    """What the loop's parts share: the config, the rollout, the workers, the log and the summary."""

    cfg: TrainConfig
    run_dir: Path
    tok: Any
    rollout: Rollout
    logger: Any
    emit: EventCallback
    summary: dict[str, Any]
    workers: Any = None
    eval_seeds: list[int] = field(default_factory=list)
    t_run: float = 0.0  # when this process's RL steps began
    ran_before: float = 0.0  # RL seconds of the run before a resume
    system_text: str | None = None  # the env instructions the policy sees (recorded in its exports)

    def evaluate(self, prefix: str = "eval") -> dict[str, float]:
        """Greedy success on the held-out seeds (``<prefix>/<tag>/...``), timed and reported to ``emit``."""
        t0 = time.perf_counter()
        self.emit("eval_start", {"prefix": prefix, "episodes": len(self.eval_seeds)})
        m = self.rollout.evaluate(self.eval_seeds, prefix)
        m["time/eval"] = time.perf_counter() - t0
        self.emit("eval_end", {"prefix": prefix, "metrics": m})
        return m


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
    import torch

    from rockroll.trainer.config_io import config_to_dict, save_config
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.workers import make_workers
    from rockroll.trainer.run import checkpoint as ckpt
    from rockroll.trainer.run.metrics import MetricsLogger

    torch.set_num_threads(cfg.torch_threads)
    _seed_everything(cfg.seed)
    run_dir = Path(cfg.logging.run_dir) / cfg.name
    state = ckpt.load_latest(run_dir) if resume else None
    if resume and state is None:
        raise FileNotFoundError(f"--resume: no checkpoint under {run_dir}/checkpoints")
    check_train_envs(cfg, env_source)  # an id no one knows fails here, before the run dir and the model
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    logger = MetricsLogger(
        run_dir, tensorboard=cfg.logging.tensorboard, wandb=cfg.logging.wandb, wandb_project=cfg.logging.wandb_project,
        config=config_to_dict(cfg), truncate_after=state["step"] if state else -1,
    )  # fmt: skip
    r = cfg.rollout
    with ExitStack() as stack:
        if r.mode == "rlvr":  # a tiny model's tokenizer learns the dataset's text, not the envs'
            from rockroll.trainer.rollout.rlvr_model import ensure_task_model

            ensure_task_model(cfg)
        model, tok = load_policy(cfg.model)
        source = env_source or run_env_source(cfg, stack, run_dir)
        if r.plays_envs:
            check_context(cfg, tok, source)  # a history window that cannot fit fails here, before any rollout
        rollout = make_rollout(cfg, model, tok, source)
        stack.callback(rollout.close)
        seeds = list(range(r.eval_seed_offset, r.eval_seed_offset + r.eval_episodes))
        run = _Run(cfg, run_dir, tok, rollout, logger, on_event or (lambda kind, info: None), {"run_dir": str(run_dir)},
                   eval_seeds=seeds, system_text=env_instructions(cfg, source))  # fmt: skip
        if state is None and cfg.sft.steps > 0:
            _warm_start(run, model)
        run.workers = make_workers(model, cfg)
        stack.callback(run.workers.close)
        start, version = _begin(run, state)
        step, version, best = _loop(run, start, version, progress_callback)
        _finish(run, step, version, best)
        logger.close()
    (run_dir / "summary.json").write_text(json.dumps(run.summary, indent=2, default=str))
    return run.summary


def _warm_start(run: _Run, model: Any) -> None:
    """Greedy success before, then SFT on expert demonstrations (each env's expert, by ratio), synced to the engine."""
    from rockroll.trainer.learner.sft import sft_train
    from rockroll.trainer.run.export import export_model

    cfg = run.cfg
    pre = run.evaluate("eval_pre_sft")
    run.summary["success_before_sft"] = mean_success(pre, "eval_pre_sft", run.rollout.tags)
    run.summary["eval_pre_sft"] = pre
    demos, demo_metrics = _demos(run)
    sft_m = sft_train(
        model, demos, steps=cfg.sft.steps, lr=cfg.sft.lr, batch_size=cfg.sft.batch_size, seed=cfg.seed,
        pad_id=run.tok.pad_token_id, loss_on=cfg.sft.loss_on,
        on_step=lambda i, m: run.emit("sft_step", {"step": i, "total": cfg.sft.steps, "metrics": m}),
        validate=sft_validator(run, model), validate_every=cfg.sft.eval_every,
    )  # fmt: skip
    run.rollout.update_weights(model.state_dict(), 0)
    warm = export_model(model, run.tok, run.run_dir / "export" / "warmstart")
    run.summary["export_warmstart"] = str(write_episode(warm, cfg, run.system_text))
    run.logger.log(-1, {**pre, **sft_m, **demo_metrics})


def _demos(run: _Run) -> tuple[list[Any], dict[str, float]]:
    """The warm start's rows: each env's expert by ratio (multiturn), the dataset's answers (rlvr), both split by
    the batch's ratio (rlvr beside envs), or whole plans (plan)."""
    from rockroll.trainer.learner.sft import build_demos, build_mixed_turn_demos, build_turn_demos

    cfg, r = run.cfg, run.cfg.rollout
    envs = r.env_mix()
    if r.mode == "rlvr" and r.envs:
        from rockroll.trainer.rollout.mixed import demo_split

        rows, episodes = demo_split(cfg)
        demos = run.rollout.demos(rows)  # type: ignore[attr-defined]
        env_demos, metrics = build_mixed_turn_demos(envs, run.tok, r.episode, _demo_seeds(cfg)[:episodes])
        return demos + env_demos, {**metrics, "sft/rlvr/demo_rows": float(len(demos))}
    if r.mode == "multiturn" and len(envs) > 1:
        return build_mixed_turn_demos(
            envs, run.tok, r.episode, _demo_seeds(cfg), explore=cfg.sft.explore, label=cfg.sft.label
        )
    if r.mode == "multiturn":
        demos = build_turn_demos(
            r.env_id,
            r.env_kwargs,
            run.tok,
            r.episode,
            _demo_seeds(cfg),
            explore=cfg.sft.explore,
            expert=r.expert,
            label=cfg.sft.label,
        )
        return demos, {}
    if r.mode == "rlvr":
        return run.rollout.demos(cfg.sft.num_demos), {}  # type: ignore[attr-defined]
    return build_demos(run.rollout.plans, _demo_seeds(cfg)), {}  # type: ignore[attr-defined]


def _begin(run: _Run, state: dict[str, Any] | None) -> tuple[int, int]:
    """``(first step, weight version)``: a fresh run evaluates the start; a resumed one restores its checkpoint
    (workers, RNG, the rollout's seed stream and prefetched batch) and syncs its weights to the engine."""
    from rockroll.trainer.run import checkpoint as ckpt

    if state is None:
        m0 = run.evaluate()
        run.summary["success_start"] = mean_success(m0, "eval", run.rollout.tags)
        run.summary["eval_start"] = m0
        run.summary["_eval0"] = m0
        return 0, 0
    run.workers.load_state_dict(state["workers"])
    ckpt.restore_rng(state["rng"])
    start, version = state["step"] + 1, state["version"]
    run.rollout.start_at(start, state.get("buffer"))
    run.rollout.update_weights(run.workers.policy_weights(), version)
    run.summary.update(state.get("summary", {}))
    return start, version


def _loop(run: _Run, start: int, version: int, progress: ProgressCallback | None) -> tuple[int, int, BestCheckpoint]:
    """The RL steps: rollout, update, weight sync, metrics, evaluation, checkpoint. ``(last step, version, best)``."""
    cfg, rollout = run.cfg, run.rollout
    best = BestCheckpoint(select_seeds(cfg), exact_validator(cfg, rollout))
    background = background_validation(cfg, best, rollout, run.tok) if best.seeds else None
    try:
        return _steps(run, start, version, progress, best, background)
    finally:
        if background is not None:
            background.close()


def _steps(
    run: _Run,
    start: int,
    version: int,
    progress: ProgressCallback | None,
    best: BestCheckpoint,
    background: BackgroundValidation | None,
) -> tuple[int, int, BestCheckpoint]:
    cfg, rollout, workers = run.cfg, run.rollout, run.workers
    t_run = run.t_run = time.perf_counter()
    ran_before = run.ran_before = float(run.summary.get("rl_time_s", 0.0))
    saved_at = ran_before  # time/run_s of the last checkpoint (checkpoint.every_s)
    step = start - 1
    for step in range(start, cfg.total_steps):
        t0 = time.perf_counter()
        trajs, metrics = rollout.next_batch(step)  # 1. rollout
        t1 = time.perf_counter()
        learned, weights = learn(cfg, workers, rollout, trajs, step, run.tok.pad_token_id)  # 2-4. update
        metrics.update(learned)
        if weights is not None:  # 5. weight sync
            version += 1
            metrics.update(rollout.update_weights(weights, version))
        t2 = time.perf_counter()
        # 6. metrics, evaluation, checkpoint
        metrics.update(_env_metrics(trajs, rollout.tags))
        _cap_hits(run, step, metrics)
        oldest = min((t.oldest_weight_version for t in trajs), default=version - 1)
        metrics.update({
            "time/rollout": t1 - t0, "time/step": t2 - t0, "system/weight_version": float(version),
            "system/tokens_per_s": metrics.pop("system/tokens", 0.0) / max(t2 - t0, 1e-9),
            "rollout/staleness": float(version - 1 - oldest),
        })  # fmt: skip
        metrics.setdefault("time/sync", 0.0)
        if step == 0 and "_eval0" in run.summary:
            metrics.update(run.summary.pop("_eval0"))
        last = step == cfg.total_steps - 1
        out_of_time = bool(cfg.time_budget_s) and time.perf_counter() - t_run > cfg.time_budget_s
        evaluate, validate = _due(cfg, step, last or out_of_time)
        if evaluate:
            metrics.update(run.evaluate())
        if validate:
            t_val = time.perf_counter()
            if background is not None:  # the last step's validation is waited for
                metrics.update(
                    background.submit(step, workers.policy_weights(), rollout.tags, wait=last or out_of_time)
                )
            else:
                metrics.update(best.consider(rollout, step, workers.policy_weights()))
            metrics["time/validate"] = time.perf_counter() - t_val
        elif background is not None:
            metrics.update(background.collect(rollout.tags))
        # seconds of RL so far, evaluations included (a resumed run goes on from its checkpoint's)
        run.summary["rl_time_s"] = metrics["time/run_s"] = ran_before + time.perf_counter() - t_run
        run.logger.log(step, metrics)
        if progress is not None:
            progress(step, cfg.total_steps, metrics)
        every_s = cfg.checkpoint.every_s and run.summary["rl_time_s"] - saved_at >= cfg.checkpoint.every_s
        if (cfg.checkpoint.every and (step + 1) % cfg.checkpoint.every == 0) or every_s or last or out_of_time:
            saved_at = run.summary["rl_time_s"]
            _save(run, step, version)
        if out_of_time:
            break
    return step, version, best


def _due(cfg: TrainConfig, step: int, final: bool) -> tuple[bool, bool]:
    """``(evaluate, validate)`` after ``step``: played evaluation every ``eval_every`` steps, validation every
    ``select_every`` (None: with each evaluation); both after the last step."""
    r = cfg.rollout
    evaluate = final or bool(r.eval_every and (step + 1) % r.eval_every == 0)
    every = r.select_every
    validate = evaluate if every is None else final or bool(every and (step + 1) % every == 0)
    return evaluate, validate


def _save(run: _Run, step: int, version: int) -> None:
    from rockroll.trainer.run import checkpoint as ckpt

    save = {
        "workers": run.workers.state_dict(),
        "version": version,
        "buffer": run.rollout.pending(),
        "summary": {k: v for k, v in run.summary.items() if not k.startswith("_")},
    }
    ckpt.save_checkpoint(run.run_dir, step, save, keep=run.cfg.checkpoint.keep)


def _finish(run: _Run, step: int, version: int, best: BestCheckpoint) -> None:
    """The final evaluation (of the best checkpoint when validation chose one), the export and the report."""
    from rockroll.trainer.run.export import export_weights

    cfg, summary = run.cfg, run.summary
    if best.weights is not None and best.step != step:
        run.rollout.update_weights(best.weights, version + 1)  # the final evaluation scores the selected policy
        summary["best_step"] = best.step
    final = run.evaluate()
    chosen = best.weights if best.weights is not None else run.workers.policy_weights()
    meta = {"run_dir": str(run.run_dir), "export": "final", "step": summary.get("best_step", step)}
    final_dir = export_weights(chosen, cfg.model.path, run.run_dir / "export" / "final", metadata=meta)
    summary["export_final"] = str(write_episode(final_dir, cfg, run.system_text))
    summary["success_end"] = mean_success(final, "eval", run.rollout.tags)
    summary["eval_end"] = final
    summary["steps"] = step + 1
    summary["rl_time_s"] = run.ran_before + time.perf_counter() - run.t_run
    envs: list[Any] = cfg.rollout.env_mix()
    if cfg.rollout.mode == "rlvr":  # the report's rows are the reward tags
        envs = run.rollout.report_envs()  # type: ignore[attr-defined]
    played = {e.tag for e in cfg.rollout.env_mix()} if cfg.rollout.plays_envs else set()
    refs = {
        e.tag: env_references(e.env_id, e.env_kwargs, run.eval_seeds, cfg.rollout.episode.max_turns)
        if e.tag in played
        else None
        for e in envs
    }
    summary.update(selection_summary(best, step))
    summary["report"] = run_report(summary, envs, refs, maps=len(run.eval_seeds)) + run_notes(summary, cfg)
    (run.run_dir / "report.md").write_text(summary["report"] + "\n")
