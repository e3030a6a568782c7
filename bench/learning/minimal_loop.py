"""The reference multi-turn RL loop on slippery FrozenLake 4x4, in process, as a bench (issue 33).

    .venv/bin/python bench/learning/minimal_loop.py [--seed 0] [--minutes 10] [--updates N] [--eval-every 250]
        [--eval-seconds 60] [--steps-limit 30] [--out bench/results/minimal_loop_seed0.json]

The loop of configs/README.md's facts section ("A minimal loop outside the trainer"), rebuilt inside the
project (pieces in ``bench/learning/minimal_loop_core.py``): a Qwen2-shaped model (hidden 128, 2 layers, ~0.3M
parameters) over a 27-token vocabulary, one output token per turn, prompt = slippery flag + current grid.

1. Warm start: supervised on the re-planning no-slip expert's action (envs/frozenlake/expert.py) at every
   cell of 2,000 training maps, lr 1e-3, ``--sft-seconds``.
2. GRPO: each update plays 16 fresh training maps x groups of 8 episodes sharing map and slip draws,
   reward 1 at the goal, temperature 1.5, ``--steps-limit`` steps (30), one Adam step at lr 1e-4, no KL.
3. Evaluation, every ``--eval-every`` updates and every ``--eval-seconds`` of training: the greedy action
   at every cell of the held-out maps (seeds 1,000,000 + i, the trainer's held-out seeds; training maps
   equal to one of them are redrawn), scored exactly by dynamic programming over the slips
   (envs/frozenlake/exact.py) at the 30- and 20-step limits, next to the value-iteration optimum and the
   expert on the same maps.

``--minutes`` bounds the RL time (rollout + update); evaluation time is measured apart. The JSON written
to ``--out`` (after every evaluation) holds the references, the curve (exact success vs updates, RL
minutes and wall minutes, with the training statistics since the previous point), the summary and the
time split.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))

from bench.learning.minimal_loop_core import (  # noqa: E402
    VOCAB,
    MapBatch,
    build_model,
    draw_maps,
    exact_success,
    greedy_tables,
    grpo_update,
    rollout,
    sft,
)
from rockroll.envs.frozenlake.exact import map_for_seed, references  # noqa: E402

LIMITS = (30, 20)
HELD_OUT_SEED = 1_000_000  # the trainer's held-out eval seeds start here (bench/learning/frozenlake_refs.py)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="model init, maps, sampling")
    p.add_argument("--minutes", type=float, default=10.0, help="RL time budget (rollout + update)")
    p.add_argument("--updates", type=int, default=1_000_000, help="stop after this many updates")
    p.add_argument("--eval-every", type=int, default=250, help="evaluate every N updates")
    p.add_argument("--eval-seconds", type=float, default=60.0, help="and every this many seconds of RL time")
    p.add_argument("--steps-limit", type=int, default=30, help="episode step limit in training")
    p.add_argument(
        "--out", type=Path, default=None, help="JSON results (default bench/results/minimal_loop_seed{N}.json)"
    )
    p.add_argument("--eval-maps", type=int, default=500, help="held-out maps (seeds 1,000,000 + i)")
    p.add_argument("--maps", type=int, default=16, help="maps per update")
    p.add_argument("--group", type=int, default=8, help="episodes per map (a group)")
    p.add_argument("--temperature", type=float, default=1.5)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--no-std", action="store_true", help="do not divide advantages by the group's std")
    p.add_argument("--sft-seconds", type=float, default=120.0, help="warm-start time budget")
    p.add_argument("--sft-steps", type=int, default=100_000, help="warm-start step cap")
    p.add_argument("--sft-batch", type=int, default=64, help="warm-start batch size")
    p.add_argument("--sft-maps", type=int, default=2000, help="training maps of the warm start")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = ROOT / "bench" / "results" / f"minimal_loop_seed{args.seed}.json"
    return args


def reference_table(grids: list, seeds: list[int]) -> dict[str, Any]:
    """Exact references on the held-out maps at each step limit (envs/frozenlake/exact.py)."""
    out: dict[str, Any] = {}
    for k in LIMITS:
        refs = references(seeds, steps=k)
        assert [tuple(g) for g in refs["grids"]] == grids
        out[str(k)] = {"mean": refs["mean"], "by_path_len": refs["by_path_len"]}
    out["path_len"] = refs["path_len"]
    return out


def evaluate(model: Any, held: MapBatch, path_len: np.ndarray) -> dict[str, Any]:
    model.eval()
    t0 = time.perf_counter()
    per_map = exact_success(greedy_tables(model, held), held, LIMITS)
    res: dict[str, Any] = {f"exact_{k}": float(v.mean()) for k, v in per_map.items()}
    res["by_path_len"] = {
        str(k): {str(n): float(v[path_len == n].mean()) for n in sorted(set(path_len.tolist()))}
        for k, v in per_map.items()
    }
    res["eval_s"] = time.perf_counter() - t0
    model.train()
    return res


class Meter:
    """Training statistics since the last evaluation point."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []

    def add(self, **row: float) -> None:
        self.rows.append(row)

    def flush(self) -> dict[str, float]:
        out = {k: float(np.mean([r[k] for r in self.rows])) for k in self.rows[0]} if self.rows else {}
        self.rows = []
        return out


