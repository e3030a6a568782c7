"""Multi-turn rollout throughput of the tiny model: turns/s, generated tokens/s, turn k vs turn 1.

    .venv/bin/python bench/rollout/multiturn_bench.py [--concurrency 16 64 128] [--sources local sandbox]
                                              [--history window0 lockstep full] [--batches 3] [--threads 1]
                                              [--model DIR] [--save-model DIR]

Plays slippery FrozenLake-v0 4x4 with agentrl's :class:`~rockroll.agentrl.rollout.scheduler.RolloutScheduler`
and :class:`~rockroll.agentrl.rollout.env_manager.EnvManager` exactly as the trainer's multi-turn rollout
does (``trainer.rollout.multiturn``): one :class:`~rockroll.agentrl.engines.hf.HFEngine` (``max_batch_size=256``,
as the trainer builds it), batches of ``N / 8`` groups of 8 episodes (all ``N`` episodes of a batch
run at once), and the episode settings of ``configs/frozenlake_slippery.yaml`` mirrored from
its ``rollout.episode`` section: no system prompt, ``cells`` observations, 20 turns,
6 new tokens per turn, temperature 1.5, at most 5 invalid actions in a row. Three settings:
``window0`` (``history: last_k``, ``history_k: 0``: the prompt is one user turn with the current grid), ``lockstep``
(the same prompts, the turns of all live episodes played in rounds: ``rollout.episode.lockstep:
true``, :mod:`rockroll.agentrl.rollout.lockstep`, the trainer's default with ``history_k: 0``) and
``full`` (every prompt extends the previous one). Two env sources: ``local`` (envs in this
process) and ``sandbox`` (sessions in process sandboxes of a ``SandboxManager(backend="process")``
with the trainer's defaults: up to 8 sandboxes, 16 sessions each).

The model is the default-shape tiny model (:func:`rockroll.agentrl.models.tiny.build_tiny_model`) after a
short supervised warm start on the no-slip shortest-path expert (``--warm-steps``), so that
responses look like the trainer's (``<answer>Down</answer><|im_end|>``, two tokens with the tiny tokenizer) and episodes
last several turns; the random initialisation answers junk and every episode would end after 5
invalid actions. ``--model DIR`` reuses a model (``--save-model DIR`` keeps the one built).

Per setting: one warm-up batch (sandbox start, first forwards), then ``--batches`` timed batches.
Columns: turns/s, generated tokens/s, episodes/s (delivered), mean turns per episode, forwards
per turn, the share of prompt tokens the engine computed (the rest came from its prefix cache),
CPU time per turn (this process plus the sandbox servers; in brackets the servers), and the mean
wall time of ``engine.generate`` per turn index (turn 1, 5, 10, 20: queueing and batching
included; later turns have fewer episodes left, so this mixes cost with concurrency). The
lock-step probe (``--probe-turns``) separates them: ``N`` conversations, all live at every turn,
each turn's ``N`` requests sent together; it prints the wall time of turn ``k`` and the prompt
tokens computed per request. A ``RESULT`` line per setting closes the output. The load average is
printed: the machine may be shared with a training run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, LLMEngine
from rockroll.agentrl.models.chat import PromptBuilder, format_observation
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.rollout.scheduler import RolloutScheduler
from rockroll.agentrl.sources.kinds import EnvSource, LocalSource, SandboxSource
from rockroll.envs.frozenlake.expert import next_action
from rockroll.sandbox.manager import SandboxManager

ENV_ID = "FrozenLake-v0"
ENV_KWARGS = {"is_slippery": True, "size": 4}
TURN_COLUMNS = (1, 5, 10, 20)


def episode_config(history: str) -> EpisodeConfig:
    """The ``rollout.episode`` section of configs/frozenlake_slippery.yaml (history_k 0, or history full)."""
    return EpisodeConfig(
        max_turns=20,
        max_tokens_per_turn=6,
        temperature=1.5,
        top_p=1.0,
        history="full" if history == "full" else "last_k",
        history_k=0,
        max_context_tokens=None,
        max_invalid_actions=5,
        lockstep=history == "lockstep",
        system_prompt="none",
        observation_format="cells",
    )


# --------------------------------------------------------------------------- model
def _demos(tok: Any, n_episodes: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, response ids) of the no-slip expert on slippery maps, in both history settings."""
    import numpy as np

    import rockroll.envhub as envhub

    rng = np.random.default_rng(seed)
    env = envhub.make(ENV_ID, **ENV_KWARGS)
    out: list[tuple[list[int], list[int]]] = []
    for ep in range(n_episodes):
        obs, _ = env.reset(seed=int(rng.integers(2**31 - 1)))
        history = "full" if ep % 2 else "last_k"
        builder = PromptBuilder(tok, "", history=history, last_k=0, max_new_tokens=6)  # type: ignore[arg-type]
        prompt = builder.first_prompt(format_observation(obs, "cells"))
        for _ in range(8 if history == "full" else 20):  # full-history demos: ~300 tokens at most
            action = next_action(env.unwrapped) or "Down"
            response = tok.encode(f"<answer>{action}</answer><|im_end|>", add_special_tokens=False)
            out.append((prompt, response))
            builder.add_response(response)
            obs, _r, terminated, truncated, _info = env.step(f"<answer>{action}</answer>")
            if terminated or truncated:
                break
            prompt = builder.next_prompt(format_observation(obs, "cells"))
    env.close()
    return out


