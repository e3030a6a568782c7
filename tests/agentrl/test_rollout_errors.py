"""The rollout error model and redundancy, with envs that hang or die on purpose.

Infra failures (an env that raises, hangs past its timeout, kills its sandbox; an engine error)
are retried or masked and counted, never scored and never a crash of the batch; the batch still
delivers the requested groups, and no env or sandbox is leaked. Config errors are raised at once.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
import uuid
from typing import Any

import pytest

import rockroll.agentrl.rollout.scheduler as scheduler_module
from rockroll.agentrl.engines.base import EngineError, GenerationRequest, GenerationResult
from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.errors import FatalRolloutError, classify
from rockroll.agentrl.faults.envs import register_fault_env
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.rollout.lockstep import LockstepEnvManager
from rockroll.agentrl.rollout.scheduler import RolloutBatch, RolloutScheduler
from rockroll.agentrl.sources.kinds import LocalSource, SandboxSource

FAST = EpisodeConfig(max_turns=5, max_tokens_per_turn=32, step_timeout_s=0.5, start_timeout_s=5, max_retries=1)


@pytest.fixture(autouse=True, params=["episode", "lockstep"])
def turn_batching(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with each episode at its own pace and with lock-step turns."""
    if request.param == "lockstep":

        def lockstep(engine: Any, source: Any, config: Any = None, **kwargs: Any) -> Any:
            return LockstepEnvManager(engine, source, config, **kwargs)

        monkeypatch.setattr(scheduler_module, "make_env_manager", lockstep)
    return request.param


def _run(engine: Any, source: Any, config: SchedulerConfig) -> RolloutBatch:
    async def go() -> RolloutBatch:
        scheduler = RolloutScheduler(engine, source, config)
        try:
            return await scheduler.run_batch()
        finally:
            assert await scheduler.close(30), "envs were not given back"

    return asyncio.run(go())


def _check_batch(batch: RolloutBatch, config: SchedulerConfig) -> None:
    assert len(batch.groups) == config.num_env_groups
    for group in batch.groups:
        assert len(group) == config.group_size and len({t.seed for t in group}) == 1
        assert all(not t.masked for t in group)
    assert all(t.masked and t.failure.kind == "infra" for t in batch.masked)


def test_batch_completes_despite_envs_that_raise_and_hang() -> None:
    register_fault_env("TestRaise-v0", mode="raise", fault_every=2, fault_at_step=2)
    register_fault_env("TestHang-v0", mode="hang", fault_every=3, hang_s=1.5, fault_at_step=1)
    source = LocalSource()
    config = SchedulerConfig(
        env_ids=["TestRaise-v0", "TestHang-v0"], num_env_groups=4, group_size=3, group_size_redundancy=2,
        extra_groups=1, episode=FAST,
    )  # fmt: skip
    batch = _run(RandomEngine(seed=1), source, config)
    _check_batch(batch, config)
    m = batch.metrics
    assert m.get("rollout/infra_failures/env_step", 0) > 0, m
    assert m["rollout/episodes_cancelled"] > 0  # stragglers were cancelled
    assert source.open_count == 0


def test_failed_group_is_replaced_and_masked_episodes_are_not_scored() -> None:
    register_fault_env("TestAlwaysRaise-v0", mode="raise", fault_prob=1.0, fault_at_step=1)
    source = LocalSource()
    config = SchedulerConfig(
        env_ids=["FrozenLake-v0", "TestAlwaysRaise-v0"], num_env_groups=2, group_size=2, episode=FAST
    )
    batch = _run(RandomEngine(seed=2), source, config)
    _check_batch(batch, config)
    assert batch.metrics["rollout/groups_failed"] >= 1
    assert all(t.env_id == "FrozenLake-v0" for t in batch.trajectories)
    for t in batch.masked:
        assert t.env_id == "TestAlwaysRaise-v0"
        assert (t.failure.stage, t.failure.error) == ("env_step", "InjectedFault")
        assert t.failure.retries == FAST.max_retries
    assert batch.metrics["rollout/infra_failures/env_step"] >= len(batch.masked) > 0
    assert source.open_count == 0


def test_episode_deadline_includes_retries_and_masks() -> None:
    register_fault_env("TestAlwaysHang-v0", mode="hang", fault_prob=1.0, hang_s=1.0, fault_at_step=1)
    episode = EpisodeConfig(max_turns=3, step_timeout_s=0.3, episode_timeout_s=0.5, max_retries=5)
    config = SchedulerConfig(
        env_ids=["TestAlwaysHang-v0"], num_env_groups=1, group_size=2, max_group_launches=1, episode=episode
    )
    source = LocalSource()
    started = time.monotonic()
    batch = _run(RandomEngine(seed=0), source, config)
    assert time.monotonic() - started < 5
    assert batch.groups == [] and batch.metrics["rollout/groups_short"] == 1
    # the first masked episode dooms the group (no redundancy): its sibling is cancelled
    assert len(batch.masked) + batch.metrics["rollout/episodes_cancelled"] == 2
    assert batch.masked and all(t.failure.stage == "env_step" for t in batch.masked)
    assert all(t.wall_time_s < 0.5 + 0.2 for t in batch.masked)
    assert all(t.failure.retries < episode.max_retries for t in batch.masked)  # the deadline stopped retries
    assert source.open_count == 0


