"""End-to-end training speed: held-out success per wall-clock second, synchronous against asynchronous training.

    python bench/training/train_speed.py --warmstart runs/mix_ws/export/warmstart --minutes 15 --json bench/results/train_speed.json

The task is multi-turn Sokoban 6x6 with one box (``configs/sokoban_multiturn.yaml``; the warm start is any
export that plays it, e.g. the mixed config's). Each env step in the sandboxes sleeps a long-tailed
delay first (lognormal, ``--median-s``/``--sigma``, capped at ``--max-s``): the env is registered
inside the process sandboxes as a fault-injection wrapper of Sokoban (``SlowSokoban-v0``). Two runs
train from the same warm start for ``--minutes`` each (side by side by default):

* ``sync``: lock-step turns (every live episode's turn in one round), no redundancy, the update after
  the batch (``async_generation_ratio: 0``);
* ``async``: episodes play on their own, one extra episode per group and one extra group per step
  (the first to complete win), the next batch generated while the update runs
  (``async_generation_ratio: 1``), the groups still running when a step has its groups carried into
  the next step (``tail: carry``), truncated importance sampling on the stale samples (``tis_cap``).

Both save a checkpoint every ``--ckpt-every-s`` seconds of training (``checkpoint.every_s``); afterwards
checkpoints are exported and play ``--episodes`` held-out rooms greedily in-process (no delay:
evaluation is not part of the race): the sync run's last first (the target), then each run's
checkpoints in order up to the first that reaches the target, and after it every ``--plot-stride``-th. Reported: steps, steps per hour, the success-against-wall-time
curves (``--plot``), and the last line ``speedup: N.NNx``. The target is the sync run's final success.
The speed-up is the sync run's training time to first reach it, divided by the async run's. It is
``n/a`` when the async run never reaches the target, or when the sync run ended no better than the
warm start. Also reported: the sync run's whole time over the async run's time to the target
(``speedup_to_end``), and the ratio of steps per hour. Time to a target is read at checkpoints, so
its resolution is ``--ckpt-every-s``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))

from bench.harness.subruns import run_children  # noqa: E402

CONFIG = str(ROOT / "configs" / "sokoban_multiturn.yaml")
ENV_ID = "SlowSokoban-v0"
INNER = {"dim_room": [6, 6], "num_boxes": 1}
GAIN_PCTS = (50, 75, 90)  # also reported: the time to these shares of the sync run's gain over the warm start
_SUCCESS: dict[tuple[Path, int], float] = {}  # (run dir, step) -> held-out success, evaluated once
EVAL_SEED_OFFSET = 1_000_000  # the trainer's default rollout.eval_seed_offset: never trained on
MODES: dict[str, list[str]] = {
    "sync": [
        "rollout.scheduler.async_generation_ratio=0", "rollout.scheduler.weight_sync=turn", "rollout.episode.lockstep=true",
        "rollout.scheduler.group_size_redundancy=0", "rollout.scheduler.extra_groups=0",
    ],
    "async": [
        "rollout.scheduler.async_generation_ratio=1", "rollout.scheduler.weight_sync=turn", "rollout.episode.lockstep=false",
        "rollout.scheduler.group_size_redundancy=1", "rollout.scheduler.extra_groups=1", "rollout.scheduler.tail=carry",
        "algo.tis_cap=2.0",
    ],
}  # fmt: skip


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """The per-step delay of the sandboxed env (``Latency`` fields)."""
    if args.median_s <= 0:
        return {"kind": "none"}
    return {"kind": "lognormal", "median_s": args.median_s, "sigma": args.sigma, "max_s": args.max_s}


def run_config(mode: str, args: argparse.Namespace) -> Any:
    """The trainer config of run ``mode``: the Sokoban config on the slowed env, from the warm start."""
    from rockroll.trainer.config_io import load_config

    overrides = [
        f"name=speed-{mode}", f"model.path={args.warmstart}", "model.build_tiny=false", "sft.steps=0",
        f"rollout.env_id={ENV_ID}", f"rollout.env_kwargs={json.dumps({'inner': 'Sokoban-v0', 'inner_kwargs': INNER})}",
        f"rollout.scheduler.num_env_groups={args.groups}", "total_steps=1000000", f"time_budget_s={args.minutes * 60}",
        "rollout.eval_every=0", f"rollout.eval_episodes={args.run_eval_episodes}", "rollout.select_episodes=0",
        f"checkpoint.every_s={args.ckpt_every_s}", "checkpoint.keep=1000", f"logging.run_dir={args.run_dir}",
        "logging.progress=false",
        *MODES[mode],
    ]  # fmt: skip
    return load_config(CONFIG, overrides)


def child(mode: str, args: argparse.Namespace) -> None:
    """Train run ``mode`` in this process, its envs in process sandboxes that register the slowed env."""
    from rockroll.agentrl.faults.envs import register_fault_env
    from rockroll.agentrl.sources.kinds import SandboxSource
    from rockroll.sandbox.base import SandboxSpec
    from rockroll.sandbox.manager import SandboxManager
    from rockroll.trainer.pipeline import run_training, sandbox_manager_name

    register_fault_env(ENV_ID, inner="Sokoban-v0")  # the host's copy (prompts, difficulty): no delay
    faults = {ENV_ID: {"inner": "Sokoban-v0", "step_latency": latency(args)}}
    spec = SandboxSpec(
        env=(
            ("ROCKROLL_ENV_MODULES", "rockroll.agentrl.faults.sandbox_envs"),
            ("ROCKROLL_FAULT_ENVS", json.dumps(faults)),
        )
    )
    cfg = run_config(mode, args)
    run_dir = Path(cfg.logging.run_dir) / cfg.name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    with ExitStack() as stack:
        manager = SandboxManager(
            backend="process", name=sandbox_manager_name(cfg.name, run_dir), default_spec=spec,
            db_url=f"sqlite:///{run_dir.resolve()}/sandboxes.db",
        )  # fmt: skip
        stack.callback(manager.close)
        summary = run_training(cfg, env_source=SandboxSource(manager))
    (run_dir / "bench.json").write_text(json.dumps({"mode": mode, "steps": summary.get("steps")}, indent=1))


def play(model_dir: Path, seeds: list[int], threads: int) -> float:
    """Held-out success of ``model_dir`` on Sokoban (in-process, no delay), greedy, with the run's episode settings."""
    from rockroll.agentrl.eval.config import EPISODE_FILE
    from rockroll.agentrl.eval.run import run_eval
    from rockroll.agentrl.rollout.config import EpisodeConfig
    from rockroll.agentrl.sources.kinds import LocalSource

    recorded = json.loads((model_dir / EPISODE_FILE).read_text())
    settings = {
        k: v for k, v in recorded.items() if k in EpisodeConfig.model_fields
    }  # envs, system_text: not episode keys
    config = {
        "name": str(model_dir),
        "engine": {"kind": "hf", "args": {"model_path": str(model_dir), "device": "cpu", "num_threads": threads}},
        "envs": [{"env": "Sokoban-v0", "seeds": seeds, "episodes": len(seeds), "kwargs": INNER}],
        "episode": {**settings, "temperature": 0.0},
        "concurrency": 64,
    }
    report = run_eval(config, source=LocalSource(), progress=False)
    played = [e for e in report.episodes if not e["masked"]]
    return sum(e["success"] for e in played) / max(len(played), 1)


