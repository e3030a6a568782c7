"""Single-turn RLVR learning with a tiny model on CPU: held-out success before and after RL.

    .venv/bin/python bench/learning/rlvr_learning.py --runs arithmetic code mixed --seeds 0 1 2 \\
        --json bench/results/rlvr_learning.json

Each run goes through the trainer's own pipeline (``run_training``, ``rollout.mode: rlvr``) from a fresh
tiny model whose tokenizer is trained on the task's training text:

* ``arithmetic``: ``configs/rlvr_arithmetic.yaml`` (sums a + b of 0-20, the math reward, 120 held-out sums);
* ``code``: ``configs/rlvr_code.yaml`` (small Python functions, tests run in process sandboxes);
* ``mixed``: one JSONL dataset holding both (tags ``math`` and ``code``, the rows written by the
  generators; 40 held-out rows of each), one router with both rewards, metrics and evaluation per tag
  (the code config's shape with groups of 8 and a 1200-step warm start over both tasks).

Reported per run and tag: greedy held-out success before the warm start, after it, and after RL (the
rows are never trained on), with the RL steps and seconds, and the sampling metrics averaged over steps
(``rollout/sampling_tries``, ``rollout/kept_share``, ``rollout/overlong_share``) and the reward's infra
failures. ``--steps`` overrides each config's ``total_steps`` and ``--sft-steps`` its ``sft.steps``: a
control of as much more supervised training instead of RL is ``--steps 0 --sft-steps N``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rockroll.agentrl.rewards import generate
from rockroll.trainer.config_io import config_from_dict, config_to_dict, load_config
from rockroll.trainer.pipeline import run_training
from rockroll.trainer.run.metrics import read_metrics

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SUMS = {"min_operand": 0, "max_operand": 20, "max_terms": 2, "ops": "+"}


def _rows(samples: list[Any], demo: str) -> list[dict[str, Any]]:
    rows = []
    for s in samples:
        answer = demo.format(**s.metadata)
        rows.append({"prompt": s.prompt, "tag": s.tag, **s.metadata, "demo": answer})
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def mixed_config(work: Path) -> dict[str, Any]:
    """The code config turned into a mix: JSONL rows of sums (math) and functions (code), both rewards."""
    cfg = config_to_dict(load_config(CONFIGS / "rlvr_code.yaml"))
    split = {"heldout_frac": 0.3}
    sums_train = generate("arithmetic", 290, split="train", **split, **SUMS)
    sums_held = generate("arithmetic", 40, split="heldout", **split, **SUMS)
    code_train = generate("python_functions", 400, split="train")
    code_held = generate("python_functions", 40, split="heldout")
    train = _rows(sums_train, "\\boxed{{{answer}}}") + _rows(code_train, "```python\n{reference}```")
    held = [r for pair in zip(_rows(sums_held, "\\boxed{{{answer}}}"), _rows(code_held, "```python\n{reference}```"),
                               strict=True) for r in pair]  # fmt: skip
    r = cfg["rollout"]
    r["rlvr"]["dataset"] = {
        "source": "jsonl", "path": _write(work / "mixed_train.jsonl", train),
        "heldout_path": _write(work / "mixed_heldout.jsonl", held), "demo_template": "{demo}",
    }  # fmt: skip
    r["rlvr"]["rewards"]["routes"]["math"] = {"reward": "math", "options": {"format_weight": 0.1}}
    r["eval_episodes"] = len(held)
    r["scheduler"]["group_size"] = 8  # the sums' groups need 8 answers to find a right one
    cfg["name"], cfg["sft"]["steps"], cfg["sft"]["num_demos"] = "rlvr_mixed", 1200, len(train)
    return cfg


def run_config(name: str, work: Path) -> dict[str, Any]:
    if name == "mixed":
        return mixed_config(work)
    return config_to_dict(load_config(CONFIGS / f"rlvr_{name}.yaml"))


def one_run(name: str, seed: int, steps: int | None, sft_steps: int | None, work: Path) -> dict[str, Any]:
    data = run_config(name, work)
    data["seed"] = seed
    data["name"] = f"{data['name']}_s{seed}"
    if steps is not None:
        data["total_steps"] = steps
    if sft_steps is not None:
        data["sft"]["steps"] = sft_steps
    data["model"]["path"] = str(work / f"model_{name}_s{seed}")
    data["logging"].update(run_dir=str(work / "runs"), progress=False, tensorboard=False)
    cfg = config_from_dict(data)
    t0 = time.perf_counter()
    summary = run_training(cfg)
    wall = time.perf_counter() - t0
    records = [m for m in read_metrics(Path(summary["run_dir"])) if m.get("step", -1) >= 0]

    def mean(key: str) -> float:
        vals = [m[key] for m in records if key in m]
        return statistics.fmean(vals) if vals else float("nan")

    out = {"run": name, "seed": seed, "steps": summary["steps"], "rl_s": summary["rl_time_s"], "wall_s": wall,
           "tries": mean("rollout/sampling_tries"), "kept_share": mean("rollout/kept_share"),
           "overlong_share": mean("rollout/overlong_share"), "tags": {}}  # fmt: skip
    for key, value in summary["eval_end"].items():
        parts = key.split("/")
        if len(parts) != 3 or parts[2] != "success":
            continue
        tag = parts[1]
        infra = sum(m.get(f"reward/{tag}/infra_failures", 0.0) for m in records)
        out["tags"][tag] = {
            "rows": int(summary["eval_end"].get(f"eval/{tag}/n", 0)),
            "before_sft": summary["eval_pre_sft"][f"eval_pre_sft/{tag}/success"],
            "after_sft": summary["eval_start"][f"eval/{tag}/success"],
            "after_rl": value,
            "reward_infra_failures": infra,
        }
    return out


def table(results: list[dict[str, Any]]) -> str:
    head = ("| run | seed | tag | held-out rows | before warm start | after warm start | after RL | RL gain | steps "
            "| RL s | tries/batch | kept share | overlong share | reward infra failures |")  # fmt: skip
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        for tag, t in r["tags"].items():
            gain = t["after_rl"] - t["after_sft"]
            lines.append(
                f"| {r['run']} | {r['seed']} | {tag} | {t['rows']} | {t['before_sft']:.1%} | {t['after_sft']:.1%} "
                f"| {t['after_rl']:.1%} | {gain:+.1%} | {r['steps']} | {r['rl_s']:.0f} | {r['tries']:.2f} "
                f"| {r['kept_share']:.2f} | {r['overlong_share']:.3f} | {t['reward_infra_failures']:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", default=["arithmetic"], choices=["arithmetic", "code", "mixed"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--steps", type=int, default=None, help="RL steps per run (default: the config's total_steps)")
    ap.add_argument(
        "--sft-steps", type=int, default=None, help="warm-start steps (default: the config's; a control: --steps 0)"
    )
    ap.add_argument("--json", default="", help="write the results here too")
    ap.add_argument("--keep", action="store_true", help="keep the runs' folder (printed)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rlvr_bench_"))
    print(f"load average at start: {os.getloadavg()}; runs under {work}", flush=True)
    results = []
    try:
        for name in args.runs:
            for seed in args.seeds:
                results.append(one_run(name, seed, args.steps, args.sft_steps, work))
                print(table(results[-1:]), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n" + table(results))
    if args.json:
        Path(args.json).write_text(json.dumps({"load_avg": os.getloadavg(), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
