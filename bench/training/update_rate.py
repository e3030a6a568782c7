"""Updates per minute of the main job on the product's path: process sandboxes, the update on a Ray worker.

    .venv/bin/python bench/training/update_rate.py --warmstart runs/train-demo/export/warmstart --steps 300 \
        --json bench/results/update_rate.json [key=value ...]

Trains ``configs/frozenlake_slippery.yaml`` from an existing warm start (no SFT) for ``--steps`` updates
with ``rollout.sandbox=process workers.use_ray=true``, as ``scripts/demo.sh`` does, then reads the run's
metrics: the RL wall time (evaluation and validation included, set-up not), updates per minute, the
updates ten minutes would hold next to the target of 3,000, and where a step's time goes (median over the
steps after the first ``--skip``). Extra ``key=value`` arguments go to ``rockroll train`` (e.g.
``rollout.scheduler.async_generation_ratio=1``). Run it on an idle machine: the rate is a wall-clock number.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TARGET_PER_10_MIN = 3000
PARTS = ("time/rollout", "time/train", "time/sync", "time/logprobs", "time/validate", "time/eval")


def summarize(rows: list[dict[str, Any]], rl_time_s: float, skip: int) -> dict[str, Any]:
    """The rate and the median split of a run's ``metrics.jsonl`` rows."""
    steps = len(rows)
    later = rows[skip:] or rows
    split = {}
    for key in ("time/step", *PARTS):
        values = [float(r[key]) for r in later if key in r]
        if values:
            split[key] = {"median_s": round(statistics.median(values), 4), "count": len(values)}
    per_min = steps / max(rl_time_s, 1e-9) * 60
    return {
        "steps": steps,
        "rl_time_s": round(rl_time_s, 1),
        "updates_per_min": round(per_min, 1),
        "updates_in_10_min": round(per_min * 10),
        "target_in_10_min": TARGET_PER_10_MIN,
        "split": split,
        "turns_per_episode": statistics.median(float(r["rollout/turns_per_episode"]) for r in later),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmstart", required=True, help="an export of the main job's warm start")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--skip", type=int, default=5, help="first steps left out of the medians (start-up)")
    p.add_argument("--name", default="bench-update-rate")
    p.add_argument("--json", type=Path, default=None)
    args, overrides = p.parse_known_args(argv)
    cmd = [
        str(ROOT / ".venv/bin/rockroll"), "train", "configs/frozenlake_slippery.yaml", "rollout.sandbox=process",
        "workers.use_ray=true", f"name={args.name}", f"model.path={args.warmstart}", "model.build_tiny=false",
        "sft.steps=0", f"total_steps={args.steps}", "--overwrite", *overrides,
    ]  # fmt: skip
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "RAY_ADDRESS": ""}, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        print(out.stdout[-2000:], out.stderr[-4000:], sep="\n", file=sys.stderr)
        return out.returncode
    run_dir = ROOT / "runs" / args.name
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((run_dir / "summary.json").read_text())
    result = {
        "overrides": overrides,
        "wall_s": round(wall, 1),
        **summarize(rows, float(summary["rl_time_s"]), args.skip),
    }
    result["cpu_count"], result["load_avg_1m"] = os.cpu_count(), round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
