"""Throughput of the hf engine on the tiny model: tokens/s with 1, 16 and 64 concurrent requests.

    .venv/bin/python bench/rollout/engine_bench.py [--model DIR] [--concurrency 1 16 64] [--new-tokens 64]
                                           [--threads 1] [--device cpu] [--repeats 2]

Prompts are chat prompts of FrozenLake observations (~50 tokens). Every request generates exactly
``--new-tokens`` tokens (stop tokens are disabled by asking for an impossible stop id and EOS is
removed from the engine's stop set), so throughput is compared at matched completion lengths.
Without ``--model`` a tiny model is built in a temporary directory first.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table


def _prompts(tok, n: int) -> list[list[int]]:
    import rockroll.envhub as envhub

    env = envhub.make("FrozenLake-v0")
    env.reset(seed=0)
    system = env.system_prompt()
    out = []
    for i in range(n):
        obs, _ = env.reset(seed=i)
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
        text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        out.append(tok.encode(text, add_special_tokens=False))
    return out


async def _one_round(engine, prompts: list[list[int]], new_tokens: int) -> tuple[float, int, int]:
    from rockroll.agentrl.engines import GenerationRequest, SamplingParams

    reqs = [
        GenerationRequest(p, SamplingParams(max_new_tokens=new_tokens, temperature=1.0, seed=i))
        for i, p in enumerate(prompts)
    ]
    calls = engine.stats["forward_calls"]
    t0 = time.perf_counter()
    results = await asyncio.gather(*(engine.generate(r) for r in reqs))
    wall = time.perf_counter() - t0
    return wall, sum(len(r.token_ids) for r in results), engine.stats["forward_calls"] - calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="model directory (default: build the tiny model)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds per setting (after one warm-up)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from rockroll.agentrl.engines.hf import HFEngine
    from rockroll.agentrl.models.tiny import build_tiny_model

    tmp = None
    model_dir = args.model
    if model_dir is None:
        tmp = tempfile.TemporaryDirectory()
        model_dir = build_tiny_model(Path(tmp.name) / "tiny")
    engine = HFEngine(model_dir, device=args.device, max_batch_size=max(args.concurrency))
    engine.eos_token_ids = set()  # matched completion lengths: nothing stops early
    n_params = sum(p.numel() for p in engine.model.parameters())

    table = Table(
        title=f"hf engine, {model_dir.name} ({n_params / 1e6:.2f}M params), {args.new_tokens} new tokens/request"
    )
    for col in ("concurrent", "prompt tokens", "wall s", "tokens", "tokens/s", "forwards", "ms/forward"):
        table.add_column(col, justify="right")

    async def run_all() -> None:
        for c in args.concurrency:
            prompts = _prompts(engine.tokenizer, c)
            await _one_round(engine, prompts, 4)  # warm-up
            walls, toks, calls = 0.0, 0, 0
            for _ in range(args.repeats):
                w, t, f = await _one_round(engine, prompts, args.new_tokens)
                walls, toks, calls = walls + w, toks + t, calls + f
            table.add_row(
                str(c),
                str(max(len(p) for p in prompts)),
                f"{walls / args.repeats:.2f}",
                str(toks // args.repeats),
                f"{toks / walls:,.0f}",
                str(calls // args.repeats),
                f"{1000 * walls / max(calls, 1):.1f}",
            )
        await engine.close()

    asyncio.run(run_all())
    console = Console()
    console.print(table)
    console.print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, torch {torch.__version__}, "
        f"{args.threads} thread(s), device {args.device}"
    )
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
