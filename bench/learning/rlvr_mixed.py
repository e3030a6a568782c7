"""One run mixing math, code and an agentic env against each domain trained alone (issue 34, item 5).

    .venv/bin/python bench/learning/rlvr_mixed.py --seeds 0 --json bench/results/rlvr_mixed.json

Per seed, through the trainer's own pipeline (``run_training``): a fresh tiny model whose tokenizer learned the
three domains' text (``ensure_task_model`` of the mixed config) gets one warm start on all three domains' demos
(``--sft-steps``: the generators' answers of the training rows, and FrozenLake expert episodes). From that one
checkpoint, four RL runs:

* ``math``: ``rollout.mode: rlvr`` on generated sums a + b (0-20), the math reward;
* ``code``: ``rlvr`` on generated small Python functions, each answer's tests in process sandboxes;
* ``lake``: ``multiturn`` on FrozenLake 4x4 without slips (random maps, one action per turn);
* ``mixed``: ``rlvr`` on the sums and the functions of one JSONL file (tags math and code) with FrozenLake in
  ``rollout.envs`` beside it: each batch holds the three single runs' groups (dataset ratio 2 : env ratio 1);
* ``mixed_bal``: ``mixed`` with ``algo.tag_balance``: each tag's tokens weigh the same in the loss (in ``mixed``
  every token does, so the tag with the most answer tokens in a batch drives the update);
* ``mixed_tag``: ``mixed`` with ``optim.tag_steps``: each tag takes its own optimizer step (AdamW moments of its
  own) at the single runs' ``--lr``, the step a run of that tag alone would take.

Every run has the same warm start, group size, learning rate, RL steps and held-out rows (the same sums,
functions and maps: ``--heldout`` of each), so the runs differ only in what RL trains on. A domain's gain is its
greedy held-out success after RL minus at the warm start; the mixed run's gain per tag is set against the
single run's (target: >= 90% of each).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rockroll.agentrl.rewards import generate
from rockroll.trainer.config_io import config_from_dict
from rockroll.trainer.pipeline import run_training

SUMS = {"min_operand": 0, "max_operand": 20, "max_terms": 2, "ops": "+"}
LAKE = {"env_id": "FrozenLake-v0", "env_kwargs": {"is_slippery": False, "size": 4}, "tag": "lake"}
DEMOS = {"math": "\\boxed{{{answer}}}", "code": "```python\n{reference}```"}
EPISODE = {"history": "last_k", "history_k": 0, "system_prompt": "none", "observation_format": "cells",
           "max_turns": 8, "max_tokens_per_turn": 64, "temperature": 1.0}  # fmt: skip


#: the warm start's teacher gets these functions wrong in a share of its training demos (``--teacher-error``)
BUGGY = {
    "affine": "return x * {b} + {a}",
    "count_multiples": "return sum(1 for v in xs if v % {a} != 0)",
    "clip": "return min(max(x, {b}), {a})",
    "every_kth": "return xs[1::{a}]",
    "sum_digits_plus": "return sum(int(d) for d in str(n)) - {b}",
    "shift_letters": "return ''.join(chr((ord(c) - 97 - {a}) % 26 + 97) if 'a' <= c <= 'z' else c for c in s)",
}


def _demo(tag: str, meta: dict[str, Any], wrong: bool) -> str:
    """The warm start's answer of a row: the generator's, or (``wrong``) the teacher's bug of that function."""
    if tag == "code" and wrong:
        name, a, b = meta["task_id"].split("-", 2)  # name-a-b, b maybe negative
        arg = meta["reference"].split("(", 1)[1].split(")", 1)[0]
        body = BUGGY[name].format(a=a, b=b)
        return f"```python\ndef {name}({arg}):\n    {body}\n```"
    return DEMOS[tag].format(**meta)


def _rows(tag: str, split: str, n: int, buggy: set[str] = frozenset(), error: float = 0.0) -> list[dict[str, Any]]:
    if tag == "math":
        samples = generate("arithmetic", n, split=split, heldout_frac=0.3, **SUMS)  # type: ignore[arg-type]
    else:
        samples = generate("python_functions", n, split=split, heldout_frac=0.2)  # type: ignore[arg-type]
    rng = random.Random(f"teacher-{tag}")
    out = []
    for s in samples:
        name = str(s.metadata.get("task_id", "")).split("-", 1)[0]
        wrong = name in buggy and rng.random() < error
        out.append({"prompt": s.prompt, "tag": s.tag, **s.metadata, "demo": _demo(tag, s.metadata, wrong)})
    return out


