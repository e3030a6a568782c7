"""In-process env throughput: steps/s and reset (generation) time for every registered env.

    .venv/bin/python bench/rollout/env_bench.py [--seconds 2] [--resets 300] [ENV_ID ...]

Step time counts only ``env.step`` (through ``envhub.make``, so parsing of ``<answer>`` tags and
the MaxSteps wrapper are included); actions are drawn at random from ``action_candidates()``.
Reset time is where rooms, maps, catalogues and households are generated.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from rich.console import Console
from rich.table import Table

import rockroll.envhub as envhub

TARGETS = {"FrozenLake-v0": 50_000, "Sokoban-v0": 20_000, "SimpleSokoban-v0": 20_000}


def bench_steps(env_id: str, seconds: float) -> tuple[float, int]:
    env = envhub.make(env_id)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    actions = [f"<answer>{a}</answer>" for a in env.action_candidates()]
    spent, steps, episodes = 0.0, 0, 0
    wall = time.perf_counter()
    while time.perf_counter() - wall < seconds:
        for _ in range(200):
            action = actions[int(rng.integers(len(actions)))] if actions else "<answer></answer>"
            t0 = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            spent += time.perf_counter() - t0
            steps += 1
            if terminated or truncated:
                episodes += 1
                env.reset(seed=episodes)
            actions = [f"<answer>{a}</answer>" for a in env.action_candidates()]
    return steps / spent, steps


def bench_resets(env_id: str, n: int) -> np.ndarray:
    env = envhub.make(env_id)
    times = np.empty(n)
    for seed in range(n):
        t0 = time.perf_counter()
        env.reset(seed=seed)
        times[seed] = time.perf_counter() - t0
    return times * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_ids", nargs="*", help="default: every registered env not tagged 'slow'")
    parser.add_argument("--seconds", type=float, default=2.0, help="stepping time per env")
    parser.add_argument("--resets", type=int, default=300, help="resets timed per env")
    args = parser.parse_args()
    ids = args.env_ids or [s.id for s in envhub.list_envs() if "slow" not in s.tags]
    table = Table(
        "env",
        "steps/s",
        "target",
        "steps",
        "reset P50 ms",
        "reset P99 ms",
        title=f"env_bench on {platform.node()} ({platform.processor() or platform.machine()})",
    )
    for env_id in ids:
        rate, steps = bench_steps(env_id, args.seconds)
        resets = bench_resets(env_id, args.resets)
        target = TARGETS.get(env_id)
        table.add_row(
            env_id,
            f"{rate:,.0f}",
            "" if target is None else f"≥ {target:,} {'ok' if rate >= target else 'MISSED'}",
            f"{steps:,}",
            f"{np.percentile(resets, 50):.3f}",
            f"{np.percentile(resets, 99):.3f}",
        )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
