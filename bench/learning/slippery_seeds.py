"""The main job's learning claim on several training seeds: held-out success after the warm start and
after RL, next to the exact references on the same maps, for every seed (not the best one).

    .venv/bin/python bench/learning/slippery_seeds.py --seeds 0 1 2 [--parallel 3] [key=value ...]
    .venv/bin/python bench/learning/slippery_seeds.py --seeds 0 1 2 total_steps=250 time_budget_s=0

Each seed is one ``rockroll train configs/frozenlake_slippery.yaml seed=S name=seeds-S`` run (its
own process; ``--parallel`` runs that many at once, which shares the cores: give a step count rather
than a time budget when running in parallel). Extra ``key=value`` overrides go to every run. The
table comes from each run's ``report.md`` (the same 500 held-out maps for every seed: the eval
seeds do not depend on the training seed) and ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROCKROLL = [sys.executable, "-m", "rockroll.cli"]


def _all_row(report: str) -> dict[str, str]:
    """The report table's ``all`` row, by column header."""
    header: list[str] = []
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "difficulty":
            header = cells
        elif header and cells and cells[0] == "all":
            return dict(zip(header, cells, strict=True))
    raise ValueError("report.md has no table with an 'all' row")


def _pct(cell: str) -> float:
    return float(cell.rstrip("%").lstrip("≥ ")) / 100


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/frozenlake_slippery.yaml")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--parallel", type=int, default=1, help="runs at once")
    ap.add_argument("--prefix", default="seeds", help="run names: PREFIX-SEED")
    ap.add_argument("--out", default="bench/out/slippery_seeds.json")
    ap.add_argument("--report-only", action="store_true", help="tabulate the runs already made, run nothing")
    ap.add_argument("overrides", nargs="*", help="key=value for every run")
    args = ap.parse_args()
    pending = [] if args.report_only else list(args.seeds)
    running: dict[int, tuple[subprocess.Popen, float]] = {}
    Path("bench/out").mkdir(parents=True, exist_ok=True)
    walls: dict[int, float] = {}
    while pending or running:
        while pending and len(running) < args.parallel:
            seed = pending.pop(0)
            name = f"{args.prefix}-{seed}"
            cmd = ROCKROLL + ["train", args.config, f"seed={seed}", f"name={name}", *args.overrides]
            log = open(f"bench/out/{name}.log", "w")  # noqa: SIM115 - closed with the process
            running[seed] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), time.perf_counter())
            print(f"started seed {seed}: {' '.join(cmd[2:])}", flush=True)
        time.sleep(2)
        for seed, (proc, t0) in list(running.items()):
            if proc.poll() is not None:
                walls[seed] = time.perf_counter() - t0
                del running[seed]
                if proc.returncode != 0:
                    raise SystemExit(
                        f"seed {seed} failed (exit {proc.returncode}): see bench/out/{args.prefix}-{seed}.log"
                    )
    rows = []
    for seed in args.seeds:
        run = Path("runs") / f"{args.prefix}-{seed}"
        summary = json.loads((run / "summary.json").read_text())
        cells = _all_row((run / "report.md").read_text())
        optimum = _pct(cells["optimum (VI)"])
        rows.append({
            "seed": seed, "warm_start": summary["success_start"], "after_rl": summary["success_end"],
            "optimum": optimum, "best_blind": _pct(cells["best blind plan (beam)"]),
            "expert": _pct(cells["re-planning expert"]),
            "steps": summary["steps"], "rl_time_s": summary.get("rl_time_s"), "wall_s": walls.get(seed, float("nan")),
        })  # fmt: skip
    print(
        "| seed | after warm start | after RL | RL gain | % of optimum | optimum | best blind | expert | RL steps | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['seed']} | {r['warm_start']:.1%} | {r['after_rl']:.1%} | {r['after_rl'] - r['warm_start']:+.1%} | "
            f"{r['after_rl'] / r['optimum']:.0%} | {r['optimum']:.1%} | {r['best_blind']:.1%} | {r['expert']:.1%} | "
            f"{r['steps']} | {r['wall_s']:.0f} |"
        )
    Path(args.out).write_text(json.dumps({"overrides": args.overrides, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
