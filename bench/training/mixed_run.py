"""Env mixing and sandbox faults in multi-turn training: one mixed run against single-env runs of the same
budget, and the mixed run again while sandboxes are killed.

    python bench/training/mixed_run.py --warmstart runs/mix_ws/export/warmstart --steps 300 --json bench/results/mixed_run.json

Four runs of ``configs/mixed_frozenlake_sokoban.yaml`` start from one warm start (``--warmstart``: the
config's own, ``rockroll train configs/mixed_frozenlake_sokoban.yaml total_steps=1``, which imitates both
experts 2:1) and train ``--steps`` RL steps of the same size (``scheduler.num_env_groups`` groups of
``scheduler.group_size``):

* ``mixed``: the config as it is, FrozenLake and Sokoban groups 2:1;
* ``frozenlake`` and ``sokoban``: the same config with only that env (all groups of one env);
* ``faulted``: ``mixed`` while a killer thread, every ``--wave-s`` seconds, SIGKILLs each ready process
  sandbox of the run with probability ``--kill-fraction`` (the sandbox dies with its sessions; the
  manager replaces it and the rollout retries or masks the episodes it held).

Each run plays in a process of its own (``--parallel`` at once) through the trainer's own pipeline and
process sandboxes. Reported per env: held-out success (``eval_episodes`` held-out seeds per env, greedy)
at every evaluation and for the exported final policy. The mixed run passes where it reaches at least
90% of the single-env run on each env; the faulted run passes where every evaluation point of each env
lies within two binomial standard errors of the unfaulted mixed run's.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import shutil
import signal
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))

from bench.harness.subruns import run_children  # noqa: E402

CONFIG = str(ROOT / "configs" / "mixed_frozenlake_sokoban.yaml")
RUNS = ("mixed", "frozenlake", "sokoban", "faulted")


class SandboxKiller(threading.Thread):
    """Every ``wave_s`` seconds, SIGKILL each ready sandbox of ``manager`` with probability ``fraction``;
    after ``max_kills`` kills (None: no limit) it stops, so a short run ends however slowly sandboxes restart."""

    def __init__(
        self, manager: Any, fraction: float, wave_s: float, seed: int = 0, max_kills: int | None = None
    ) -> None:
        super().__init__(name="sandbox-killer", daemon=True)
        self.manager, self.fraction, self.wave_s, self.max_kills = manager, fraction, wave_s, max_kills
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.kills: list[dict[str, Any]] = []
        self.exposures = 0  # ready sandboxes seen, summed over waves: kills / exposures is the faulted share

    def run(self) -> None:
        from rockroll.sandbox.managed import SandboxState

        t0 = time.monotonic()
        for _wave in range(100_000):  # bounded; the run sets ``stop`` when it ends
            if self.stop.wait(self.wave_s):
                return
            ready = [sb for sb in self.manager.list() if sb.state == SandboxState.READY and sb.handle is not None]
            self.exposures += len(ready)
            for sb in ready:
                if self.max_kills is not None and len(self.kills) >= self.max_kills:
                    return
                if self.rng.random() >= self.fraction:
                    continue
                pid = int(sb.handle.ref)  # the process backend's sandbox: a process group of its own
                if pid <= 1 or os.getpgid(pid) == os.getpgrp():
                    continue  # never this process's own group
                try:
                    os.killpg(pid, signal.SIGKILL)
                    self.kills.append({"at_s": round(time.monotonic() - t0, 1), "sandbox": sb.id})
                except ProcessLookupError:
                    pass


def run_config(name: str, args: argparse.Namespace) -> Any:
    """The trainer config of run ``name``: the mixed config from the warm start, one env for a single-env run."""
    from rockroll.trainer.config_io import config_from_dict, config_to_dict, load_config

    overrides = [
        f"name=mixrun-{name}", f"model.path={args.warmstart}", "model.build_tiny=false", "sft.steps=0",
        f"total_steps={args.steps}", "time_budget_s=0", f"rollout.eval_every={args.eval_every}",
        f"rollout.eval_episodes={args.eval_episodes}", f"logging.run_dir={args.run_dir}",
    ]  # fmt: skip
    cfg = load_config(CONFIG, overrides)
    if name in ("frozenlake", "sokoban"):
        data = config_to_dict(cfg)
        (entry,) = [dict(e, ratio=1) for e in data["rollout"]["envs"] if e["tag"] == name]
        data["rollout"].update(envs=[entry], env_id=entry["env_id"], env_kwargs=entry["env_kwargs"])
        cfg = config_from_dict(data)
    return cfg


def child(name: str, args: argparse.Namespace) -> None:
    """Train run ``name`` in this process (process sandboxes of its own manager) and write its result."""
    from rockroll.agentrl.sources.kinds import SandboxSource
    from rockroll.trainer.pipeline import run_training, sandbox_manager

    handler = logging.StreamHandler()  # the run's log: why each infra failure happened
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    logging.getLogger("rockroll.agentrl.rollout.env_manager").addHandler(handler)
    logging.getLogger("rockroll.agentrl.rollout.env_manager").setLevel(logging.INFO)
    cfg = run_config(name, args)
    run_dir = Path(cfg.logging.run_dir) / cfg.name
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run every time (rockroll train --overwrite)
    run_dir.mkdir(parents=True)
    killer = None
    t0 = time.perf_counter()
    with ExitStack() as stack:  # the manager the trainer builds for rollout.sandbox, held here for the killer
        manager = sandbox_manager(cfg, run_dir)
        stack.callback(manager.close)
        if name == "faulted":
            killer = SandboxKiller(manager, args.kill_fraction, args.wave_s, seed=args.seed, max_kills=args.max_kills)
            killer.start()
            stack.callback(killer.stop.set)
        summary = run_training(cfg, env_source=SandboxSource(manager))
    out = {
        "name": name,
        "wall_s": round(time.perf_counter() - t0, 1),
        "steps": summary.get("steps"),
        "eval_end": summary.get("eval_end", {}),
        "eval_start": summary.get("eval_start", {}),
        "kills": killer.kills if killer else [],
        "exposures": killer.exposures if killer else 0,
    }
    (run_dir / "bench.json").write_text(json.dumps(out, indent=1))


def curves(run_dir: Path, tags: list[str]) -> tuple[dict[str, list[tuple[int, float]]], dict[str, float]]:
    """Held-out success per env at every evaluation of the run, and the run's masked, retried and delivered episodes."""
    out: dict[str, list[tuple[int, float]]] = {t: [] for t in tags}
    masked = retries = delivered = 0.0
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        masked += rec.get("rollout/episodes_masked", 0.0)
        retries += rec.get("rollout/infra_retries", 0.0)
        delivered += rec.get("rollout/episodes_delivered", 0.0)
        for t in tags:
            if f"eval/{t}/success" in rec:
                out[t].append((int(rec["step"]), float(rec[f"eval/{t}/success"])))
    return out, {"masked": masked, "retries": retries, "delivered": delivered}