def _interleave(*parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(max(len(p) for p in parts)):
        out += [p[i] for p in parts if i < len(p)]
    return out


def _write(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _routes(tags: list[str], sandboxes: int) -> dict[str, Any]:
    routes = {"math": {"reward": "math", "options": {"format_weight": 0.1}},
              "code": {"reward": "code", "options": {"sandboxes": sandboxes, "runs_per_sandbox": 8, "t_max_s": 10}}}  # fmt: skip
    return {"routes": {t: routes[t] for t in tags}, "timeout_s": 60}


class Plan:
    """The four runs' configs of one seed (see the module docstring)."""

    def __init__(self, args: argparse.Namespace, work: Path, seed: int) -> None:
        self.args, self.work, self.seed = args, work, seed
        h = args.heldout
        buggy = set(args.buggy)
        self.train = {
            "math": _rows("math", "train", 290),
            "code": _rows("code", "train", 290, buggy, args.teacher_error),
        }
        self.held = {"math": _rows("math", "heldout", h), "code": _rows("code", "heldout", h)}

    def _base(self, name: str, model: Path) -> dict[str, Any]:
        a = self.args
        return {
            "name": f"{name}_s{self.seed}", "seed": self.seed, "total_steps": a.steps, "torch_threads": 1,
            "model": {"path": str(model), "build_tiny": True},
            "algo": {"adv_estimator": "grpo", "turn_credit": "episode", "dynamic_sampling": True,
                     "loss_agg_mode": "token-mean"},
            "optim": {"lr": a.lr, "ppo_epochs": 1, "mini_batch_size": 0, "micro_batch_size": 64, "grad_clip": 1.0},
            "sft": {"steps": 0},
            "checkpoint": {"every": 0},
            "logging": {"run_dir": str(self.work / "runs"), "progress": False, "tensorboard": False},
        }  # fmt: skip

    def _rlvr(self, name: str, tags: list[str], groups: int, model: Path) -> dict[str, Any]:
        train = _interleave(*(self.train[t] for t in tags))
        held = _interleave(*(self.held[t] for t in tags))
        cfg = self._base(name, model)
        cfg["rollout"] = {
            "mode": "rlvr", "eval_episodes": len(held), "eval_every": 0, "episode": dict(EPISODE),
            "scheduler": {"group_size": self.args.group_size, "num_env_groups": groups},
            "rlvr": {
                "dataset": {"source": "jsonl", "path": _write(self.work / f"{name}_train.jsonl", train),
                            "heldout_path": _write(self.work / f"{name}_held.jsonl", held), "demo_template": "{demo}"},
                "rewards": _routes(tags, 2 if len(tags) == 1 else 4), "success_threshold": 1.0,
                "oversample": 1.5, "max_sampling_tries": 3, "overlong": "filter",
            },
        }  # fmt: skip
        return cfg

    def single(self, tag: str, model: Path) -> dict[str, Any]:
        a = self.args
        if tag != "lake":
            return self._rlvr(tag, [tag], a.groups, model)
        cfg = self._base("lake", model)
        cfg["rollout"] = {
            "mode": "multiturn", "envs": [dict(LAKE)], "eval_episodes": 2 * a.heldout, "eval_every": 0,
            "episode": dict(EPISODE), "scheduler": {"group_size": a.group_size, "num_env_groups": a.groups},
        }  # fmt: skip
        return cfg

    def mixed(self, model: Path, variant: str = "mixed") -> dict[str, Any]:
        """The mixed run's config: ``mixed``, ``mixed_bal`` (tag balance) or ``mixed_tag`` (one step per tag, at --lr)."""
        cfg = self._rlvr(variant, ["math", "code"], 3 * self.args.groups, model)
        cfg["rollout"]["rlvr"]["ratio"] = 2.0
        cfg["rollout"]["envs"] = [dict(LAKE)]
        cfg["algo"]["tag_balance"] = variant == "mixed_bal"
        cfg["optim"]["tag_steps"] = variant == "mixed_tag"
        cfg["optim"]["lr"] = self.args.lr if variant == "mixed_tag" else self.args.mixed_lr or self.args.lr
        return cfg

    def warm_start(self) -> Path:
        """The one warm start of the four runs: the mixed config's SFT over all demos (rows and lake episodes split
        2:1 by its ratio), no RL; its exported checkpoint."""
        a = self.args
        cfg = self.mixed(self.work / f"model_s{self.seed}")
        rows = len(self.train["math"]) + len(self.train["code"])
        cfg["name"], cfg["total_steps"] = f"warm_s{self.seed}", 0
        cfg["rollout"]["eval_episodes"] = 2  # the RL runs evaluate the warm start on every held-out row
        cfg["rollout"]["rlvr"]["ratio"] = rows / a.lake_episodes  # sft.num_demos splits into rows and episodes
        cfg["sft"] = {"steps": a.sft_steps, "lr": 1.0e-3, "batch_size": 32, "num_demos": rows + a.lake_episodes}
        summary = run_training(config_from_dict(cfg))
        return Path(summary["export_warmstart"])


def _run(data: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    summary = run_training(config_from_dict(data))
    start, end = summary["eval_start"], summary["eval_end"]
    tags = sorted(k.split("/")[1] for k in end if k.count("/") == 2 and k.endswith("/success"))
    return {
        "name": data["name"], "wall_s": time.perf_counter() - t0, "rl_s": summary["rl_time_s"],
        "tags": {t: {"after_sft": start[f"eval/{t}/success"],
                     "after_rl": end[f"eval/{t}/success"], "n": end.get(f"eval/{t}/n")} for t in tags},
    }  # fmt: skip


def table(results: list[dict[str, Any]], mixed: str = "mixed") -> str:
    lines = [f"| seed | tag | single: warm -> RL (gain) | {mixed}: warm -> RL (gain) | {mixed} gain / single gain |",
             "|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        for tag in ("math", "code", "lake"):
            s, m = r["single"][tag]["tags"][tag], r[mixed]["tags"][tag]
            gs, gm = s["after_rl"] - s["after_sft"], m["after_rl"] - m["after_sft"]
            ratio = f"{gm / gs:.0%}" if gs > 0 else "n/a (no single gain)"
            lines.append(
                f"| {r['seed']} | {tag} | {s['after_sft']:.1%} -> {s['after_rl']:.1%} ({gs:+.1%}) "
                f"| {m['after_sft']:.1%} -> {m['after_rl']:.1%} ({gm:+.1%}) | {ratio} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--steps", type=int, default=40, help="RL steps of every run")
    ap.add_argument("--groups", type=int, default=8, help="groups per step of a single run (the mixed run: 3x)")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1.0e-4)
    ap.add_argument(
        "--mixed-lr",
        type=float,
        default=0.0,
        help="the mixed runs' learning rate (0: --lr); one Adam step over three domains' gradients moves each less",
    )
    ap.add_argument("--heldout", type=int, default=60, help="held-out rows per dataset tag (maps: twice as many)")
    ap.add_argument("--sft-steps", type=int, default=600, help="steps of the one warm start (batches of 32)")
    ap.add_argument(
        "--buggy",
        nargs="*",
        default=["affine", "count_multiples", "clip", "every_kth"],
        help="functions the warm start's teacher gets wrong in --teacher-error of its demos",
    )
    ap.add_argument("--teacher-error", type=float, default=0.7)
    ap.add_argument("--lake-episodes", type=int, default=100, help="FrozenLake expert episodes of the warm start")
    ap.add_argument(
        "--runs",
        nargs="+",
        default=["math", "code", "lake", "mixed"],
        choices=["math", "code", "lake", "mixed", "mixed_bal", "mixed_tag"],
    )
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rlvr_mixed_"))
    print(f"load average at start: {os.getloadavg()}; runs under {work}", flush=True)
    results = []
    try:
        for seed in args.seeds:
            plan = Plan(args, work, seed)
            warm = plan.warm_start()
            done: dict[str, Any] = {"seed": seed, "single": {}}
            for name in args.runs:
                mixed = name.startswith("mixed")
                out = _run(plan.mixed(warm, name) if mixed else plan.single(name, warm))
                print(json.dumps(out), flush=True)
                if mixed:
                    done[name] = out
                else:
                    done["single"][name] = out
            results.append(done)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for mixed in ("mixed", "mixed_bal", "mixed_tag"):
        if all(mixed in r and len(r["single"]) == 3 for r in results):
            print("\n" + table(results, mixed))
    if args.json:
        Path(args.json).write_text(json.dumps({"load_avg": os.getloadavg(), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
