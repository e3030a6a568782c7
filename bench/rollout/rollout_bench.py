"""Rollout throughput: synchronous (batch, lock-step) rollout vs queue-scheduled async rollout.

    .venv/bin/python bench/rollout/rollout_bench.py [--groups 8] [--group-size 8] [--batches 3]

Both modes use the same engine and the same envs:

* engine: the ``random`` engine standing in for a model server, a constant ``--gen-ms`` per
  request (requests in flight overlap, as in a batching server);
* envs: FrozenLake-v0 (random maps, up to ``--max-turns`` turns) wrapped in
  :class:`rockroll.agentrl.faults.envs.FaultyEnv` with no faults but a **lognormal** step latency (median
  ``--step-median-ms``, sigma ``--step-sigma``: long-tailed, p99 ≈ 10x-30x the median), stepped in a
  thread pool.

Modes:

* ``sync``: the classic batch loop. Every turn, one batched generation call for all live episodes,
  then every live env is stepped (in parallel) and the loop waits for the slowest before the next
  turn; the batch ends when its slowest episode ends. ``groups x group_size`` episodes.
* ``async``: :class:`rockroll.agentrl.rollout.scheduler.RolloutScheduler`: every episode runs on its own (its
  generation request goes out as soon as its env answered); measured without redundancy, and with
  ``--redundancy`` extra episodes per group and ``--extra-groups`` extra groups (the first
  finishers win, stragglers are cancelled). The speed-up printed is the latter over ``sync``.

Both deliver ``groups x group_size`` episodes per batch; episodes/s counts delivered episodes.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import time
from typing import Any

from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.faults.envs import register_fault_env
from rockroll.agentrl.faults.latency import Latency
from rockroll.agentrl.models.chat import PromptBuilder
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.rollout.scheduler import RolloutScheduler
from rockroll.agentrl.sources.kinds import LocalSource

ENV_ID = "BenchSlowFrozenLake-v0"


async def sync_batch(
    engine: RandomEngine, source: LocalSource, n: int, cfg: EpisodeConfig, seed: int, pool: cf.ThreadPoolExecutor
) -> int:
    """One lock-step batch of ``n`` episodes; returns the number of finished episodes."""
    loop = asyncio.get_running_loop()
    envs = await asyncio.gather(*(loop.run_in_executor(pool, source.open, ENV_ID, {}) for _ in range(n)))
    seeds = [seed + i // 8 for i in range(n)]  # groups of 8 share a seed
    resets = await asyncio.gather(
        *(loop.run_in_executor(pool, lambda e=e, s=s: e.reset(seed=s)) for e, s in zip(envs, seeds, strict=True))
    )
    builders = [
        PromptBuilder(engine.tokenizer, e.system_prompt(), max_new_tokens=cfg.max_tokens_per_turn) for e in envs
    ]
    prompts = [b.first_prompt(obs) for b, (obs, _) in zip(builders, resets, strict=True)]
    live = list(range(n))
    params = SamplingParams(max_new_tokens=cfg.max_tokens_per_turn)
    for _ in range(cfg.max_turns):
        results = await engine.generate_batch([GenerationRequest(prompts[i], params) for i in live])
        texts = [builders[i].add_response(r.token_ids) for i, r in zip(live, results, strict=True)]
        steps = await asyncio.gather(
            *(loop.run_in_executor(pool, envs[i].step, t) for i, t in zip(live, texts, strict=True))
        )
        still = []
        for i, (obs, _r, term, trunc, _info) in zip(live, steps, strict=True):
            if not (term or trunc):
                prompts[i] = builders[i].next_prompt(obs)
                still.append(i)
        live = still
        if not live:
            break
    for e in envs:
        source.close(e)
    return n


def run_sync(args: argparse.Namespace, engine: RandomEngine, cfg: EpisodeConfig) -> float:
    n = args.groups * args.group_size
    source = LocalSource()
    pool = cf.ThreadPoolExecutor(max_workers=max(16, n))

    async def go() -> float:
        start = time.monotonic()
        done = 0
        for b in range(args.batches):
            done += await sync_batch(engine, source, n, cfg, args.seed + 1000 * b, pool)
        return done / (time.monotonic() - start)

    try:
        return asyncio.run(go())
    finally:
        pool.shutdown()


def run_async(
    args: argparse.Namespace, engine: RandomEngine, cfg: EpisodeConfig, redundancy: int, extra_groups: int
) -> tuple[float, dict[str, Any]]:
    config = SchedulerConfig(
        env_ids=[ENV_ID], num_env_groups=args.groups, group_size=args.group_size,
        group_size_redundancy=redundancy, extra_groups=extra_groups, episode=cfg, seed=args.seed,
    )  # fmt: skip
    source = LocalSource()

    async def go() -> tuple[float, dict[str, Any]]:
        scheduler = RolloutScheduler(engine, source, config)
        start = time.monotonic()
        done, cancelled = 0, 0.0
        for _ in range(args.batches):
            batch = await scheduler.run_batch()
            done += len(batch.trajectories)
            cancelled += batch.metrics.get("rollout/episodes_cancelled", 0.0)
        rate = done / (time.monotonic() - start)
        await scheduler.close()
        return rate, {"cancelled": cancelled, "leaked": source.open_count}

    return asyncio.run(go())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--redundancy", type=int, default=2, help="extra episodes per group (async)")
    p.add_argument("--extra-groups", type=int, default=2, help="extra groups per batch (async)")
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--max-turns", type=int, default=10)
    p.add_argument("--gen-ms", type=float, default=10.0, help="engine latency per request")
    p.add_argument("--step-median-ms", type=float, default=20.0, help="median env step latency (lognormal)")
    p.add_argument("--step-sigma", type=float, default=1.0, help="lognormal sigma of the step latency")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    step = {"kind": "lognormal", "median_s": args.step_median_ms / 1000, "sigma": args.step_sigma}
    register_fault_env(ENV_ID, inner="FrozenLake-v0", step_latency=step)  # latency RNG: OS entropy per env
    cfg = EpisodeConfig(max_turns=args.max_turns, max_tokens_per_turn=32)

    def engine() -> RandomEngine:
        return RandomEngine(latency=Latency("constant", args.gen_ms / 1000), seed=args.seed)

    lat = Latency("lognormal", args.step_median_ms / 1000, args.step_sigma)
    print(
        f"env step latency: lognormal, median {args.step_median_ms:.0f} ms, sigma {args.step_sigma}, "
        f"mean {lat.mean_s * 1000:.0f} ms; engine latency {args.gen_ms:.0f} ms/request"
    )
    print(
        f"batch: {args.groups} groups x {args.group_size} episodes, {args.batches} batches, "
        f"max {args.max_turns} turns; async redundancy: +{args.redundancy}/group, +{args.extra_groups} groups"
    )
    sync_rate = run_sync(args, engine(), cfg)
    plain_rate, _ = run_async(args, engine(), cfg, 0, 0)
    async_rate, info = run_async(args, engine(), cfg, args.redundancy, args.extra_groups)
    print()
    print(f"| {'mode':<40} | {'episodes/s':>10} |")
    print(f"|{'-' * 42}|{'-' * 12}|")
    print(f"| {'sync (lock-step batch)':<40} | {sync_rate:>10.1f} |")
    print(f"| {'async (queue scheduling, no redundancy)':<40} | {plain_rate:>10.1f} |")
    print(f"| {'async (queue scheduling + redundancy)':<40} | {async_rate:>10.1f} |")
    print(
        f"\nspeed-up: {async_rate / sync_rate:.2f}x  (stragglers cancelled: {info['cancelled']:.0f}, "
        f"envs leaked: {info['leaked']})"
    )


if __name__ == "__main__":
    main()