def within_noise(a: float, b: float, n: int, z: float = 2.0) -> bool:
    """Whether two success rates on ``n`` episodes each differ by at most ``z`` binomial standard errors."""
    se = math.sqrt(max(a * (1 - a), 1e-9) / n + max(b * (1 - b), 1e-9) / n)
    return abs(a - b) <= z * se


def _ratio(mixed: float, single: float) -> float:
    """``mixed / single``; 1.0 where both are 0 (nothing to lose), inf where only the single run is 0."""
    if single > 0:
        return mixed / single
    return 1.0 if mixed == 0 else math.inf


def report(args: argparse.Namespace) -> dict[str, Any]:
    """Compare the runs' results (read from their run dirs) and print the tables."""
    tags = ["frozenlake", "sokoban"]
    res: dict[str, Any] = {"config": CONFIG, "warmstart": args.warmstart, "steps": args.steps, "runs": {}}
    for name in RUNS:
        run_dir = Path(args.run_dir) / f"mixrun-{name}"
        if not (run_dir / "bench.json").exists():
            continue
        b = json.loads((run_dir / "bench.json").read_text())
        c, counts = curves(run_dir, tags if name in ("mixed", "faulted") else [name])
        b.update(curves=c, **counts)
        b["final"] = {t: b["eval_end"].get(f"eval/{t}/success") for t in c}
        b["start"] = {t: b["eval_start"].get(f"eval/{t}/success") for t in c}
        res["runs"][name] = b
    runs = res["runs"]
    print(f"{'run':<11} {'env':<11} {'warm start':>10} {'final':>7} {'last evals':>10} {'wall s':>7}")
    for name, b in runs.items():
        for t, pts in b["curves"].items():
            last = [s for _, s in pts[-3:]]
            b.setdefault("last3", {})[t] = sum(last) / max(len(last), 1)
            print(
                f"{name:<11} {t:<11} {b['start'][t]:>10.3f} {b['final'][t]:>7.3f} {b['last3'][t]:>10.3f} {b['wall_s']:>7.0f}"
            )
    if "mixed" in runs:
        res["mixed_vs_single"] = {}
        for t in tags:
            if t in runs:
                single, mixed = runs[t], runs["mixed"]
                ratio = _ratio(mixed["final"][t], single["final"][t])
                ratio3 = _ratio(mixed["last3"][t], single["last3"][t])
                res["mixed_vs_single"][t] = {"final_ratio": ratio, "last3_ratio": ratio3, "pass": ratio >= 0.9}
                print(
                    f"mixed / single on {t}: final {ratio:.2f}, mean of the last 3 evaluations {ratio3:.2f} (target >= 0.90)"
                )
    if "mixed" in runs and "faulted" in runs:
        f, m = runs["faulted"], runs["mixed"]
        share = len(f["kills"]) / max(f["exposures"], 1)
        out: dict[str, Any] = {
            "kills": len(f["kills"]),
            "faulted_share": share,
            "masked": f["masked"],
            "retries": f["retries"],
        }
        for t in tags:
            pairs = list(zip(m["curves"][t], f["curves"][t], strict=False))
            ok = [within_noise(a, b, args.eval_episodes) for (_, a), (_, b) in pairs]
            diffs = [b - a for (_, a), (_, b) in pairs]
            out[t] = {"points": len(pairs), "within_2se": sum(ok), "max_abs_diff": max(map(abs, diffs), default=0.0)}
            print(
                f"faulted vs mixed on {t}: {sum(ok)}/{len(pairs)} evaluations within 2 SE, largest gap "
                f"{out[t]['max_abs_diff']:.3f}; final {f['final'][t]:.3f} vs {m['final'][t]:.3f}"
            )
        print(
            f"faults: {len(f['kills'])} sandbox kills ({share:.1%} of ready sandboxes per wave), "
            f"{f['masked']:.0f} episodes masked, {f['retries']:.0f} retries, {f['delivered']:.0f} delivered "
            f"(unfaulted: {m['masked']:.0f} masked, {m['retries']:.0f} retries)"
        )
        res["faults"] = out
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--warmstart", default="runs/mix_ws/export/warmstart", help="the mixed config's warm start (export/warmstart)"
    )
    ap.add_argument("--steps", type=int, default=300, help="RL steps of every run")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated subset of {','.join(RUNS)}")
    ap.add_argument("--parallel", type=int, default=2, help="runs at once (one torch thread each)")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-episodes", type=int, default=200, help="held-out episodes per env and evaluation")
    ap.add_argument("--kill-fraction", type=float, default=0.1, help="chance per wave that a ready sandbox is killed")
    ap.add_argument("--wave-s", type=float, default=20.0, help="seconds between waves of the killer")
    ap.add_argument(
        "--max-kills", type=int, default=None, help="the killer stops after this many kills (default: never)"
    )
    ap.add_argument("--seed", type=int, default=0, help="the killer's RNG")
    ap.add_argument("--run-dir", default="runs")
    ap.add_argument("--report-only", action="store_true", help="only compare the runs already in --run-dir")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: train this run in this process
    args = ap.parse_args()
    if args.one:
        child(args.one, args)
        return
    names = [n for n in args.runs.split(",") if n]
    if set(names) - set(RUNS):
        ap.error(f"--runs must be a subset of {','.join(RUNS)}")
    if not args.report_only:
        argv = [
            f"--{k.replace('_', '-')}={v}"
            for k, v in vars(args).items()
            if k not in ("runs", "one", "json", "report_only") and v is not None
        ]
        run_children(__file__, argv, names, Path(args.run_dir), "mixrun-", args.parallel)
    res = report(args)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