def warm_start(model: Any, tok: Any, steps: int, seed: int = 0, batch_size: int = 32) -> float:
    """A short SFT on expert turns (loss on response tokens); returns the last loss."""
    import torch

    demos = _demos(tok, 400, seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    pad = tok.pad_token_id
    model.train()
    loss_value = float("nan")
    for _ in range(steps):
        idx = torch.randint(len(demos), (batch_size,), generator=gen).tolist()
        rows = [demos[i] for i in idx]
        width = max(len(p) + len(r) for p, r in rows)
        ids = torch.full((batch_size, width), pad, dtype=torch.long)
        labels = torch.full((batch_size, width), -100, dtype=torch.long)
        mask = torch.zeros((batch_size, width), dtype=torch.long)
        for i, (p, r) in enumerate(rows):
            seq = p + r
            ids[i, : len(seq)] = torch.tensor(seq)
            labels[i, len(p) : len(seq)] = torch.tensor(r)
            mask[i, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_value = loss.detach().item()
    model.eval()
    return loss_value


def load_model(args: argparse.Namespace, tmp: Path) -> tuple[Any, Any, str]:
    from rockroll.agentrl.models.tiny import build_tiny_model, load_model_and_tokenizer

    if args.model is not None:
        model, tok = load_model_and_tokenizer(args.model)
        return model, tok, f"{args.model}"
    path = build_tiny_model(tmp / "tiny")
    model, tok = load_model_and_tokenizer(path)
    t0 = time.perf_counter()
    loss = warm_start(model, tok, args.warm_steps, args.seed)
    note = f"tiny model built, warm start {args.warm_steps} steps in {time.perf_counter() - t0:.0f}s (loss {loss:.3f})"
    if args.save_model is not None:
        model.save_pretrained(args.save_model)
        tok.save_pretrained(args.save_model)
        for f in path.iterdir():
            if not (args.save_model / f.name).exists():
                shutil.copy(f, args.save_model / f.name)
    return model, tok, note


# --------------------------------------------------------------------------- engine timing
class TimedEngine(LLMEngine):
    """Passes requests through to ``inner``, recording each one's wall time by turn index."""

    def __init__(self, inner: LLMEngine) -> None:
        self.inner = inner
        self.name = inner.name
        self.tokenizer = inner.tokenizer
        self.wall: dict[int, list[float]] = defaultdict(list)
        self.tokens = 0

    @property  # type: ignore[override]
    def weight_version(self) -> int:
        return self.inner.weight_version

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        t0 = time.perf_counter()
        result = await self.inner.generate(request)
        turn = int(request.request_id.rsplit("/", 1)[-1]) + 1
        self.wall[turn].append(time.perf_counter() - t0)
        self.tokens += len(result.token_ids)
        return result

    async def generate_batch(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        t0 = time.perf_counter()
        results = await self.inner.generate_batch(requests)
        wall = time.perf_counter() - t0
        for request, result in zip(requests, results, strict=True):
            self.wall[int(request.request_id.rsplit("/", 1)[-1]) + 1].append(wall)
            self.tokens += len(result.token_ids)
        return results

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self.inner.update_weights(state_dict, version)

    def reset(self) -> None:
        self.wall.clear()
        self.tokens = 0


# --------------------------------------------------------------------------- one setting
def _stat(engine: Any, key: str) -> int:
    return int(getattr(engine, "stats", {}).get(key, 0))


async def run_setting(
    engine: TimedEngine, source: EnvSource, n: int, history: str, batches: int, seed: int
) -> dict[str, Any]:
    config = SchedulerConfig(
        env_ids=[ENV_ID],
        env_kwargs={ENV_ID: dict(ENV_KWARGS)},
        num_env_groups=max(1, n // 8),
        group_size=min(8, n),
        seed=seed,
        episode=episode_config(history),
    )
    scheduler = RolloutScheduler(engine, source, config)
    inner = engine.inner
    try:
        await scheduler.run_batch()  # warm-up: sandbox start, first forwards
        engine.reset()
        before = {
            k: _stat(inner, k) for k in ("prompt_tokens", "prefill_tokens", "forward_calls", "steps", "step_rows")
        }
        turns = episodes = 0
        cpu0, servers0 = _cpu_s(), _server_cpu_s(source)
        t0 = time.perf_counter()
        for _ in range(batches):
            batch = await scheduler.run_batch()
            episodes += len(batch.trajectories)
            turns += sum(len(t.turns) for t in batch.trajectories)
        wall = time.perf_counter() - t0
        cpu, servers = _cpu_s() - cpu0, _server_cpu_s(source) - servers0
        after = {k: _stat(inner, k) - before[k] for k in before}
    finally:
        await scheduler.close()
    return {
        "turns_s": turns / wall,
        "tokens_s": engine.tokens / wall,
        "episodes_s": episodes / wall,
        "turns_per_ep": turns / max(episodes, 1),
        "tokens_per_turn": engine.tokens / max(turns, 1),
        "gen_ms": {k: 1000 * sum(v) / len(v) for k, v in sorted(engine.wall.items())},
        "gen_n": {k: len(v) for k, v in sorted(engine.wall.items())},
        "prefill_frac": after["prefill_tokens"] / after["prompt_tokens"] if after["prompt_tokens"] else float("nan"),
        "forwards_per_turn": after["forward_calls"] / max(turns, 1),
        "rows_per_step": after["step_rows"] / after["steps"] if after["steps"] else float("nan"),
        "wall_s": wall,
        "turns": turns,
        "cpu_ms_per_turn": 1000 * (cpu + servers) / max(turns, 1),
        "server_cpu_ms_per_turn": 1000 * servers / max(turns, 1),
    }


def _cpu_s() -> float:
    """CPU seconds of this process (all threads)."""
    t = os.times()
    return t.user + t.system


def _server_cpu_s(source: EnvSource) -> float:
    """CPU seconds of the source's sandbox server processes (0 for in-process envs), from /proc."""
    manager = getattr(source, "manager", None)
    if manager is None:
        return 0.0
    label = f"rockroll.manager={manager.config.name}".encode()
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if label not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        except OSError:
            continue
    return total


# --------------------------------------------------------------------------- lock-step turn cost
async def turn_cost(engine: Any, n: int, history: str, turns: int, seed: int) -> dict[int, tuple[float, float]]:
    """Wall ms and prefilled prompt tokens per request of turn k, with ``n`` conversations all live at every turn.

    The scheduler's per-turn numbers mix the cost of a turn with how many episodes are still
    running (fewer at late turns); here ``n`` conversations (groups of 8 on one map, in-process
    envs) are stepped in lock-step for ``turns`` turns: all ``n`` requests of turn k go out
    together. An episode that ends is reset on a new map and its conversation goes on, so every
    conversation has exactly k exchanges at turn k.
    """
    import rockroll.envhub as envhub
    from rockroll.agentrl.engines.base import SamplingParams

    cfg = episode_config(history)
    envs = [envhub.make(ENV_ID, **ENV_KWARGS) for _ in range(n)]
    builders = [
        PromptBuilder(engine.tokenizer, "", history=cfg.history, last_k=cfg.history_k, max_new_tokens=6)
        for _ in range(n)
    ]
    prompts = [
        b.first_prompt(format_observation(e.reset(seed=seed + i // 8)[0], "cells"))
        for i, (e, b) in enumerate(zip(envs, builders, strict=True))
    ]
    out: dict[int, tuple[float, float]] = {}
    for k in range(1, turns + 1):
        params = [
            SamplingParams(max_new_tokens=6, temperature=cfg.temperature, seed=seed * 7919 + 100 * i + k)
            for i in range(n)
        ]
        before = engine.stats.get("prefill_tokens", 0)
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(engine.generate(GenerationRequest(pr, sp)) for pr, sp in zip(prompts, params, strict=True))
        )
        out[k] = (1000 * (time.perf_counter() - t0), (engine.stats.get("prefill_tokens", 0) - before) / n)
        for i, (env, b, res) in enumerate(zip(envs, builders, results, strict=True)):
            text = b.add_response(res.token_ids)
            obs, _r, terminated, truncated, _info = env.step(text)
            if terminated or truncated:
                obs, _ = env.reset(seed=seed + 1000 * k + i // 8)
            prompts[i] = b.next_prompt(format_observation(obs, "cells"))
    for env in envs:
        env.close()
    return out


async def _measure(
    engine: TimedEngine, source: EnvSource, n: int, history: str, batches: int, seed: int
) -> dict[str, Any]:
    try:
        return await run_setting(engine, source, n, history, batches, seed)
    finally:
        await engine.inner.close()


async def _probe(engine: Any, n: int, history: str, turns: int, seed: int) -> dict[int, tuple[float, float]]:
    try:
        return await turn_cost(engine, n, history, turns, seed)
    finally:
        await engine.close()


def make_sandbox_source(tmp: Path) -> tuple[SandboxSource, SandboxManager]:
    """Process sandboxes as the trainer builds them (its defaults: 8 sandboxes, 16 sessions each)."""
    manager = SandboxManager(
        backend="process", name=f"mtbench-{os.getpid()}", db_url=f"sqlite:///{tmp}/sandboxes.db", idle_ttl_s=None
    )
    return SandboxSource(manager), manager


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 128], help="episodes at once (x8)")
    p.add_argument("--sources", nargs="+", default=["local", "sandbox"], choices=["local", "sandbox"])
    p.add_argument(
        "--history",
        nargs="+",
        default=["window0", "lockstep", "full"],
        choices=["window0", "lockstep", "full"],
        help="lockstep: window0 with the turns of all live episodes in rounds (rollout.episode.lockstep: true)",
    )
    p.add_argument("--batches", type=int, default=3, help="timed batches per setting (after one warm-up)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--model", type=Path, default=None, help="model directory (default: build + warm start)")
    p.add_argument("--save-model", type=Path, default=None, help="keep the built model here")
    p.add_argument("--warm-steps", type=int, default=300, help="SFT steps of the built model")
    p.add_argument("--probe-turns", type=int, default=20, help="turns of the lock-step turn-cost probe (0: skip)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.probe_turns == 1:
        p.error("--probe-turns must be 0 (skip) or at least 2 (turn 2 is the reference)")

    import torch

    from rockroll.agentrl.engines.hf import HFEngine

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="mtbench-"))
    model, tok, note = load_model(args, tmp)
    model.requires_grad_(False)  # the trainer hands its engine a frozen copy (trainer.learner.models.frozen_copy)
    print(note)
    manager: SandboxManager | None = None
    rows: list[tuple[str, int, str, dict[str, Any]]] = []
    try:
        for source_kind in args.sources:
            if source_kind == "sandbox":
                source, manager = make_sandbox_source(tmp)
            else:
                source = LocalSource()
            for history in args.history:
                for n in args.concurrency:
                    inner = HFEngine(model=model, tokenizer=tok, max_batch_size=256, seed=args.seed)
                    engine = TimedEngine(inner)
                    load = os.getloadavg()[0]

                    r = asyncio.run(_measure(engine, source, n, history, args.batches, args.seed))
                    r["load"] = load
                    rows.append((source_kind, n, history, r))
                    _print_row(source_kind, n, history, r)
            if manager is not None:
                manager.close()
                manager = None
        probes: list[tuple[str, int, dict[int, tuple[float, float]], float]] = []
        for history in args.history if args.probe_turns > 0 else []:
            for n in args.concurrency:
                load = os.getloadavg()[0]
                probe = HFEngine(model=model, tokenizer=tok, max_batch_size=256, seed=args.seed)
                probes.append((history, n, asyncio.run(_probe(probe, n, history, args.probe_turns, args.seed)), load))
    finally:
        if manager is not None:
            manager.close()
        shutil.rmtree(tmp, ignore_errors=True)
    _print_table(rows, args.threads)
    _print_probes(probes)


def _print_row(source: str, n: int, history: str, r: dict[str, Any]) -> None:
    print(
        f"  {source:<7} {history:<7} N={n:<3} turns/s {r['turns_s']:7.0f}  tokens/s {r['tokens_s']:7.0f}  "
        f"({r['turns']} turns in {r['wall_s']:.1f}s, load {r['load']:.2f})",
        flush=True,
    )


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{x:.0%}"  # engines without the prefill counters


def _print_table(rows: list[tuple[str, int, str, dict[str, Any]]], threads: int) -> None:
    gen_cols = " | ".join(f"gen ms t{k}" for k in TURN_COLUMNS)
    head = (
        f"| source | history | N | turns/s | gen tokens/s | episodes/s | turns/ep | tokens/turn | "
        f"forwards/turn | prefilled | CPU ms/turn (servers) | {gen_cols} | load |"
    )
    print()
    print(f"multi-turn rollout, slippery {ENV_ID} 4x4, hf engine on the tiny model, {threads} torch thread(s), "
          f"{os.cpu_count()} cpus")  # fmt: skip
    print(head)
    print("|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|")
    for source, n, history, r in rows:
        gens = " | ".join(f"{r['gen_ms'][k]:.1f}" if k in r["gen_ms"] else "-" for k in TURN_COLUMNS)
        print(
            f"| {source} | {history} | {n} | {r['turns_s']:,.0f} | {r['tokens_s']:,.0f} | {r['episodes_s']:.1f} | "
            f"{r['turns_per_ep']:.1f} | {r['tokens_per_turn']:.2f} | {r['forwards_per_turn']:.3f} | "
            f"{_pct(r['prefill_frac'])} | {r['cpu_ms_per_turn']:.2f} ({r['server_cpu_ms_per_turn']:.2f}) | {gens} | "
            f"{r['load']:.2f} |"
        )
    print()
    print("generation wall time by turn index (ms, mean; n = requests):")
    for source, n, history, r in rows:
        cells = ", ".join(f"t{k}: {v:.1f} (n={r['gen_n'][k]})" for k, v in r["gen_ms"].items())
        print(f"  {source} {history} N={n}: {cells}")
    print()
    for source, n, history, r in rows:
        ms = r["gen_ms"]
        last = max((k for k in ms if r["gen_n"][k] >= 20), default=1)
        ratio = ms[last] / ms[1] if 1 in ms and ms[1] > 0 else float("nan")
        print(
            f"RESULT source={source} history={history} N={n}: turns/s={r['turns_s']:.0f} "
            f"gen_tokens/s={r['tokens_s']:.0f} episodes/s={r['episodes_s']:.1f} "
            f"gen_ms_t1={ms.get(1, float('nan')):.1f} gen_ms_t{last}={ms.get(last, float('nan')):.1f} "
            f"(t{last}/t1 {ratio:.2f}) prefilled={_pct(r['prefill_frac'])} cpu_ms/turn={r['cpu_ms_per_turn']:.2f} "
            f"load={r['load']:.2f}"
        )


def _print_probes(probes: list[tuple[str, int, dict[int, tuple[float, float]], float]]) -> None:
    if not probes:
        return
    ks = sorted({k for k in (1, 2, *TURN_COLUMNS) for _h, _n, p, _l in probes if k in p})
    last = ks[-1]
    print()
    print("lock-step turn cost (N conversations live at every turn; in-process envs): wall ms of turn k for all N")
    print("requests together / prompt tokens prefilled per request. Turn 1 is cheap: a group's 8 episodes")
    print("start on one prompt (computed once); from turn 2 each conversation adds its own observation")
    head = "| history | N | " + " | ".join(f"turn {k}" for k in ks) + f" | turn {last} / turn 2 | load |"
    print(head)
    print("|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|")
    for history, n, p, load in probes:
        cells = " | ".join(f"{p[k][0]:.1f} ms / {p[k][1]:.1f} tok" for k in ks)
        print(f"| {history} | {n} | {cells} | {p[last][0] / p[2][0]:.2f} | {load:.2f} |")
    for history, n, p, _load in probes:
        print(
            f"RESULT probe history={history} N={n}: turn1_ms={p[1][0]:.1f} turn2_ms={p[2][0]:.1f} "
            f"turn{last}_ms={p[last][0]:.1f} ratio_t{last}_t2={p[last][0] / p[2][0]:.2f} "
            f"prefill_tok_t2={p[2][1]:.1f} prefill_tok_t{last}={p[last][1]:.1f}"
        )


if __name__ == "__main__":
    main()