def checkpoints(run_dir: Path) -> list[tuple[int, float]]:
    """The run's kept checkpoints: (step, training seconds at it, ``time/run_s``), in order."""
    from rockroll.trainer.run import checkpoint as ckpt

    clock = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "time/run_s" in rec:
            clock[int(rec["step"])] = float(rec["time/run_s"])
    return [(step, clock[step]) for step in sorted(ckpt.list_checkpoints(run_dir))]


def success_at(run_dir: Path, step: int, seeds: list[int], threads: int) -> float:
    """Held-out success of the run's checkpoint ``step`` (exported, then played in-process)."""
    from rockroll.trainer.config_io import load_config
    from rockroll.trainer.rollout.multiturn import write_episode
    from rockroll.trainer.run.export import export_run

    if (run_dir, step) in _SUCCESS:
        return _SUCCESS[run_dir, step]
    cfg = load_config(run_dir / "config.yaml")
    out = write_episode(export_run(run_dir, step, run_dir / "export" / f"step-{step}"), cfg)  # + prompt settings
    try:
        _SUCCESS[run_dir, step] = play(out, seeds, threads)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return _SUCCESS[run_dir, step]


def curve(
    run_dir: Path, seeds: list[int], threads: int, *, target: float | None = None, stride: int = 1
) -> list[dict[str, float]]:
    """Held-out success along the run's checkpoints: every one until the first that reaches ``target``
    (so the time to it is read at full resolution), then every ``stride``-th and the last (for the plot)."""
    kept = checkpoints(run_dir)
    points, reached = [], target is None
    for i, (step, seconds) in enumerate(kept):
        if reached and i % stride and i != len(kept) - 1:
            continue
        success = success_at(run_dir, step, seeds, threads)
        points.append({"step": step, "seconds": seconds, "success": success})
        reached = reached or success >= target  # type: ignore[operator]
    return points


