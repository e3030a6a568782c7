"""Env managers play tool envs: calls parsed from the sampled tokens, results as tool messages masked from the loss.

The engine is :class:`ExpertToolEngine` (the Lookup expert's calls written in a parser's style), so every episode
must succeed; the token checks are exact: each full-history prompt extends the previous prompt and response token
for token, the concat sample's mask covers exactly the sampled tokens, and the tool results sit in the prompts.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import uuid
from typing import Any

import pytest

from bench.tools.expert_engine import ExpertToolEngine
from rockroll.agentrl.models.char_tokenizer import CharTokenizer
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.rollout.lockstep import make_env_manager
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.agentrl.trajectory import Trajectory

STYLES = ["hermes", "llama3_json", "mistral"]


def _play(engine_of: Any, cfg: EpisodeConfig, seeds: list[int], source: Any = None) -> list[Trajectory]:
    specs = [EpisodeSpec("Lookup-v0", s, group_id=f"g{s}", episode_id=f"g{s}/0") for s in seeds]
    engine = engine_of({sp.episode_id: sp.seed for sp in specs})
    manager = make_env_manager(engine, source or LocalSource(), cfg)

    async def run() -> list[Trajectory]:
        return list(await asyncio.gather(*(manager.run(sp) for sp in specs)))

    try:
        return asyncio.run(run())
    finally:
        manager.shutdown()


def check_tokens(traj: Trajectory, tok: Any) -> None:
    """Prompts extend each other; the mask covers the sampled tokens only; results are prompt tokens."""
    turns = traj.turns
    for a, b in zip(turns, turns[1:], strict=False):
        assert b.prompt_ids[: len(a.prompt_ids) + len(a.response_ids)] == a.prompt_ids + a.response_ids
    (sample,) = traj.to_samples("concat")
    assert sample.input_ids == turns[-1].prompt_ids + turns[-1].response_ids
    masked = [i for i, m in zip(sample.input_ids, sample.response_mask, strict=True) if m]
    assert masked == [i for t in turns for i in t.response_ids]
    prompt_text = tok.decode(turns[-1].prompt_ids)
    for t in turns[:-1]:  # each result, as is or JSON-escaped (mistral writes results inside JSON)
        results = [line.split("] ", 1)[-1] for line in t.observation.splitlines()]
        assert results and all(r in prompt_text or json.dumps(r)[1:-1] in prompt_text for r in results)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("lockstep", [False, True])
def test_expert_calls_solve_lookup_in_every_style(style: str, lockstep: bool) -> None:
    tok = CharTokenizer()
    cfg = EpisodeConfig(max_turns=6, max_tokens_per_turn=200, tool_call_parser=style, lockstep=lockstep)
    trajs = _play(lambda seeds: ExpertToolEngine(tok, seeds, style=style), cfg, list(range(6)))
    for traj in trajs:
        assert traj.failure is None and traj.success and traj.final_reward == 1.0, traj.last_info
        assert all(t.tools is not None and t.tools["tool_calls"] == 1 for t in traj.turns)
        assert sum(t.tools["malformed_calls"] + t.tools["unknown_tools"] for t in traj.turns) == 0  # type: ignore[index]
        check_tokens(traj, tok)
    assert len({len(t.turns) for t in trajs}) > 1  # several difficulties: 3 to 5 turns


def test_bad_calls_are_the_agents_mistakes_and_the_episode_goes_on() -> None:
    tok = CharTokenizer()
    bad = {
        0: '<tool_call>\n{"name": "find", "arguments": {"name": "Ann"</tool_call>',  # JSON never closed
        1: '<tool_call>\n{"name": "lookup", "arguments": {"id": "p1"}}\n</tool_call>',  # no such tool
        2: '<tool_call>\n{"name": "get", "arguments": {"key": "p1"}}\n</tool_call>',  # fails the schema
    }
    cfg = EpisodeConfig(max_turns=9, max_tokens_per_turn=200)
    (traj,) = _play(lambda seeds: ExpertToolEngine(tok, seeds, bad_turns=bad), cfg, [3])
    first, second, third = traj.turns[:3]
    assert first.tools == {**first.tools, "malformed_calls": 1, "tool_calls": 0}  # type: ignore[dict-item]
    assert "malformed tool call" in first.observation and "not valid JSON" in first.observation
    assert not first.action_is_valid and first.reward < 0  # the format penalty, the episode goes on
    assert second.tools["unknown_tools"] == 1 and "unknown tool 'lookup'" in second.observation  # type: ignore[index]
    assert third.tools["bad_arguments"] == 1 and "fail its schema" in third.observation  # type: ignore[index]
    assert traj.success and traj.failure is None  # the expert's turns after the mistakes still solve it
    check_tokens(traj, tok)


def test_last_k_history_renders_calls_and_results() -> None:
    tok = CharTokenizer()
    cfg = EpisodeConfig(max_turns=6, max_tokens_per_turn=200, history="last_k", history_k=1)
    trajs = _play(lambda seeds: ExpertToolEngine(tok, seeds), cfg, [0, 1, 2])
    for traj in trajs:
        assert traj.success
        last = tok.decode(traj.turns[-1].prompt_ids)
        assert "<tool_call>" in last and "<tool_response>" in last  # the kept exchange, written the model's way
        assert traj.turns[0].observation.split("] ", 1)[-1] not in last or len(traj.turns) <= 2


def test_sandbox_sessions_play_tool_episodes() -> None:
    from rockroll.agentrl.sources.kinds import SandboxSource
    from rockroll.sandbox.manager import SandboxManager

    state = tempfile.mkdtemp(prefix="rr-", dir="/tmp")  # short: a sandbox's Unix socket path holds 107 bytes
    manager = SandboxManager(
        backend="process", name=f"tooltest{uuid.uuid4().hex[:8]}", state_dir=f"{state}/s",
        db_url=f"sqlite:///{state}/sb.db", max_sandboxes=2, idle_ttl_s=None,
    )  # fmt: skip
    try:
        tok = CharTokenizer()
        cfg = EpisodeConfig(max_turns=6, max_tokens_per_turn=200, step_timeout_s=60)
        trajs = _play(lambda seeds: ExpertToolEngine(tok, seeds), cfg, [0, 1, 2, 3], SandboxSource(manager))
        assert all(t.success and t.failure is None for t in trajs), [(t.failure, t.last_info) for t in trajs]
        for traj in trajs:
            check_tokens(traj, tok)
    finally:
        manager.close()
        shutil.rmtree(state, ignore_errors=True)


def test_text_envs_play_as_before() -> None:
    from rockroll.agentrl.engines.random_engine import RandomEngine

    engine = RandomEngine(CharTokenizer(), seed=0)
    manager = EnvManager(engine, LocalSource(), EpisodeConfig(max_turns=3, max_tokens_per_turn=16))
    traj = asyncio.run(manager.run(EpisodeSpec("FrozenLake-v0", 0)))
    manager.shutdown()
    assert traj.turns and all(t.tools is None for t in traj.turns)


@pytest.mark.parametrize("history", ["full", "last_k"])
def test_warm_start_demos_are_the_rollouts_own_prompts(history: str) -> None:
    """The expert's demos are rendered as the rollout renders the policy's turns (tools in the prompt, results
    as tool messages): what the warm start teaches is what the policy will see."""
    from rockroll.trainer.learner.sft import expert_trajectory

    tok = CharTokenizer()
    cfg = EpisodeConfig(max_turns=6, max_tokens_per_turn=200, history=history, history_k=1)  # type: ignore[arg-type]
    seeds = [0, 4, 7]
    played = _play(lambda s: ExpertToolEngine(tok, s), cfg, seeds)
    for seed, traj in zip(seeds, played, strict=True):
        demo = expert_trajectory("Lookup-v0", {}, tok, cfg, seed)
        assert demo.success and len(demo.turns) == len(traj.turns)
        for d, p in zip(demo.turns, traj.turns, strict=True):
            assert d.prompt_ids == p.prompt_ids and d.response_ids == p.response_ids
