"""Env managers end to end: a tiny local model (and the random engine) plays FrozenLake and Sokoban
in-process, through a SandboxManager session (process backend) and through the API's RemoteEnv.

Every trajectory is checked token by token: each prompt decodes to the chat template's rendering
of the conversation the env produced, each response decodes to the action the env received, and
the response mask of the training rows covers exactly the model's tokens.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from typing import Any

import pytest

import rockroll.envhub as envhub
from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.rollout.scheduler import RolloutScheduler
from rockroll.agentrl.sources.kinds import EnvSource, LocalSource, SandboxSource
from rockroll.agentrl.sources.remote import RemoteSource
from rockroll.agentrl.trajectory import Trajectory

ENVS = ["FrozenLake-v0", "Sokoban-v0"]
EPISODE = EpisodeConfig(max_turns=4, max_tokens_per_turn=12, step_timeout_s=60, max_retries=1)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    out = tmp_path_factory.mktemp("tiny")
    return str(build_tiny_model(out, TinyModelConfig(episodes_per_env=3)))


@pytest.fixture(scope="module")
def hf_engine(tiny_model: str) -> Any:
    from rockroll.agentrl.engines.hf import HFEngine

    engine = HFEngine(tiny_model, max_batch_size=16, num_threads=1, seed=0)
    yield engine
    asyncio.run(engine.close())


@pytest.fixture(scope="module")
def random_engine(tiny_model: str) -> RandomEngine:
    from rockroll.agentrl.models.tiny import load_tokenizer

    return RandomEngine(load_tokenizer(tiny_model), invalid_prob=0.2, seed=0)


def check_trajectory(traj: Trajectory, tokenizer: Any, history: str = "full") -> None:
    """The token ids say exactly what the env saw and did; masks cover only model tokens."""
    assert traj.failure is None and traj.turns
    reference = envhub.make(traj.env_id)
    first_obs, _ = reference.reset(seed=traj.seed)
    messages = [{"role": "system", "content": reference.system_prompt()}, {"role": "user", "content": first_obs}]
    for i, turn in enumerate(traj.turns):
        if history == "full":
            rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            assert tokenizer.decode(turn.prompt_ids) == rendered
        assert turn.action_text == tokenizer.decode(turn.response_ids, skip_special_tokens=True)
        # replaying the actions on a local env gives the observations the trajectory recorded
        obs, reward, *_ = reference.step(turn.action_text)
        assert obs == turn.observation and reward == pytest.approx(turn.reward)
        # the model's own tokens stay in the context as it produced them (special tokens included)
        ids = turn.response_ids
        raw = ids[:-1] if ids and turn.finish_reason == "stop" else ids
        messages += [{"role": "assistant", "content": tokenizer.decode(raw)}, {"role": "user", "content": obs}]
        if i + 1 < len(traj.turns):
            assert tokenizer.decode(traj.turns[i + 1].prompt_ids).endswith(
                f"<|im_start|>user\n{obs}<|im_end|>\n<|im_start|>assistant\n"
            )
    layouts = ["concat", "per_turn"] if history == "full" else ["per_turn"]
    for layout in layouts:
        rows = traj.to_samples(layout)
        model_tokens = [t for turn in traj.turns for t in turn.response_ids]
        masked_tokens = [tok for row in rows for tok, m in zip(row.input_ids, row.response_mask, strict=True) if m]
        assert masked_tokens == model_tokens
        assert all(len(r.input_ids) == len(r.response_mask) == len(r.old_logprobs) for r in rows)
        assert all(lp == 0.0 for r in rows for lp, m in zip(r.old_logprobs, r.response_mask, strict=True) if not m)


async def _play(engine: Any, source: EnvSource, seeds: list[int], history: str = "full") -> list[Trajectory]:
    config = EpisodeConfig(**{**EPISODE.__dict__, "history": history})
    manager = EnvManager(engine, source, config)
    try:
        specs = [EpisodeSpec(env, seed, f"g{seed}", f"g{seed}/{env}") for env in ENVS for seed in seeds]
        return list(await asyncio.gather(*(manager.run(s) for s in specs)))
    finally:
        assert await manager.drain(30)
        manager.shutdown()


@pytest.mark.parametrize("history", ["full", "last_k"])
def test_random_engine_plays_in_process(random_engine: RandomEngine, history: str) -> None:
    source = LocalSource()
    trajs = asyncio.run(_play(random_engine, source, [1, 2, 3], history))
    for t in trajs:
        check_trajectory(t, random_engine.tokenizer, history)
    assert source.open_count == 0 and source.opened == len(trajs)


def test_tiny_model_plays_in_process(hf_engine: Any) -> None:
    source = LocalSource()
    trajs = asyncio.run(_play(hf_engine, source, [5, 6]))
    for t in trajs:
        check_trajectory(t, hf_engine.tokenizer)
        assert all(len(turn.response_ids) <= EPISODE.max_tokens_per_turn for turn in t.turns)
    assert source.open_count == 0


@pytest.fixture
def sandbox_manager() -> Any:
    from rockroll.sandbox.manager import SandboxManager

    state = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    db = tempfile.mkdtemp(prefix="rr-db-")
    m = SandboxManager(
        backend="process", name=f"t{uuid.uuid4().hex[:8]}", state_dir=state, db_url=f"sqlite:///{db}/sb.db",
        monitor_interval_s=0.1,
    )  # fmt: skip
    yield m
    m.close()
    assert m.backend.list_managed(m.config.name) == [], "sandboxes leaked"
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(db, ignore_errors=True)


def test_tiny_model_plays_through_sandbox_sessions(hf_engine: Any, sandbox_manager: Any) -> None:
    source = SandboxSource(sandbox_manager)
    config = SchedulerConfig(env_ids=ENVS, num_env_groups=2, group_size=2, group_size_redundancy=1, episode=EPISODE)

    async def run() -> Any:
        scheduler = RolloutScheduler(hf_engine, source, config)
        batch = await scheduler.run_batch()
        assert await scheduler.close(30)
        # cancelled stragglers' requests may still be decoding: let them end before this loop closes
        await asyncio.sleep(1.0)
        return batch

    batch = asyncio.run(run())
    assert len(batch.groups) == 2 and all(len(g) == 2 for g in batch.groups)
    for group in batch.groups:
        assert len({t.seed for t in group}) == 1
        for t in group:
            check_trajectory(t, hf_engine.tokenizer)
    assert source.open_count == 0
    assert sum(sb.health().sessions for sb in sandbox_manager.list()) == 0  # the servers host no session


def test_tiny_model_plays_through_remote_env(hf_engine: Any) -> None:
    from rockroll.api.server.serve_proc import ServerProc, scratch_dir
    from rockroll.client.sdk import Client

    proc = ServerProc(scratch_dir("rollout"), dev=True)
    try:
        url = proc.start()
        with Client(url, None) as client:
            source = RemoteSource(client)
            trajs = asyncio.run(_play(hf_engine, source, [1, 2]))
            for t in trajs:
                check_trajectory(t, hf_engine.tokenizer)
            assert source.open_count == 0
            assert client.list_sessions() == []  # every session was closed
    finally:
        proc.cleanup()


# --------------------------------------------------------------------------- Docker
from tests.sandbox.conftest import docker_image, make_manager, state_dir  # noqa: E402,F401 - fixtures


@pytest.mark.docker
def test_random_engine_plays_through_docker_sandboxes_and_survives_a_killed_container(  # noqa: F811
    make_manager: Any,  # noqa: F811
    docker_image: str,  # noqa: F811
    random_engine: RandomEngine,
) -> None:
    import threading

    import docker

    from rockroll.agentrl.faults.latency import Latency
    from rockroll.sandbox.base import SandboxSpec

    manager = make_manager(backend="docker", default_spec=SandboxSpec(image=docker_image, max_sessions=4))
    source = SandboxSource(manager)
    # 0.5 s per turn: an episode that asked the engine for its first action has reset its env and
    # plays ~3 s more, so killing the containers holding sessions at that moment fails a step of it,
    # a retried infra failure (a kill timed by the clock could land during env.make under load, which
    # the manager absorbs by opening the session elsewhere: nothing to retry)
    engine = RandomEngine(random_engine.tokenizer, latency=Latency("constant", 0.5), seed=1)
    config = SchedulerConfig(env_ids=["Sokoban-v0", "FrozenLake-v0"], num_env_groups=2, group_size=2,
                           episode=EpisodeConfig(max_turns=6, max_retries=3))  # fmt: skip
    killed: list[str] = []

    def kill_one_container() -> None:
        if manager.wait_until(lambda: engine.requests > 0, 120):
            client = docker.from_env()
            for sb in [sb for sb in manager.list() if sb.sessions > 0]:
                client.containers.get(sb.handle.ref).kill()
                killed.append(sb.id)

    killer = threading.Thread(target=kill_one_container, daemon=True)
    killer.start()

    async def run() -> Any:
        scheduler = RolloutScheduler(engine, source, config)
        batch = await scheduler.run_batch()
        assert await scheduler.close(30)
        return batch

    batch = asyncio.run(run())
    killer.join(10)
    assert killed, "no container was killed"
    assert len(batch.groups) == 2
    for group in batch.groups:
        for t in group:
            check_trajectory(t, engine.tokenizer)
    assert batch.metrics["rollout/infra_retries"] > 0
    assert source.open_count == 0


@pytest.mark.docker
def test_tiny_model_plays_through_docker_sandboxes(  # noqa: F811
    make_manager: Any,  # noqa: F811
    docker_image: str,  # noqa: F811
    hf_engine: Any,
) -> None:
    from rockroll.sandbox.base import SandboxSpec

    manager = make_manager(backend="docker", default_spec=SandboxSpec(image=docker_image, max_sessions=4))
    source = SandboxSource(manager)
    trajs = asyncio.run(_play(hf_engine, source, [3]))
    assert {t.env_id for t in trajs} == set(ENVS)
    for t in trajs:
        check_trajectory(t, hf_engine.tokenizer)
    assert source.open_count == 0
