"""Sokoban throughput: env steps per second and room generation time.

    .venv/bin/python bench/rollout/sokoban_bench.py [--steps 200000] [--rooms 300] [--seed 0]

* **steps/s**: ``envhub.make(id)`` (so the ``MaxSteps`` wrapper is included) stepped with
  random ``"<answer>Up</answer>"``-style strings; episodes that end are reset, and the resets
  (each generating a room) are counted in the time.
* **generation**: :func:`rockroll.envs.sokoban.generate_room` called ``--rooms`` times per size; P50 and
  P99 of the wall time of one call, in milliseconds.

Prints a markdown table.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

import rockroll.envhub as envhub
from rockroll.envs.sokoban import generate_room

ACTIONS = [f"<answer>{a}</answer>" for a in ("Up", "Down", "Left", "Right")]


def steps_per_second(env_id: str, steps: int, seed: int) -> tuple[float, int]:
    """Random-action steps per second through ``envhub.make(env_id)``, and the episodes played."""
    env = envhub.make(env_id)
    rand = random.Random(seed)
    actions = [ACTIONS[rand.randrange(4)] for _ in range(steps)]
    env.reset(seed=seed)
    episodes = 1
    step = env.step
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            env.reset()
            episodes += 1
    return steps / (time.perf_counter() - start), episodes


def generation_ms(dim_room: tuple[int, int], num_boxes: int, rooms: int, seed: int) -> tuple[float, float, float]:
    """P50, P99 and mean milliseconds per generated room."""
    rng = np.random.default_rng(seed)
    times = []
    for _ in range(rooms):
        start = time.perf_counter()
        generate_room(dim_room, num_boxes, 30, rng)
        times.append((time.perf_counter() - start) * 1e3)
    p50, p99 = np.percentile(times, [50, 99])
    return float(p50), float(p99), float(np.mean(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200_000, help="steps per env id")
    parser.add_argument("--rooms", type=int, default=300, help="rooms generated per size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print("| env id | steps/s | episodes |")
    print("|---|---:|---:|")
    for env_id in ("SimpleSokoban-v0", "LargerSokoban-v0"):
        rate, episodes = steps_per_second(env_id, args.steps, args.seed)
        print(f"| {env_id} | {rate:,.0f} | {episodes} |")
    print()
    print(f"| room generation ({args.rooms} rooms) | P50 ms | P99 ms | mean ms |")
    print("|---|---:|---:|---:|")
    for dim_room, num_boxes in (((6, 6), 1), ((8, 8), 2)):
        p50, p99, mean = generation_ms(dim_room, num_boxes, args.rooms, args.seed)
        print(f"| {dim_room[0]}x{dim_room[1]}, {num_boxes} box(es) | {p50:.3f} | {p99:.3f} | {mean:.3f} |")


if __name__ == "__main__":
    main()
