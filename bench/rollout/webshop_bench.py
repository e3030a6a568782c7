"""WebShop-v0 throughput, in-process through ``envhub.make``: build, reset and step timings.

    .venv/bin/python bench/rollout/webshop_bench.py [--episodes 200] [--num-products 1000]

Prints one table: the first ``make`` (generates the catalogue and builds the BM25 index), a
cached ``make``, mean ``reset`` time, and steps per second for the oracle and a uniform random
policy over ``action_candidates()`` (observation rendering and info included).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rockroll.envhub as envhub
from rockroll.envs.webshop import WebShopOracle
from rockroll.envs.webshop.store import clear_shop_cache


def _play(env, episodes: int, policy: str, seed0: int) -> tuple[int, float, float, float]:
    """Run ``episodes`` episodes; return (steps, step seconds, mean final reward, success rate)."""
    oracle, rng = WebShopOracle(), np.random.default_rng(seed0)
    steps, step_s, rewards, wins = 0, 0.0, [], 0
    for ep in range(episodes):
        env.reset(seed=seed0 + ep)
        oracle.reset()
        done, reward, info = False, 0.0, {}
        while not done:
            if policy == "oracle":
                action = oracle.act(env)
            else:
                cands = env.unwrapped.action_candidates()
                action = f"<answer>{cands[int(rng.integers(len(cands)))]}</answer>"
            t = time.perf_counter()
            _, reward, term, trunc, info = env.step(action)
            step_s += time.perf_counter() - t
            steps += 1
            done = term or trunc
        rewards.append(reward if term else 0.0)
        wins += bool(info["success"])
    return steps, step_s, float(np.mean(rewards)), wins / episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--num-products", type=int, default=1000)
    args = parser.parse_args()

    clear_shop_cache()
    t = time.perf_counter()
    env = envhub.make("WebShop-v0", num_products=args.num_products)
    first_make = time.perf_counter() - t
    t = time.perf_counter()
    env = envhub.make("WebShop-v0", num_products=args.num_products)
    cached_make = time.perf_counter() - t

    n_resets = 1000
    t = time.perf_counter()
    for seed in range(n_resets):
        env.reset(seed=seed)
    reset_s = (time.perf_counter() - t) / n_resets

    rows = [
        ("first make (import, catalogue, BM25 index)", f"{first_make * 1e3:.1f} ms"),
        ("make (cached shop)", f"{cached_make * 1e3:.2f} ms"),
        ("reset (mean of 1000)", f"{reset_s * 1e6:.0f} us"),
    ]
    for policy in ("oracle", "random"):
        steps, step_s, reward, success = _play(env, args.episodes, policy, seed0=10_000)
        rows.append(
            (
                f"{policy} policy, {args.episodes} episodes",
                f"{steps / step_s:,.0f} steps/s ({steps} steps), mean reward {reward:.3f}, success {success:.1%}",
            )
        )
    width = max(len(name) for name, _ in rows)
    print(f"WebShop-v0, {args.num_products} products")
    print(f"{'measure'.ljust(width)} | value")
    print(f"{'-' * width}-+-{'-' * 60}")
    for name, value in rows:
        print(f"{name.ljust(width)} | {value}")


if __name__ == "__main__":
    main()
