"""Per-turn credit compared at equal rollouts: the same warm start, seed, maps and RL time budget,
trained with each ``algo.turn_credit``; held-out greedy success on the same eval maps.

    .venv/bin/python bench/learning/credit_compare.py --warmstart runs/NAME/export/warmstart --seconds 240
    .venv/bin/python bench/learning/credit_compare.py --warmstart DIR --credits episode gigpo fork --seeds 0 1

The warm start is an exported model (``runs/NAME/export/warmstart`` of a run of
configs/frozenlake_slippery.yaml). ``fork`` spends extra rollouts on its continuations, so it is
compared at equal *training* rollouts, not equal env steps; the table says how many steps each got.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rockroll.trainer.config_io import load_config
from rockroll.trainer.pipeline import run_training


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/frozenlake_slippery.yaml")
    ap.add_argument("--warmstart", required=True, help="exported warm-start model directory")
    ap.add_argument("--credits", nargs="+", default=["episode", "gigpo"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--steps", type=int, default=0, help="RL steps per run (0: --seconds decides)")
    ap.add_argument("--seconds", type=float, default=240.0, help="RL time budget per run")
    ap.add_argument("--eval-episodes", type=int, default=500)
    ap.add_argument("--out", default="bench/out/credit_compare.json")
    args = ap.parse_args()
    rows = []
    for seed in args.seeds:
        for credit in args.credits:
            name = f"credit-{credit}-s{seed}"
            cfg = load_config(args.config, [
                f"name={name}", f"seed={seed}", f"model.path={args.warmstart}", "model.build_tiny=false",
                "sft.steps=0", f"algo.turn_credit={credit}", f"rollout.eval_episodes={args.eval_episodes}",
                "rollout.eval_every=0", "rollout.select_episodes=0", "logging.progress=false",
                f"total_steps={args.steps or 100000}", f"time_budget_s={0 if args.steps else args.seconds}",
            ])  # fmt: skip
            t0 = time.perf_counter()
            s = run_training(cfg)
            rows.append({"credit": credit, "seed": seed, "start": s["success_start"], "end": s["success_end"],
                         "steps": s["steps"], "wall_s": time.perf_counter() - t0})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    print("| credit | seed | held-out success before RL | after RL | gain | RL steps | wall s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        gain = r["end"] - r["start"]
        print(
            f"| {r['credit']} | {r['seed']} | {r['start']:.1%} | {r['end']:.1%} | {gain:+.1%} | {r['steps']} | {r['wall_s']:.0f} |"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
