"""Env calls batched by the env manager play exactly like one call at a time.

Through process sandboxes a batch is one ``env.batch`` round trip per sandbox; in process, one
worker thread runs a batch's calls in turn. Checked: batched sandbox calls answer what single
calls answer; whole episodes played through sandboxes (batched) equal episodes played in process;
a hung or slow env holds up only itself; timeouts still fire (one periodic check instead of a
timer per call) and a cancellation stays a cancellation.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
import zlib
from typing import Any

import pytest

import rockroll.envhub as envhub
from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, LLMEngine
from rockroll.agentrl.faults.envs import register_fault_env
from rockroll.agentrl.models.char_tokenizer import CharTokenizer
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.deadlines import Deadlines
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.sources.kinds import LocalSource, SandboxSource
from rockroll.agentrl.trajectory import Trajectory

MOVES = ["Up", "Down", "Left", "Right"]


class ScriptedEngine(LLMEngine):
    """Answers a move that depends only on the prompt (so two rollouts of one episode agree)."""

    name = "scripted"

    def __init__(self) -> None:
        self.tokenizer = CharTokenizer()

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        await asyncio.sleep(0)
        move = MOVES[zlib.crc32(bytes(i % 256 for i in request.prompt_ids)) % 4]
        ids = self.tokenizer.encode(f"<answer>{move}</answer>") + [self.tokenizer.eos_token_id]
        return GenerationResult(ids, [0.0] * len(ids), "stop", self.weight_version)


@pytest.fixture
def sandbox_manager() -> Any:
    from rockroll.sandbox.manager import SandboxManager

    state = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    db = tempfile.mkdtemp(prefix="rr-db-")
    m = SandboxManager(
        backend="process", name=f"t{uuid.uuid4().hex[:8]}", state_dir=state, db_url=f"sqlite:///{db}/sb.db",
        max_sandboxes=3, idle_ttl_s=None,
    )  # fmt: skip
    yield m
    m.close()
    assert m.backend.list_managed(m.config.name) == [], "sandboxes leaked"
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(db, ignore_errors=True)


def test_batched_sandbox_calls_answer_like_single_calls(sandbox_manager: Any) -> None:
    source = SandboxSource(sandbox_manager)
    batched = [source.open("FrozenLake-v0", {"is_slippery": True}) for _ in range(20)]  # spread over sandboxes
    single = [source.open("FrozenLake-v0", {"is_slippery": True}) for _ in range(20)]
    try:
        assert len({source.batch_key(e) for e in batched}) > 1 and source.round_trip_batches
        got = source.call_batch([(e, "reset", i) for i, e in enumerate(batched)])
        assert got == [e.reset(seed=i) for i, e in enumerate(single)]
        for move in ["<answer>Down</answer>", "junk", "<answer>Right</answer>", "<answer>Up</answer>"]:
            live = [i for i, e in enumerate(single) if not e.get_state()["done"]]
            got = source.call_batch([(batched[i], "step", move) for i in live])
            assert got == [single[i].step(move) for i in live]
        # a session the server no longer has fails alone, typed
        batched[0].close()
        out = source.call_batch([(batched[0], "step", "x"), (batched[1], "step", "<answer>Up</answer>")])
        assert isinstance(out[0], Exception) and isinstance(out[1], tuple)
    finally:
        for e in batched + single:
            source.close(e)


async def _play(
    source: Any, seeds: list[int], config: EpisodeConfig, env_id: str = "FrozenLake-v0", **env_kwargs: Any
) -> Any:
    manager = EnvManager(ScriptedEngine(), source, config)
    try:
        specs = [EpisodeSpec(env_id, s, f"g{s}", f"g{s}/{i}", dict(env_kwargs)) for i, s in enumerate(seeds)]
        return list(await asyncio.gather(*(manager.run(s) for s in specs))), manager
    finally:
        assert await manager.drain(30)
        manager.shutdown()


def _summary(t: Trajectory) -> Any:
    return [(turn.prompt_ids, turn.response_ids, turn.observation, turn.reward) for turn in t.turns], t.success


def test_episodes_through_sandboxes_equal_episodes_in_process(sandbox_manager: Any) -> None:
    """Batched steps through sandboxes, and sessions reused by later episodes, play exactly like
    envs in process; kept sessions are closed at shutdown."""
    config = EpisodeConfig(max_turns=12, max_tokens_per_turn=32, history="last_k", history_k=1)
    seeds = [s // 2 for s in range(24)]  # pairs on one seed, as groups have
    local, _ = asyncio.run(_play(LocalSource(), seeds, config, is_slippery=True))
    source = SandboxSource(sandbox_manager)

    async def two_rounds() -> list[Trajectory]:
        manager = EnvManager(ScriptedEngine(), source, config)
        try:
            out = []
            for half in (seeds[:12], seeds[12:]):  # the second round gets the first round's sessions
                specs = [
                    EpisodeSpec("FrozenLake-v0", s, f"g{s}", f"g{s}/{i}", {"is_slippery": True})
                    for i, s in enumerate(half)
                ]
                out += await asyncio.gather(*(manager.run(sp) for sp in specs))
                assert await manager.drain(30)
            return out
        finally:
            manager.shutdown()

    remote = asyncio.run(two_rounds())
    assert [_summary(t) for t in remote] == [_summary(t) for t in local]
    assert all(t.failure is None and t.turns for t in remote)
    assert source.reused >= 12 and source.opened == 24 and source.open_count == 0
    assert sum(sb.health().sessions for sb in sandbox_manager.list()) == 0  # kept sessions closed at shutdown


def test_a_hung_env_holds_up_only_itself() -> None:
    register_fault_env("TestBatchHang-v0", mode="hang", hang_s=3.0, fault_seeds=[1], fault_at_step=2)
    config = EpisodeConfig(max_turns=6, max_tokens_per_turn=32, step_timeout_s=0.5, max_retries=0)
    source = LocalSource()
    started = time.monotonic()
    trajs, _ = asyncio.run(_play(source, [0, 1, 2, 3, 4, 5, 6, 7], config, "TestBatchHang-v0"))
    hung = [t for t in trajs if t.seed == 1]
    assert hung and all(t.masked and t.failure.stage == "env_step" for t in hung)
    others = [t for t in trajs if t.seed != 1]
    assert all(t.failure is None for t in others)
    assert max(t.wall_time_s for t in others) < 0.4  # not held up by the hung step (rescued by other threads)
    assert time.monotonic() - started < 5 and source.open_count == 0


def test_slow_envs_are_no_longer_batched() -> None:
    register_fault_env("TestBatchSlow-v0", step_latency={"kind": "constant", "median_s": 0.02})
    config = EpisodeConfig(max_turns=5, max_tokens_per_turn=32, max_invalid_actions=None)
    started = time.monotonic()
    trajs, manager = asyncio.run(_play(LocalSource(), list(range(16)), config, "TestBatchSlow-v0"))
    turns = max(len(t.turns) for t in trajs)
    assert manager._calls.cost["TestBatchSlow-v0"] > manager._calls.slow_s
    # 16 episodes x 20 ms per step, stepped in parallel (not one after another: 16 x 20 ms per turn)
    assert time.monotonic() - started < turns * 16 * 0.02 * 0.6


def test_deadlines_time_out_and_let_cancellation_through() -> None:
    deadlines = Deadlines()

    async def wait(timeout_s: float, sleep_s: float) -> str:
        with deadlines.within(timeout_s):
            await asyncio.sleep(sleep_s)
        return "done"

    async def run() -> None:
        t = time.monotonic()
        with pytest.raises(TimeoutError):
            await wait(0.05, 5.0)
        assert time.monotonic() - t < 0.05 + 3 * Deadlines.TICK_S + 0.1
        assert await wait(5.0, 0.01) == "done"
        many = await asyncio.gather(*(wait(0.1 if i % 2 else 5.0, 0.3) for i in range(20)), return_exceptions=True)
        assert [isinstance(r, TimeoutError) for r in many] == [bool(i % 2) for i in range(20)]
        task = asyncio.create_task(wait(5.0, 5.0))
        await asyncio.sleep(0.02)
        task.cancel()  # a straggler cancelled by the scheduler: not a timeout
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not deadlines._calls

    asyncio.run(run())


def test_env_call_batches_run_the_env_calls_given() -> None:
    """The default call_batch: answers in order, an exception in place of a failed call."""
    source = LocalSource()
    a, b = envhub.make("FrozenLake-v0"), envhub.make("Sokoban-v0")
    out = source.call_batch([(a, "reset", 3), (b, "step", "<answer>Up</answer>"), (a, "step", "<answer>Down</answer>")])
    ref = envhub.make("FrozenLake-v0")
    assert out[0] == ref.reset(seed=3) and out[2] == ref.step("<answer>Down</answer>")
    assert isinstance(out[1], Exception)  # stepped before reset