def time_to(points: list[dict[str, float]], target: float) -> float | None:
    """Training seconds at the first checkpoint whose success reaches ``target`` (None: never)."""
    return next((p["seconds"] for p in points if p["success"] >= target), None)


def race(curves: dict[str, list[dict[str, float]]], warm: float) -> dict[str, Any]:
    """The sync run's final success as the target; each run's training time to first reach it, and the ratios."""
    target, t_end = curves["sync"][-1]["success"], curves["sync"][-1]["seconds"]
    t_sync = time_to(curves["sync"][1:], target)
    t_async = time_to(curves["async"][1:], target)
    if target <= warm:  # sync never got past the warm start: nothing to race for
        t_async = None
    out = {
        "target": target, "sync_s": t_end, "sync_s_to_target": t_sync, "async_s_to_target": t_async,
        "speedup": t_sync / t_async if t_async and t_sync else None,
        "speedup_to_end": t_end / t_async if t_async else None,
    }  # fmt: skip
    for pct in GAIN_PCTS:  # less noisy targets than the final checkpoint: a share of the sync run's gain
        t = warm + pct / 100 * (target - warm)
        ts, ta = time_to(curves["sync"][1:], t), time_to(curves["async"][1:], t)
        out[f"speedup_{pct}pct_gain"] = ts / ta if ts and ta and target > warm else None
    return out


