"""Multi-turn GRPO on a tool env with the tiny model: held-out success warm start -> RL, by difficulty.

    .venv/bin/python bench/learning/tool_learning.py --seeds 0 1 2 --json bench/results/tool_learning.json

Each seed runs ``configs/lookup_tools.yaml`` through the trainer's pipeline (``run_training``), as the main
job runs it: Lookup-v0 (find, get, answer over a small generated database; 1 to 3 links to follow), the
tiny hermes model (copy-pretrained once, shared by the seeds) writing its calls as ``<tool_call>`` JSON,
token by token, no grammar. The warm start imitates the expert and stops at the first validation
(``rollout.select_episodes``, apart from the held-out seeds) reaching ``sft.stop_success``; RL follows.

Reported per seed: held-out greedy success before the warm start, after it, after RL, by difficulty, next
to the expert's success on the same tasks (it plays the same seeds); the warm start's length; the held-out
parseable-call rate after RL and the sampled one of the last RL steps; the run's wall time, split into the
warm start and RL. The bar (issue 49): RL adds at least 15 points on each seed, from a warm start at most
half the expert's success, with a parseable-call rate of 99% or more at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import rockroll.envhub as envhub
from rockroll.envs.play import play_episode
from rockroll.trainer.config_io import config_from_dict, config_to_dict, load_config
from rockroll.trainer.pipeline import run_training
from rockroll.trainer.run.metrics import read_metrics

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "lookup_tools.yaml"
TAG = "Lookup"


def expert_success(env_id: str, env_kwargs: dict[str, Any], seeds: list[int]) -> dict[str, float]:
    """The expert's success on ``seeds`` (``all`` and by difficulty: the links its question follows)."""
    wins: dict[str, list[float]] = {"all": []}
    for seed in seeds:
        env = envhub.make(env_id, **env_kwargs)
        ok = float(play_episode(env, "expert", seed).success)
        for key in ("all", str(env.unwrapped.difficulty())):  # the links its question follows, as the report's
            wins.setdefault(key, []).append(ok)
        env.close()
    return {k: statistics.fmean(v) for k, v in wins.items()}


def _split(metrics: dict[str, Any], prefix: str) -> dict[str, float]:
    out = {"all": float(metrics[f"{prefix}/{TAG}/success"])}
    for key, value in metrics.items():
        head = f"{prefix}/{TAG}/success_len"
        if key.startswith(head):
            out[key[len(head) :]] = float(value)
    return out


def one_seed(seed: int, steps: int | None, run_dir: Path) -> dict[str, Any]:
    data = config_to_dict(load_config(CONFIG))
    data["seed"], data["name"] = seed, f"lookup_tools_s{seed}"
    if steps is not None:
        data["total_steps"] = steps
    data["logging"].update(run_dir=str(run_dir), progress=False, tensorboard=False)
    cfg = config_from_dict(data)
    t0 = time.perf_counter()
    summary = run_training(cfg)
    wall = time.perf_counter() - t0
    records = read_metrics(Path(summary["run_dir"]))
    rl = [m for m in records if m.get("step", -1) >= 0]
    warm = next(m for m in records if m.get("step") == -1)
    last = rl[-10:]
    end = summary["eval_end"]
    return {
        "seed": seed,
        "before_sft": _split(summary["eval_pre_sft"], "eval_pre_sft"),
        "after_sft": _split(summary["eval_start"], "eval"),
        "after_rl": _split(end, "eval"),
        "sft_steps": warm.get("sft/steps"),
        "sft_val": summary.get("sft_val", []),
        "sft_s": warm.get("sft/time"),
        "rl_steps": summary["steps"],
        "rl_s": summary["rl_time_s"],
        "wall_s": wall,
        "heldout_parseable_call_rate": end.get(f"eval/{TAG}/tools/parseable_call_rate"),
        "sampled_parseable_call_rate_last10": statistics.fmean(
            m["rollout/tools/parseable_call_rate"] for m in last if "rollout/tools/parseable_call_rate" in m
        ),
        "eval_seeds": [cfg.rollout.eval_seed_offset, cfg.rollout.eval_episodes],
    }


def table(results: list[dict[str, Any]], expert: dict[str, float]) -> str:
    keys = ["all", *sorted(k for k in expert if k != "all")]
    head = "| seed | difficulty | expert | before warm start | after warm start | after RL | RL gain |"
    lines = [head, "|" + "---|" * 7]
    for r in results:
        for k in keys:
            a, b = r["after_sft"].get(k, float("nan")), r["after_rl"].get(k, float("nan"))
            lines.append(
                f"| {r['seed']} | {k} | {expert.get(k, float('nan')):.1%} | {r['before_sft'].get(k, float('nan')):.1%} "
                f"| {a:.1%} | {b:.1%} | {100 * (b - a):+.1f} |"
            )
    lines += ["", "| seed | warm-start steps | warm start s | RL steps | RL s | wall s | parseable calls held-out "
              "| parseable calls sampled (last 10 steps) |", "|" + "---|" * 8]  # fmt: skip
    for r in results:
        held = r["heldout_parseable_call_rate"]
        lines.append(
            f"| {r['seed']} | {r['sft_steps']:.0f} | {r['sft_s']:.0f} | {r['rl_steps']} | {r['rl_s']:.0f} "
            f"| {r['wall_s']:.0f} | {held if held is None else f'{held:.2%}'} "
            f"| {r['sampled_parseable_call_rate_last10']:.2%} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="RL steps per seed (default: the config's)")
    ap.add_argument("--run-dir", default="runs/bench_tool_learning")
    ap.add_argument("--json", default="", help="write the results here too")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    cfg = load_config(CONFIG)
    r = cfg.rollout
    seeds = list(range(r.eval_seed_offset, r.eval_seed_offset + r.eval_episodes))
    expert = expert_success(r.env_id, dict(r.env_kwargs), seeds)
    results = []
    for seed in args.seeds:
        results.append(one_seed(seed, args.steps, Path(args.run_dir)))
        print(table(results[-1:], expert), flush=True)
    print("\n" + table(results, expert))
    if args.json:
        out = {"load_avg": os.getloadavg(), "expert": expert, "results": results}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
