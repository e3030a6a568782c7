"""The main job with ``rollout.engine.kind`` hf vs vllm: training at equal steps, then rollout throughput.

    .venv/bin/python bench/rollout/engine_rollout_bench.py [--steps 60] [--batches 5] [--json bench/results/engine_rollout.json]

Both engines in one sitting, on the same machine state:

1. **Training at equal steps.** ``configs/frozenlake_slippery.yaml`` (the main job: slippery FrozenLake 4x4,
   multi-turn GRPO with GiGPO credit, a 600-step multi-turn warm start) for ``--steps`` RL steps with
   ``rollout.engine.kind=hf``, then ``=vllm`` (same seed, same warm start: the SFT does not depend on the
   engine: it runs once, ``total_steps=0``, and both RL runs start from its export with ``sft.steps=0``).
   No time budget, no validation selection (the last step is final), played evaluation on 100 held-out
   maps. Each final export (and the shared warm start) is then scored *exactly* on 500 held-out maps (``bench/learning/frozenlake_exact_eval.py``: the greedy action at every cell, dynamic
   programming over the slips; the greedy table is read with the HF engine for both, so the number
   depends on the trained weights only). The noise between the two is the run-to-run noise of RL
   (different sampled episodes: vLLM and HF draw different tokens from the same seeds).
2. **Rollout throughput.** The shared warm-started model, the main job's rollout settings through process
   sandboxes (``rollout.sandbox=process``), 16 groups of 8 = 128 episodes at once: one warm-up batch,
   then ``--batches`` timed ``next_batch`` calls of the trainer's multi-turn rollout per engine. Turns/s and
   generated tokens/s (response tokens, stop tokens included) over the timed batches.

Prints a table per part; ``--json`` keeps the numbers (bench/results/engine_rollout.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))

from bench.learning.frozenlake_exact_eval import exact_greedy  # noqa: E402
from rockroll.trainer.config_io import load_config  # noqa: E402

CONFIG = ROOT / "configs" / "frozenlake_slippery.yaml"
EXACT_SEEDS = list(range(1_000_000, 1_000_500))


def _vllm_engine(threads: int) -> list[str]:
    return ["rollout.engine.kind=vllm", "rollout.engine.dtype=float32", "rollout.engine.max_model_len=512",
            f"rollout.engine.cpu_threads={threads}"]  # fmt: skip


def warm_start(run_dir: Path) -> Path:
    """The main job's warm start (its 600 SFT steps on the re-planning expert), exported; no RL."""
    from rockroll.trainer.pipeline import run_training

    over = ["name=warm", "total_steps=0", "rollout.select_episodes=0", "rollout.eval_episodes=16",
            f"logging.run_dir={run_dir}", "logging.progress=false", f"model.path={run_dir / 'tiny-model'}"]  # fmt: skip
    return Path(run_training(load_config(CONFIG, over))["export_warmstart"])