def fmt_point(pt: dict[str, Any]) -> str:
    tr = pt.get("train", {})
    line = (
        f"upd {pt['update']:5d}  rl {pt['rl_min']:5.2f} min  wall {pt['wall_min']:5.2f} min  "
        f"exact@30 {100 * pt['exact_30']:5.1f}%  @20 {100 * pt['exact_20']:5.1f}%"
    )
    if tr:
        line += (
            f"  | reward {tr['reward']:.3f}  var-groups {100 * tr['groups_with_variance']:.0f}%"
            f"  ent {tr['entropy']:.3f}  s/upd {tr['rollout_s'] + tr['update_s']:.3f}"
            f" (rollout {tr['rollout_s']:.3f}, update {tr['update_s']:.3f})"
        )
    return line


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    curve = result["curve"]
    rl = [pt for pt in curve if pt["update"] > 0]
    out: dict[str, Any] = {"updates": curve[-1]["update"], "rl_minutes": curve[-1]["rl_min"]}
    out["wall_minutes"] = curve[-1]["wall_min"]
    for k in LIMITS:
        key = f"exact_{k}"
        warm, final = curve[0][key], curve[-1][key]
        best = max(rl or curve, key=lambda pt, key=key: pt[key])
        out[str(k)] = {
            "warm_start": warm,
            "best": best[key],
            "best_update": best["update"],
            "final": final,
            "gain_final": final - warm,
            "gain_best": best[key] - warm,
            "optimal": result["references"][str(k)]["mean"]["optimal"],
            "expert": result["references"][str(k)]["mean"]["expert"],
        }
    return out


def save(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))


def setup(args: argparse.Namespace) -> tuple[dict[str, Any], Any, MapBatch, np.ndarray, set]:
    """References, the model, the held-out maps, then the warm start (evaluated before and after)."""
    t0 = time.perf_counter()
    seeds = list(range(HELD_OUT_SEED, HELD_OUT_SEED + args.eval_maps))
    grids = [map_for_seed(s) for s in seeds]
    result: dict[str, Any] = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    result["references"] = reference_table(grids, seeds)
    path_len = np.array(result["references"].pop("path_len"))
    held = MapBatch(grids)
    model = build_model(args.seed)
    result["model"] = {"parameters": sum(p.numel() for p in model.parameters()), "vocab": len(VOCAB)}
    result["random_init"] = evaluate(model, held, path_len)
    rng = np.random.default_rng([args.seed, 1])
    exclude = set(grids)
    sft_maps = MapBatch(draw_maps(rng, args.sft_maps, exclude))
    result["sft"] = sft(model, sft_maps, args.sft_seconds, args.sft_steps, 1e-3, args.sft_batch, rng)
    result["setup_s"] = time.perf_counter() - t0
    return result, model, held, path_len, exclude


