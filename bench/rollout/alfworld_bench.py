"""ALFWorld-v0 speed, in-process through ``envhub.make``: steps/s, reset time, fork and planner cost.

A random agent steps uniformly drawn admissible commands (``<answer>`` tags included, so parsing
is timed too) until the episode ends (success or the 50-step limit). Prints one table row per
configuration::

    .venv/bin/python bench/rollout/alfworld_bench.py [--episodes 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

import rockroll.envhub as envhub
from rockroll.envs.alfworld import plan

CONFIGS: dict[str, dict[str, Any]] = {
    "default (1 room)": {},
    "2 rooms": {"num_rooms": 2},
    "4 rooms, 40 recep, 40 distr": {"num_rooms": 4, "num_receptacles": 40, "num_distractors": 40},
}


def bench(kwargs: dict[str, Any], episodes: int, seed: int) -> dict[str, float]:
    """Measure one configuration."""
    env = envhub.make("ALFWorld-v0", **kwargs)
    rng = np.random.default_rng(seed)
    resets, step_time, steps, wins, admissible = [], 0.0, 0, 0, []
    for ep in range(episodes):
        t0 = time.perf_counter()
        _, info = env.reset(seed=seed + ep)
        resets.append(time.perf_counter() - t0)
        done = False
        while not done:
            cmds = info["admissible_commands"]
            admissible.append(len(cmds))
            action = f"<answer>{cmds[int(rng.integers(len(cmds)))]}</answer>"
            t0 = time.perf_counter()
            _, _, terminated, truncated, info = env.step(action)
            step_time += time.perf_counter() - t0
            steps += 1
            done = terminated or truncated
            wins += int(terminated)

    plan_times, plan_lens, fork_times = [], [], []
    for ep in range(episodes):
        env.reset(seed=seed + ep)
        t0 = time.perf_counter()
        plan_lens.append(len(plan(env)))
        plan_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        env.set_state(env.get_state())
        fork_times.append(time.perf_counter() - t0)
    return {
        "steps/s": steps / step_time,
        "reset ms (mean)": 1e3 * statistics.fmean(resets),
        "reset ms (p95)": 1e3 * float(np.percentile(resets, 95)),
        "admissible (mean)": statistics.fmean(admissible),
        "random win %": 100.0 * wins / episodes,
        "plan len": statistics.fmean(plan_lens),
        "plan ms": 1e3 * statistics.fmean(plan_times),
        "fork ms": 1e3 * statistics.fmean(fork_times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200, help="episodes per configuration")
    parser.add_argument("--seed", type=int, default=0, help="first episode seed")
    args = parser.parse_args()
    rows = {name: bench(kwargs, args.episodes, args.seed) for name, kwargs in CONFIGS.items()}
    cols = list(next(iter(rows.values())))
    width = max(len(n) for n in rows)
    print(f"ALFWorld-v0, {args.episodes} episodes per row, random admissible commands, max_steps=50")
    print(f"{'config':<{width}} | " + " | ".join(cols))
    print("-" * (width + 1) + "|" + "|".join("-" * (len(c) + 2) for c in cols))
    for name, row in rows.items():
        print(f"{name:<{width}} | " + " | ".join(f"{row[c]:>{len(c)}.{0 if c == 'steps/s' else 2}f}" for c in cols))


if __name__ == "__main__":
    main()