def train(engine: str, warm: Path, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    over = [
        f"name=engine_{engine}", f"total_steps={args.steps}", "time_budget_s=0", "rollout.select_episodes=0",
        "rollout.eval_episodes=100", "rollout.eval_every=0", f"logging.run_dir={run_dir}", "logging.progress=false",
        f"model.path={warm}", "model.build_tiny=false", "sft.steps=0",
    ]  # fmt: skip
    over += _vllm_engine(args.vllm_threads) if engine == "vllm" else []
    cfg = load_config(CONFIG, over)
    t0 = time.perf_counter()
    summary = run_training(cfg)
    wall = time.perf_counter() - t0
    records = [r for r in read_metrics(run_dir / cfg.name) if r["step"] >= 0]
    n = max(len(records), 1)
    exact = exact_greedy(Path(summary["export_final"]), EXACT_SEEDS, 20, 4)
    return {
        "engine": engine, "steps": summary["steps"], "wall_s": wall, "rl_time_s": summary["rl_time_s"],
        "step_s": sum(r["time/step"] for r in records) / n,
        "rollout_s": sum(r["time/rollout"] for r in records) / n,
        "sync_s": sum(r.get("time/sync", 0.0) for r in records) / n,
        "played_start": summary["success_start"], "played_end": summary["success_end"],
        "exact_final": sum(exact["success"]) / len(EXACT_SEEDS),
        "gap_mean": sum(r.get("actor/logprob_gap_mean", 0.0) for r in records) / n,
        "gap_max": max((r.get("actor/logprob_gap_max", 0.0) for r in records), default=0.0),
        "engine_restarts": sum(r.get("rollout/engine_restarts", 0.0) for r in records),
    }  # fmt: skip


def throughput(engine: str, model_dir: Path, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.rollout.setup import make_rollout
    from rockroll.trainer.run.sandboxes import run_env_source

    over = [
        f"name=tp_{engine}", "rollout.sandbox=process", f"model.path={model_dir}", "model.build_tiny=false",
        f"logging.run_dir={run_dir}", "rollout.scheduler.max_concurrent_episodes=128",
    ]  # fmt: skip
    over += _vllm_engine(args.vllm_threads) if engine == "vllm" else []
    cfg = load_config(CONFIG, over)
    (run_dir / cfg.name).mkdir(parents=True, exist_ok=True)
    from contextlib import ExitStack

    with ExitStack() as stack:
        model, tok = load_policy(cfg.model)
        t_start = time.perf_counter()
        rollout = make_rollout(cfg, model, tok, run_env_source(cfg, stack, run_dir / cfg.name))
        stack.callback(rollout.close)
        rollout.next_batch(0)  # warm-up: sandboxes start, first forwards
        start_s = time.perf_counter() - t_start
        turns = tokens = episodes = 0
        t0 = time.perf_counter()
        for step in range(1, args.batches + 1):
            trajs, _ = rollout.next_batch(step)
            episodes += len(trajs)
            turns += sum(len(t.turns) for t in trajs)
            tokens += sum(len(turn.response_ids) for t in trajs for turn in t.turns)
        wall = time.perf_counter() - t0
    return {
        "engine": engine, "episodes": episodes, "turns": turns, "tokens": tokens, "wall_s": wall,
        "turns_per_s": turns / wall, "tokens_per_s": tokens / wall, "batch_s": wall / args.batches,
        "turns_per_episode": turns / max(episodes, 1), "start_and_warmup_s": start_s,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60, help="RL steps of each training run")
    parser.add_argument("--batches", type=int, default=5, help="timed rollout batches per engine")
    parser.add_argument("--vllm-threads", type=int, default=1, help="OMP threads of the vLLM host")
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/rockroll-engine-bench"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("RAY_ADDRESS", "")
    shutil.rmtree(args.run_dir, ignore_errors=True)
    load = os.getloadavg()
    t0 = time.perf_counter()
    model_dir = warm_start(args.run_dir)
    print(f"warm start: {time.perf_counter() - t0:.0f} s", flush=True)
    trained = [train(e, model_dir, args, args.run_dir) for e in ("hf", "vllm")]
    warm_exact = sum(exact_greedy(model_dir, EXACT_SEEDS, 20, 4)["success"]) / len(EXACT_SEEDS)
    print(f"\nload average at start {load[0]:.2f}; warm start exact {100 * warm_exact:.1f}% on 500 maps")
    print("| engine | steps | s/step | rollout s/step | sync s/step | played start -> end (100 maps) "
          "| exact final (500 maps) | gap mean | gap max | restarts |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in trained:
        print(f"| {t['engine']} | {t['steps']} | {t['step_s']:.2f} | {t['rollout_s']:.2f} | {t['sync_s']:.3f} | "
              f"{100 * t['played_start']:.1f}% -> {100 * t['played_end']:.1f}% | {100 * t['exact_final']:.1f}% | "
              f"{t['gap_mean']:.1e} | {t['gap_max']:.1e} | {t['engine_restarts']:.0f} |")  # fmt: skip
    tp = [throughput(e, model_dir, args, args.run_dir) for e in ("hf", "vllm")]
    print("\n| engine | episodes | turns | turns/episode | s/batch of 128 | turns/s | tokens/s | start+warm-up s |")
    print("|---|---|---|---|---|---|---|---|")
    for t in tp:
        print(f"| {t['engine']} | {t['episodes']} | {t['turns']} | {t['turns_per_episode']:.1f} | {t['batch_s']:.2f} | "
              f"{t['turns_per_s']:.0f} | {t['tokens_per_s']:.0f} | {t['start_and_warmup_s']:.1f} |")  # fmt: skip
    if args.json:
        out = {"load_at_start": load, "warmstart_exact": warm_exact, "train": trained, "throughput": tp,
               "args": {k: str(v) for k, v in vars(args).items()}}  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