def train(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    wall0 = time.perf_counter()
    result, model, held, path_len, exclude = setup(args)
    refs = result["references"]
    print(
        f"references: optimum {100 * refs['30']['mean']['optimal']:.1f}% @30 / {100 * refs['20']['mean']['optimal']:.1f}% @20,"
        f" expert {100 * refs['30']['mean']['expert']:.1f}% / {100 * refs['20']['mean']['expert']:.1f}%;"
        f" random init {100 * result['random_init']['exact_30']:.1f}%; warm start {result['sft']}",
        flush=True,
    )
    rng = np.random.default_rng([args.seed, 2])
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    meter, curve = Meter(), []
    result["curve"] = curve
    times = {"rollout_s": 0.0, "update_s": 0.0, "eval_s": 0.0}
    update, rl_s, last_eval_rl = 0, 0.0, 0.0

    def point() -> None:
        nonlocal last_eval_rl
        ev = evaluate(model, held, path_len)
        times["eval_s"] += ev["eval_s"]
        pt = {"update": update, "rl_min": rl_s / 60, "wall_min": (time.perf_counter() - wall0) / 60, **ev}
        pt["train"] = meter.flush()
        curve.append(pt)
        last_eval_rl = rl_s
        print(fmt_point(pt), flush=True)
        result["timing"] = dict(times)
        save(result, args.out)

    point()
    while update < args.updates and rl_s < 60 * args.minutes:
        t0 = time.perf_counter()
        batch = MapBatch(draw_maps(rng, args.maps, exclude))
        ro = rollout(model, batch, args.group, args.steps_limit, args.temperature, rng)
        t1 = time.perf_counter()
        stats = grpo_update(model, opt, batch, ro, args.group, args.temperature, std_norm=not args.no_std)
        t2 = time.perf_counter()
        update += 1
        rl_s += t2 - t0
        times["rollout_s"] += t1 - t0
        times["update_s"] += t2 - t1
        meter.add(
            reward=float(ro.reward.mean()),
            entropy=ro.entropy,
            turns=float(len(ro.turn_ep)),
            forwards=float(ro.forwards),
            rollout_prompts=float(ro.prompts),
            rollout_s=t1 - t0,
            update_s=t2 - t1,
            **stats,
        )
        if update % args.eval_every == 0 or rl_s - last_eval_rl >= args.eval_seconds:
            point()
    if curve[-1]["update"] != update:
        point()
    result["summary"] = summarise(result)
    result["timing"] = dict(times, wall_s=time.perf_counter() - wall0, setup_s=result["setup_s"])
    save(result, args.out)
    return result


def print_summary(result: dict[str, Any]) -> None:
    s, t = result["summary"], result["timing"]
    for k in LIMITS:
        r = s[str(k)]
        print(
            f"{k}-step limit: warm start {100 * r['warm_start']:.1f}%  best {100 * r['best']:.1f}% (update"
            f" {r['best_update']})  final {100 * r['final']:.1f}%  gain {100 * r['gain_final']:+.1f}"
            f" (best {100 * r['gain_best']:+.1f})  optimum {100 * r['optimal']:.1f}%  expert {100 * r['expert']:.1f}%"
        )
    n = max(s["updates"], 1)
    print(
        f"{s['updates']} updates in {s['rl_minutes']:.2f} min of RL ({60 * s['rl_minutes'] / n:.3f} s/update:"
        f" rollout {t['rollout_s'] / n:.3f}, update {t['update_s'] / n:.3f}); eval {t['eval_s']:.0f} s,"
        f" setup {t['setup_s']:.0f} s, wall {t['wall_s'] / 60:.2f} min"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    result = train(args)
    print_summary(result)
    print(f"written to {args.out}")
    return result


if __name__ == "__main__":
    main()