class FlakyEngine(RandomEngine):
    """Fails every third request with an engine error."""

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if self.requests % 3 == 2:
            self.requests += 1
            raise EngineError("server returned 503")
        return await super().generate(request)


def test_generation_errors_are_infra_and_retried() -> None:
    config = SchedulerConfig(
        env_ids=["FrozenLake-v0"],
        num_env_groups=2,
        group_size=2,
        group_size_redundancy=2,
        episode=EpisodeConfig(max_turns=4, max_retries=3),
    )
    batch = _run(FlakyEngine(seed=3), LocalSource(), config)
    _check_batch(batch, config)
    assert batch.metrics["rollout/infra_failures/generation"] > 0


def test_config_errors_are_raised_not_retried() -> None:
    source = LocalSource()
    config = SchedulerConfig(env_ids=["FrozenLak-v0"], num_env_groups=1, group_size=2, episode=FAST)
    with pytest.raises(FatalRolloutError, match="Did you mean"):
        _run(RandomEngine(), source, config)
    assert source.open_count == 0
    from rockroll.envhub.errors import UnknownEnvError

    assert classify(UnknownEnvError("x", [])) == "fatal" and classify(TimeoutError()) == "infra"
    from rockroll.client.sdk import ApiClientError, SandboxLostError
    from rockroll.sandbox.errors import SandboxLost

    assert classify(SandboxLost("sb-1")) == "infra"
    assert classify(SandboxLostError(410, "sandbox_lost", "gone")) == "infra"
    assert classify(ApiClientError(503, "sandbox_error", "down")) == "infra"
    assert classify(ApiClientError(429, "capacity", "full")) == "infra"
    assert classify(ApiClientError(404, "env_not_found", "no such env")) == "fatal"
    assert classify(ApiClientError(404, "session_not_found", "closed by a replica's reconciliation")) == "infra"


def test_running_out_of_context_is_an_agent_failure() -> None:
    episode = EpisodeConfig(max_turns=20, max_tokens_per_turn=32, max_context_tokens=700)
    config = SchedulerConfig(env_ids=["FrozenLake-v0"], num_env_groups=1, group_size=2, episode=episode)
    batch = _run(RandomEngine(invalid_prob=1.0), LocalSource(), config)
    assert len(batch.groups) == 1
    for t in batch.trajectories:
        assert t.failure is not None and (t.failure.kind, t.failure.error) == ("agent", "ContextExceeded")
        assert not t.masked and t.truncated
        assert len(t.to_samples("concat")[0].input_ids) <= 700


# ------------------------------------------------------------------ sandboxes
@pytest.fixture
def fault_manager() -> Any:
    """A process-backend manager whose sandbox servers register the fault envs at start-up."""
    from rockroll.sandbox.base import SandboxSpec
    from rockroll.sandbox.manager import SandboxManager

    fault_envs = {
        # every 2nd episode a sandbox server starts dies or hangs (9+ episodes on <= 6 sandboxes)
        "TestSbExit-v0": {"mode": "exit", "fault_every": 2, "fault_at_step": 2},
        "TestSbHang-v0": {"mode": "hang", "fault_every": 2, "hang_s": 2.0, "fault_at_step": 1},
    }
    env = (
        ("ROCKROLL_ENV_MODULES", "rockroll.agentrl.faults.sandbox_envs"),
        ("ROCKROLL_FAULT_ENVS", json.dumps(fault_envs)),
    )
    state = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    db = tempfile.mkdtemp(prefix="rr-db-")
    m = SandboxManager(
        backend="process",
        name=f"t{uuid.uuid4().hex[:8]}",
        state_dir=state,
        db_url=f"sqlite:///{db}/sb.db",
        monitor_interval_s=0.1,
        default_spec=SandboxSpec(max_sessions=8, env=env),
        max_sandboxes=6,
    )
    yield m
    m.close()
    assert m.backend.list_managed(m.config.name) == [], "sandboxes leaked"
    for d in (state, db):
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.slow
def test_sandbox_deaths_and_hangs_are_retried_on_fresh_sandboxes(fault_manager: Any) -> None:
    source = SandboxSource(fault_manager)
    episode = EpisodeConfig(max_turns=4, step_timeout_s=1.0, start_timeout_s=30, episode_timeout_s=60, max_retries=6)
    # no redundancy: every faulty episode has to be retried for its group to complete
    config = SchedulerConfig(
        env_ids=["TestSbExit-v0", "TestSbHang-v0"],
        num_env_groups=3,
        group_size=3,
        max_group_launches=6,
        episode=episode,
        seed=7,
    )
    batch = _run(RandomEngine(seed=4), source, config)
    _check_batch(batch, config)
    m = batch.metrics
    assert m.get("rollout/infra_failures/env_step", 0) + m.get("rollout/infra_failures/env_reset", 0) > 0, m
    assert any(t.infra_retries > 0 for t in batch.trajectories)
    assert source.open_count == 0
    # no session left open in any sandbox (the servers' own count)
    assert fault_manager.wait_until(lambda: _open_sessions(fault_manager) == 0, 10)


def _open_sessions(manager: Any) -> int:
    """Sessions the sandbox servers host (-1 while one cannot answer, e.g. restarting)."""
    try:
        return sum(sb.health().sessions for sb in manager.list())
    except Exception:  # noqa: BLE001
        return -1
