"""What tool calling costs the rollout: prompt building and parsing per turn, and tool-env turns/s.

    .venv/bin/python bench/tools/tool_bench.py [--episodes 128] [--rounds 3] [--out bench/results/tool_overhead.json]

Two measurements, both with the tiny hermes model's tokenizer (``TinyModelConfig(chat_template="hermes")``,
built for Lookup-v0 and FrozenLake-v0, so both envs' text is in its vocabulary):

* **Per turn, the builder's work** (µs; no engine, no env in the timed part): ``--episodes`` episodes are
  played turn by turn, interleaved (all episodes' turn 1, then all turn 2, ...). On the tool path each turn
  is :meth:`ToolPromptBuilder.add_response` (decode + the hermes parser) and ``after_step`` (the tool
  messages rendered with ``tools=``, the delta encoded); on the text-tag path, FrozenLake's
  :class:`PromptBuilder` ``add_response`` (decode) and ``after_step`` (the next user turn). Responses are the
  experts' (the Lookup expert's calls in the hermes style, FrozenLake's shortest-path move), and the env
  answers are recorded beforehand, so only the builders are timed. Both ``full`` and ``last_k`` history.
* **Turns/s of Lookup-v0 through the env manager**: ``--episodes`` concurrent episodes, the engine an instant
  one answering the expert's calls (:class:`bench.tools.expert_engine.ExpertToolEngine`), envs in process
  vs in process sandboxes (``SandboxManager(backend="process")``, sessions over HTTP).

Each timing is the best of ``--rounds``. A ``RESULT`` line closes the output; ``--out`` keeps the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import rockroll.envhub as envhub

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))

from bench.tools.expert_engine import ExpertToolEngine  # noqa: E402
from rockroll.agentrl.models.chat import PromptBuilder  # noqa: E402
from rockroll.agentrl.rollout.config import EpisodeConfig  # noqa: E402
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec  # noqa: E402
from rockroll.agentrl.sources.kinds import LocalSource, SandboxSource  # noqa: E402
from rockroll.agentrl.tools import get_parser  # noqa: E402
from rockroll.agentrl.tools.prompt import ToolPromptBuilder  # noqa: E402
from rockroll.envs.frozenlake.expert import next_action as frozen_move  # noqa: E402
from rockroll.envs.lookup.expert import next_action as lookup_call  # noqa: E402


def _tokenizer(out: Path) -> Any:
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model, load_tokenizer

    cfg = TinyModelConfig(chat_template="hermes", env_ids=("Lookup-v0", "FrozenLake-v0"), answer_tokens=False)
    return load_tokenizer(build_tiny_model(out, cfg))


def _script(kind: str, seed: int, tok: Any) -> tuple[str, str, Any, list[tuple[list[int], tuple[Any, ...]]]]:
    """(system, first observation, tools, [(response ids, step answer)]) of one expert episode."""
    parser = get_parser("hermes")
    env = envhub.make("Lookup-v0" if kind == "tools" else "FrozenLake-v0", **({} if kind == "tools" else {"size": 4}))
    obs, _ = env.reset(seed=seed)
    turns = []
    for _ in range(8):
        if kind == "tools":
            action = lookup_call(env.unwrapped)
            if action is None:
                break
            text, act = parser.render(action), action
        else:
            move = frozen_move(env.unwrapped)
            if move is None:
                break
            text = act = f"<answer>{move}</answer>"
        ids = list(tok.encode(text, add_special_tokens=False)) + [tok.eos_token_id]
        step = env.step(act)
        turns.append((ids, step))
        if step[2] or step[3]:
            break
    return env.system_prompt(), obs, env.tools, turns


def builder_us_per_turn(kind: str, tok: Any, episodes: int, history: str, rounds: int) -> float:
    """Best-of-``rounds`` µs per turn of the builders' work (see the module docstring)."""
    scripts = [_script(kind, s, tok) for s in range(episodes)]
    best = float("inf")
    for _ in range(rounds):
        builders: list[Any] = []
        for system, obs, tools, _turns in scripts:
            if kind == "tools":
                b = ToolPromptBuilder(tok, system, tools, get_parser("hermes"), history=history, last_k=2)  # type: ignore[arg-type]
            else:
                b = PromptBuilder(tok, system, history=history, last_k=2)  # type: ignore[arg-type]
            b.first_prompt(obs)
            builders.append(b)
        n, start = 0, time.perf_counter()
        for t in range(max(len(s[3]) for s in scripts)):
            for b, script in zip(builders, scripts, strict=True):
                if t < len(script[3]):
                    ids, step = script[3][t]
                    b.add_response(ids)
                    b.after_step(step)
                    n += 1
        best = min(best, (time.perf_counter() - start) / max(n, 1) * 1e6)
    return best


def turns_per_s(tok: Any, episodes: int, where: str, rounds: int) -> float:
    """Best-of-``rounds`` turns/s of ``episodes`` concurrent Lookup episodes through the env manager."""
    state = tempfile.mkdtemp(prefix="rr-toolbench-", dir="/tmp")
    manager = None
    if where == "sandbox":
        from rockroll.sandbox.manager import SandboxManager

        manager = SandboxManager(
            backend="process", name=f"toolbench{os.getpid()}", state_dir=f"{state}/s", db_url=f"sqlite:///{state}/sb.db",
            max_sandboxes=8, idle_ttl_s=None,
        )  # fmt: skip
    source = SandboxSource(manager) if manager is not None else LocalSource()
    cfg = EpisodeConfig(max_turns=6, max_tokens_per_turn=64, step_timeout_s=120, episode_timeout_s=600)
    best = 0.0
    try:
        for r in range(rounds + 1):  # the first round warms up (sandbox starts)
            specs = [EpisodeSpec("Lookup-v0", s, group_id=f"g{s}", episode_id=f"r{r}/{s}") for s in range(episodes)]
            engine = ExpertToolEngine(tok, {sp.episode_id: sp.seed for sp in specs})
            env_manager = EnvManager(engine, source, cfg, threads=64)

            async def play(m: EnvManager = env_manager, todo: list[EpisodeSpec] = specs) -> list[Any]:
                return list(await asyncio.gather(*(m.run(sp) for sp in todo)))

            start = time.perf_counter()
            trajs = asyncio.run(play())
            wall = time.perf_counter() - start
            assert all(t.success for t in trajs), [t.failure for t in trajs if not t.success][:3]
            if r:
                best = max(best, sum(len(t.turns) for t in trajs) / wall)
            env_manager.reward_pool.shutdown()
            env_manager.open_executor.shutdown(wait=True)
            env_manager.executor.shutdown(wait=True)
        source.release_idle()
    finally:
        if manager is not None:
            manager.close()
        shutil.rmtree(state, ignore_errors=True)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tok = _tokenizer(Path(d) / "tiny")
        out: dict[str, Any] = {"episodes": args.episodes, "load_avg": os.getloadavg()[0]}
        for history in ("full", "last_k"):
            for kind in ("text", "tools"):
                us = builder_us_per_turn(kind, tok, args.episodes, history, args.rounds)
                out[f"builder_us_{kind}_{history}"] = round(us, 1)
                print(f"builder, {kind:5} path, history {history:6}: {us:8.1f} us/turn")
        for where in ("local", "sandbox"):
            rate = turns_per_s(tok, args.episodes, where, args.rounds)
            out[f"lookup_turns_per_s_{where}"] = round(rate, 1)
            print(f"Lookup-v0 turns/s through the env manager, envs {where:7}: {rate:8.1f}")
    print("RESULT " + json.dumps(out))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
