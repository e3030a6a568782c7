"""Throughput of the single-turn RLVR rewards (:mod:`rockroll.agentrl.rewards`) through the router.

    .venv/bin/python bench/rewards/reward_bench.py [--math 400] [--code 128] [--concurrency 16 64] [--json PATH]

* ``math``: generated arithmetic tasks (``arithmetic``), half of the answers right, half wrong,
  scored by the ``math`` reward (math-verify) on the reward pool's threads;
* ``code``: generated Python-function tasks (``python_functions``), the reference solution or a
  wrong one, scored by the ``code`` reward through process sandboxes, at each asked concurrency
  (reward pool threads = concurrency; sandboxes = concurrency / runs_per_sandbox).

Each row: rewards scored, wall seconds, rewards per second, mean latency of a call, infra failures.
Warm-up (sandbox start-up, imports) is excluded: one batch is scored before the timed one.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rockroll.agentrl.rewards import RewardRouter, generate, route_metrics


def timed(router: RewardRouter, samples: list[Any], responses: list[str]) -> dict[str, float]:
    router.score_batch_sync(samples[: max(1, len(samples) // 8)], responses[: max(1, len(samples) // 8)])  # warm-up
    started = time.perf_counter()
    outcomes = router.score_batch_sync(samples, responses)
    wall = time.perf_counter() - started
    m = route_metrics(outcomes)
    tag = samples[0].tag
    return {
        "n": len(samples),
        "wall_s": wall,
        "per_s": len(samples) / wall,
        "latency_s": m[f"reward/{tag}/latency_s"],
        "mean": m.get(f"reward/{tag}/mean", float("nan")),
        "infra": m[f"reward/{tag}/infra_failures"],
    }


def bench_math(n: int) -> dict[str, float]:
    samples = generate("arithmetic", n, seed=0)
    responses = [
        f"The result is \\boxed{{{s.metadata['answer'] if i % 2 else int(s.metadata['answer']) + 1}}}."
        for i, s in enumerate(samples)
    ]
    with RewardRouter({"routes": {"math": {"reward": "math"}}}) as router:
        return timed(router, samples, responses)


def bench_code(n: int, concurrency: int, runs_per_sandbox: int) -> dict[str, float]:
    samples = generate("python_functions", n, seed=0)
    responses = [
        f"```python\n{s.metadata['reference'] if i % 2 else 'def nope(): pass'}\n```" for i, s in enumerate(samples)
    ]
    options = {"sandboxes": max(1, concurrency // runs_per_sandbox), "runs_per_sandbox": runs_per_sandbox}
    cfg = {"routes": {"code": {"reward": "code", "options": options}}, "max_workers": concurrency}
    with RewardRouter(cfg) as router:
        return timed(router, samples, responses)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--math", type=int, default=400, help="math rewards scored")
    ap.add_argument("--code", type=int, default=128, help="code rewards scored per concurrency")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 64], help="code rewards in flight")
    ap.add_argument("--runs-per-sandbox", type=int, default=4, help="test runs one sandbox hosts at once")
    ap.add_argument("--json", default="", help="also write the rows here")
    args = ap.parse_args()
    rows = [("math", "pool", bench_math(args.math))]
    for c in args.concurrency:
        rows.append(("code", f"{c} in flight", bench_code(args.code, c, args.runs_per_sandbox)))
    print(
        f"{'reward':8} {'setting':14} {'n':>5} {'wall s':>8} {'rewards/s':>10} {'latency s':>10} {'mean':>6} {'infra':>6}"
    )
    for name, setting, r in rows:
        print(
            f"{name:8} {setting:14} {r['n']:>5.0f} {r['wall_s']:>8.2f} {r['per_s']:>10.1f} "
            f"{r['latency_s']:>10.3f} {r['mean']:>6.2f} {r['infra']:>6.0f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"reward": n, "setting": s, **r} for n, s, r in rows], f, indent=2)


if __name__ == "__main__":
    main()