def plot(curves: dict[str, list[dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for mode, pts in curves.items():
        ax.plot([p["seconds"] / 60 for p in pts], [p["success"] for p in pts], marker="o", label=mode)
    ax.set_xlabel("training wall time (min)")
    ax.set_ylabel("held-out success (Sokoban 6x6)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def report(args: argparse.Namespace, modes: list[str]) -> dict[str, Any]:
    seeds = list(range(EVAL_SEED_OFFSET, EVAL_SEED_OFFSET + args.episodes))
    warm = play(Path(args.warmstart), seeds, args.threads)
    res: dict[str, Any] = {"task": "Sokoban 6x6, one box, multi-turn", "latency": latency(args), "warm_start": warm}
    curves: dict[str, list[dict[str, float]]] = {}
    target = None
    if "sync" in modes:  # the race's target: the sync run's final success
        sync_dir = Path(args.run_dir) / "speed-sync"
        target = success_at(sync_dir, checkpoints(sync_dir)[-1][0], seeds, args.threads)
    for mode in modes:
        run_dir = Path(args.run_dir) / f"speed-{mode}"
        pts = [{"step": -1, "seconds": 0.0, "success": warm}]
        pts += curve(run_dir, seeds, args.threads, target=target, stride=args.plot_stride)
        curves[mode] = pts
        steps = json.loads((run_dir / "bench.json").read_text())["steps"]
        hours = pts[-1]["seconds"] / 3600
        res[mode] = {"steps": steps, "steps_per_hour": steps / hours if hours else 0.0, "curve": pts}
        print(f"{mode:<6} {steps:>5} steps in {pts[-1]['seconds'] / 60:5.1f} min ({res[mode]['steps_per_hour']:7.0f}/h); "
              f"held-out success {warm:.3f} -> {pts[-1]['success']:.3f}")  # fmt: skip
    if args.plot:
        plot(curves, Path(args.plot))
    speedup: float | None = None
    if "sync" in curves and "async" in curves:
        res.update(race(curves, warm))
        speedup = res["speedup"]
        res["steps_per_hour_ratio"] = res["async"]["steps_per_hour"] / max(res["sync"]["steps_per_hour"], 1e-9)
        t_async = res["async_s_to_target"]
        print(f"target (sync's final) {res['target']:.3f}: sync first at {res['sync_s_to_target']:.0f} s "
              f"(ran {res['sync_s']:.0f} s), async at {'never' if t_async is None else f'{t_async:.0f} s'}; "
              f"final async {curves['async'][-1]['success']:.3f}; steps per hour x{res['steps_per_hour_ratio']:.2f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    if "speedup_50pct_gain" in res:
        gains = ", ".join(
            f"{p}%: " + (f"{res[f'speedup_{p}pct_gain']:.2f}x" if res[f"speedup_{p}pct_gain"] else "n/a")
            for p in GAIN_PCTS
        )
        print(f"speed-up to a share of the sync run's gain over the warm start: {gains}")
    print(f"speedup: {speedup:.2f}x" if speedup else "speedup: n/a")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warmstart", default="runs/mix_ws/export/warmstart", help="an export that plays Sokoban 6x6")
    ap.add_argument("--minutes", type=float, default=15.0, help="training wall time of each run")
    ap.add_argument("--modes", default="sync,async", help="comma-separated subset of sync,async")
    ap.add_argument("--parallel", type=int, default=2, help="runs at once")
    ap.add_argument("--groups", type=int, default=8, help="groups of 8 episodes per step")
    ap.add_argument("--median-s", type=float, default=0.05, help="median env step delay (0: no delay)")
    ap.add_argument("--sigma", type=float, default=1.2, help="lognormal shape of the delay")
    ap.add_argument("--max-s", type=float, default=5.0, help="longest delay")
    ap.add_argument("--ckpt-every-s", type=float, default=120.0, help="training seconds between kept checkpoints")
    ap.add_argument("--episodes", type=int, default=300, help="held-out rooms per checkpoint")
    ap.add_argument("--plot-stride", type=int, default=3, help="after the target is reached, every n-th checkpoint")
    ap.add_argument("--run-eval-episodes", type=int, default=8, help="the runs' own start/end evaluation (slow envs)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the offline evaluation")
    ap.add_argument("--run-dir", default="runs")
    ap.add_argument("--plot", help="write the success-against-wall-time plot here (PNG)")
    ap.add_argument("--report-only", action="store_true", help="only evaluate the runs already in --run-dir")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: train this run in this process
    args = ap.parse_args()
    if args.one:
        child(args.one, args)
        return
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        ap.error("--modes must be a subset of sync,async")
    if not args.report_only:
        Path(args.run_dir).mkdir(parents=True, exist_ok=True)
        keys = (
            "warmstart",
            "minutes",
            "groups",
            "median_s",
            "sigma",
            "max_s",
            "ckpt_every_s",
            "run_eval_episodes",
            "run_dir",
        )
        argv = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in keys]
        codes = run_children(__file__, argv, modes, Path(args.run_dir), "speed-", args.parallel)
        failed = [m for m, code in codes.items() if code != 0]
        if failed:
            sys.exit(f"run {failed[0]} failed: see {Path(args.run_dir) / f'speed-{failed[0]}.log'}")
    report(args, modes)


if __name__ == "__main__":
    main()
