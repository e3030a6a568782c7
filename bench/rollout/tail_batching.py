"""Tail batching: rollout wall time per batch, and the long tail's share of it, with and without carrying the tail.

    python bench/rollout/tail_batching.py --batches 40 --json bench/results/tail_batching.json

The task is multi-turn Sokoban 6x6 with one box whose every step first sleeps a long-tailed delay
(lognormal, ``--median-s``/``--sigma``, capped at ``--max-s``; the env is wrapped in-process by
:class:`~rockroll.agentrl.faults.envs.FaultyEnv`). The agent is the random engine with a fixed latency per
response (``--gen-ms``): the bench measures scheduling, not a model. Between batches the bench sleeps
``--train-s`` (the trainer's update; carried episodes keep playing meanwhile). Three modes play the
same batches (``--groups`` groups of ``--group-size``):

* ``plain``: exactly the batch's episodes; a batch ends with its slowest group;
* ``redundant``: one extra episode per group and ``--extra-groups`` extra groups; the first to
  complete win, the rest are cancelled (their work is thrown away);
* ``carry``: the same launches, but the groups still running when the batch is full are carried into
  the next batch (``tail: carry``) instead of cancelled.

Reported per mode: rollout wall time per batch (P50, P99, mean), the long tail's share of it
(``time/tail_share``: the time after 80% of the groups were complete, over the batch's time), episodes
started, delivered, cancelled, masked, the groups carried, and the env sessions left open afterwards.
The target: the tail's share falls by half from ``plain`` to ``carry``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import numpy as np

MODES = {
    "plain": {"group_size_redundancy": 0, "extra_groups": 0, "tail": "cancel"},
    "redundant": {"group_size_redundancy": 1, "tail": "cancel"},
    "carry": {"group_size_redundancy": 1, "tail": "carry"},
}
ENV_ID = "TailSokoban-v0"


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Play ``args.batches`` batches in ``mode``; per-batch metrics and totals."""
    from rockroll.agentrl.engines.random_engine import RandomEngine
    from rockroll.agentrl.faults.envs import register_fault_env
    from rockroll.agentrl.faults.latency import Latency
    from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
    from rockroll.agentrl.rollout.scheduler import RolloutScheduler
    from rockroll.agentrl.sources.kinds import LocalSource

    delay = {"kind": "lognormal", "median_s": args.median_s, "sigma": args.sigma, "max_s": args.max_s}
    inner = {"dim_room": [6, 6], "num_boxes": 1}
    register_fault_env(ENV_ID, inner="Sokoban-v0", inner_kwargs=inner, step_latency=delay)
    shape = {"extra_groups": args.extra_groups, **MODES[mode]}
    config = SchedulerConfig(
        env_ids=[ENV_ID], num_env_groups=args.groups, group_size=args.group_size, async_generation_ratio=1,
        seed=args.seed, max_carry_batches=args.max_carry, episode=EpisodeConfig(max_turns=args.max_turns),
        **shape,
    )  # fmt: skip
    engine = RandomEngine(latency=Latency("constant", args.gen_ms / 1000), seed=args.seed)
    source = LocalSource()

    async def play() -> list[dict[str, float]]:
        scheduler = RolloutScheduler(engine, source, config)
        rows = []
        try:
            for _ in range(args.batches):
                batch = await scheduler.run_batch()
                rows.append(dict(batch.metrics))
                await asyncio.sleep(args.train_s)  # the update: carried episodes play on
        finally:
            await scheduler.close(timeout_s=60)
        return rows

    t0 = time.monotonic()
    rows = asyncio.run(play())
    wall = time.monotonic() - t0
    rollout = np.array([r["time/rollout_s"] for r in rows])
    tail = np.array([r.get("time/tail_share", 0.0) for r in rows])

    def total(key: str) -> int:
        return int(sum(r.get(f"rollout/{key}", 0.0) for r in rows))

    return {
        "mode": mode,
        "batches": len(rows),
        "rollout_p50_s": float(np.percentile(rollout, 50)),
        "rollout_p99_s": float(np.percentile(rollout, 99)),
        "rollout_mean_s": float(rollout.mean()),
        "tail_share": float(tail.mean()),
        "wall_s": wall,
        "groups_short": total("groups_short"),
        "episodes_started": total("episodes_started"),
        "episodes_delivered": total("episodes_delivered"),
        "episodes_cancelled": total("episodes_cancelled"),
        "episodes_masked": total("episodes_masked"),
        "groups_carried_out": total("groups_carried_out"),
        "carried_delivered": total("carried_delivered"),
        "groups_carry_expired": total("groups_carry_expired"),
        "sessions_left_open": source.open_count,
        "per_batch": {"rollout_s": rollout.tolist(), "tail_share": tail.tolist()},
    }


def render(results: list[dict[str, Any]]) -> str:
    """A Markdown table of the modes, and the tail-share ratio of plain over carry."""
    cols = [
        ("rollout P50 s", "rollout_p50_s", "{:.2f}"), ("rollout P99 s", "rollout_p99_s", "{:.2f}"),
        ("mean s", "rollout_mean_s", "{:.2f}"), ("tail share", "tail_share", "{:.1%}"),
        ("started", "episodes_started", "{}"), ("delivered", "episodes_delivered", "{}"),
        ("cancelled", "episodes_cancelled", "{}"), ("masked", "episodes_masked", "{}"),
        ("groups short", "groups_short", "{}"), ("carried (delivered / expired)", None, ""),
        ("sessions left open", "sessions_left_open", "{}"),
    ]  # fmt: skip
    lines = ["| mode | " + " | ".join(c[0] for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for r in results:
        cells = []
        for _name, key, fmt in cols:
            if key is None:
                cells.append(f"{r['groups_carried_out']} ({r['carried_delivered']} / {r['groups_carry_expired']})")
            else:
                cells.append(fmt.format(r[key]))
        lines.append(f"| {r['mode']} | " + " | ".join(cells) + " |")
    by = {r["mode"]: r for r in results}
    if "plain" in by and "carry" in by and by["carry"]["tail_share"] > 0:
        ratio = by["plain"]["tail_share"] / by["carry"]["tail_share"]
        lines.append(f"\ntail share plain / carry: {ratio:.2f}x (target >= 2)")
        lines.append(f"rollout P99 plain / carry: {by['plain']['rollout_p99_s'] / by['carry']['rollout_p99_s']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default="plain,redundant,carry")
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--extra-groups", type=int, default=2)
    p.add_argument("--max-carry", type=int, default=2, help="max_carry_batches")
    p.add_argument("--max-turns", type=int, default=10)
    p.add_argument("--median-s", type=float, default=0.05, help="median env step delay")
    p.add_argument("--sigma", type=float, default=1.2, help="lognormal shape of the step delay")
    p.add_argument("--max-s", type=float, default=5.0, help="cap of one step delay")
    p.add_argument("--gen-ms", type=float, default=20.0, help="latency of one response")
    p.add_argument("--train-s", type=float, default=1.0, help="pause between batches (the update)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    results = [run_mode(m, args) for m in args.modes.split(",")]
    print(render(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main()
