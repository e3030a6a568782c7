"""The rollout's machinery reaches the trainer: the scheduler's settings (redundancy, deadlines,
retries) come from ``rollout:``, several envs mix by ratio with metrics, evaluation and warm start
per env, and plan mode has the multi-turn error model (infra failures retried, then masked, never
scored, never a crash of the run)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import rockroll.envhub as envhub
from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.faults.envs import register_fault_env
from rockroll.agentrl.rollout.config import SchedulerConfig
from rockroll.agentrl.rollout.scheduler import RolloutScheduler, ratio_slots
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.envs.experts import expert_for
from rockroll.trainer.config_io import config_from_dict, config_to_dict
from rockroll.trainer.rollout.multiturn import scheduler_config

MIX = [
    {"env_id": "FrozenLake-v0", "env_kwargs": {"is_slippery": False}, "ratio": 2, "tag": "frozenlake"},
    {"env_id": "Sokoban-v0", "env_kwargs": {"dim_room": [5, 5], "num_boxes": 1}, "ratio": 1, "tag": "sokoban"},
]


def _mixed(**rollout: Any) -> Any:
    return config_from_dict({"rollout": {"envs": MIX, **rollout}, "sft": {"steps": 0}})


# ------------------------------------------------------------------ config mapping
@pytest.mark.parametrize(
    ("given", "history", "history_k", "lockstep"),
    [("auto", "last_k", 0, True), ("auto", "last_k", 2, False), ("auto", "full", 0, False),
     (True, "last_k", 2, True), (False, "last_k", 0, False)],
)  # fmt: skip
def test_lockstep_auto_picks_rounds_for_a_window_of_zero(
    given: Any, history: str, history_k: int, lockstep: bool
) -> None:
    cfg = config_from_dict({"rollout": {"episode": {"lockstep": given, "history": history, "history_k": history_k}}})
    assert cfg.rollout.episode.lockstep is lockstep
    assert config_from_dict(config_to_dict(cfg)) == cfg  # saved resolved, loads back equal
    with pytest.raises(ValueError, match="rollout.episode.lockstep"):
        config_from_dict({"rollout": {"episode": {"lockstep": "rounds"}}})


def test_rollout_settings_reach_scheduler_and_episode_configs() -> None:
    cfg = config_from_dict({
        "seed": 3,
        "rollout": {"train_seeds": 100,
                    "episode": {"episode_timeout_s": 90, "start_timeout_s": 20, "step_timeout_s": 5,
                                "generation_timeout_s": 30, "max_retries": 4},
                    "scheduler": {"group_size": 4, "num_env_groups": 6, "group_size_redundancy": 2, "extra_groups": 1,
                                  "max_concurrent_episodes": 12}},
    })  # fmt: skip
    sched = scheduler_config(cfg)
    assert (sched.num_env_groups, sched.group_size, sched.group_size_redundancy, sched.extra_groups) == (6, 4, 2, 1)
    assert (sched.max_concurrent_episodes, sched.seed, sched.max_env_seed) == (12, 3, 100)
    ep = sched.episode
    assert (ep.episode_timeout_s, ep.start_timeout_s, ep.step_timeout_s, ep.generation_timeout_s) == (90, 20, 5, 30)
    assert ep.max_retries == 4 and cfg.rollout.episode == ep
    assert sched.env_ids == ["FrozenLake-v0"] and sched.env_tags == ["FrozenLake"] and not sched.env_ratios

    default = config_from_dict({})
    d = default.rollout.episode
    assert d.episode_timeout_s == 240  # a training deadline, not the scheduler's generic 600 s
    # the other settings default to the scheduler's own
    base = SchedulerConfig()
    assert (d.start_timeout_s, d.step_timeout_s, d.generation_timeout_s, d.max_retries) == (
        base.episode.start_timeout_s, base.episode.step_timeout_s, base.episode.generation_timeout_s,
        base.episode.max_retries,
    )  # fmt: skip
    s = scheduler_config(default)
    assert (s.group_size_redundancy, s.extra_groups, s.max_concurrent_episodes) == (
        base.group_size_redundancy, base.extra_groups, base.max_concurrent_episodes,
    )  # fmt: skip


def test_a_mix_maps_onto_the_scheduler_and_reads_back_equal() -> None:
    cfg = _mixed(mode="multiturn")
    sched = scheduler_config(cfg)
    assert sched.env_ids == ["FrozenLake-v0", "Sokoban-v0"] and sched.env_ratios == [2, 1]
    assert sched.env_tags == ["frozenlake", "sokoban"]
    assert sched.kwargs(1) == {"dim_room": [5, 5], "num_boxes": 1} and sched.kwargs(0) == {"is_slippery": False}
    assert config_from_dict(config_to_dict(cfg)) == cfg  # a saved run config (every key) loads again
    untagged = config_from_dict({"rollout": {"envs": [{"env_id": "FrozenLake-v0"}, {"env_id": "Sokoban-v0"}]}})
    assert [e.tag for e in untagged.rollout.envs] == ["FrozenLake", "Sokoban"]


@pytest.mark.parametrize(
    ("rollout", "says"),
    [
        ({"mode": "plan", "envs": MIX}, "rollout.mode: multiturn"),
        ({"env_id": "Sokoban-v0", "envs": MIX}, "set one of them"),
        ({"envs": [{"env_id": "FrozenLake-v0"}, {"env_id": "FrozenLake-v0", "env_kwargs": {"size": 6}}]}, "own tag"),
        ({"envs": [{**MIX[0], "tag": "a/b"}]}, "'/'"),
        ({"envs": [{**MIX[0], "ratio": 0}]}, "ratio"),
    ],
)
def test_a_bad_mix_is_refused_with_what_to_change(rollout: dict, says: str) -> None:
    with pytest.raises(ValueError, match=None) as e:
        config_from_dict({"rollout": rollout})
    assert says in str(e.value), str(e.value)


def test_a_mix_needs_an_expert_for_every_env_to_warm_start() -> None:
    envhub.register("TestNoExpert-v0", "rockroll.envs.frozenlake:FrozenLakeEnv", override=True)  # no expert named
    with pytest.raises(ValueError, match="expert for TestNoExpert-v0"):
        config_from_dict({"rollout": {"envs": [MIX[0], {"env_id": "TestNoExpert-v0"}]}, "sft": {"steps": 5}})
    # a fault-injection wrapper plays the wrapped game: its spec names the wrapped env's expert
    register_fault_env("TestSlowSokoban-v0", inner="Sokoban-v0", step_latency={"kind": "constant", "median_s": 0.0})
    cfg = config_from_dict({"rollout": {"envs": [MIX[0], {"env_id": "TestSlowSokoban-v0"}]}, "sft": {"steps": 5}})
    assert cfg.sft.steps == 5
    assert envhub.spec("TestSlowSokoban-v0").expert == envhub.spec("Sokoban-v0").expert
    env = envhub.make("TestSlowSokoban-v0")
    env.reset(seed=3)
    assert expert_for(env)() in ("Up", "Down", "Left", "Right")


# ------------------------------------------------------------------ ratio mixing
def test_ratio_slots_keep_every_env_within_one_group_of_its_share() -> None:
    slots = ratio_slots([2, 1], 0, 300)
    for m in range(1, 301):
        assert abs(slots[:m].count(0) - 2 * m / 3) < 1
    assert Counter(ratio_slots([2, 1], 0, 12)) == {0: 8, 1: 4}
    assert ratio_slots([3, 2, 1], 40, 20) == ratio_slots([3, 2, 1], 0, 60)[40:]  # a batch's slots: its index only


def _batches(config: SchedulerConfig, n: int) -> list[Any]:
    async def go() -> list[Any]:
        scheduler = RolloutScheduler(RandomEngine(seed=1), LocalSource(), config)
        try:
            return [await scheduler.run_batch() for _ in range(n)]
        finally:
            assert await scheduler.close(30)

    return asyncio.run(go())


def test_groups_follow_the_ratio_with_metrics_per_tag() -> None:
    cfg = _mixed(
        mode="multiturn", scheduler={"num_env_groups": 6, "group_size": 2, "extra_groups": 2}, episode={"max_turns": 4}
    )
    sched = scheduler_config(cfg)
    batches = _batches(sched, 2)
    for batch in batches:
        groups = Counter(g[0].env_tag for g in batch.groups)
        assert groups == {"frozenlake": 4, "sokoban": 2}  # 2:1 over a batch of 6, extra groups cancelled
        for g in batch.groups:
            assert len({t.seed for t in g}) == 1 and len({t.env_tag for t in g}) == 1
            assert g[0].env_id == {"frozenlake": "FrozenLake-v0", "sokoban": "Sokoban-v0"}[g[0].env_tag]
        m = batch.metrics
        for tag in ("frozenlake", "sokoban"):
            assert f"env/{tag}/success" in m and f"env/{tag}/turns" in m
        assert (m["env/frozenlake/groups"], m["env/sokoban/groups"]) == (4.0, 2.0)
    # same seed, same mix and maps (without extra groups: with them the first groups to finish win)
    plain = sched.model_copy(update={"extra_groups": 0})
    first, again = _batches(plain, 2), _batches(plain, 2)
    assert [[(g[0].env_tag, g[0].seed) for g in b.groups] for b in first] == [
        [(g[0].env_tag, g[0].seed) for g in b.groups] for b in again
    ]


def test_a_failing_env_is_replaced_by_the_same_env_so_the_mix_holds() -> None:
    register_fault_env("TestMixRaise-v0", mode="raise", fault_every=3, fault_at_step=1)
    config = SchedulerConfig(
        env_ids=["TestMixRaise-v0", "Sokoban-v0"], env_tags=["flaky", "sokoban"], env_ratios=[1, 1],
        num_env_groups=4, group_size=2, seed=5,
        episode={"max_turns": 3, "max_retries": 0, "step_timeout_s": 5},
    )  # fmt: skip
    batch = _batches(config, 1)[0]
    assert Counter(g[0].env_tag for g in batch.groups) == {"flaky": 2, "sokoban": 2}
    assert batch.metrics["rollout/groups_failed"] >= 1 and batch.masked
    assert all(t.env_tag == "flaky" for t in batch.masked)


def test_mixed_warm_start_draws_demos_in_proportion(tiny_model_dir: Path) -> None:
    from rockroll.trainer.learner.sft import build_mixed_turn_demos

    cfg = _mixed(mode="multiturn", episode={"history": "last_k", "history_k": 0, "max_turns": 8})
    tok = RandomEngine(str(tiny_model_dir)).tokenizer
    rows, metrics = build_mixed_turn_demos(cfg.rollout.envs, tok, cfg.rollout.episode, list(range(9)))
    assert metrics == {"sft/frozenlake/demo_episodes": 6.0, "sft/sokoban/demo_episodes": 3.0}
    episodes = {r.episode_id for r in rows}
    assert 0 < len(episodes) <= 9 and rows


# ------------------------------------------------------------------ plan mode error model
def _plan_rollout(tiny_model_dir: Path, env_id: str, source: Any = None, **limits: Any) -> tuple[Any, Any]:
    from rockroll.agentrl.rollout.config import EpisodeConfig
    from rockroll.trainer.rollout.plan import PlanRollout

    engine = RandomEngine(str(tiny_model_dir), seed=3)
    rollout = PlanRollout(env_id, {}, engine.tokenizer, source=source, limits=EpisodeConfig(**limits))
    return rollout, engine


def test_plan_mode_retries_then_masks_envs_that_raise_or_hang(tiny_model_dir: Path) -> None:
    from rockroll.trainer.rollout.plan import PlanTask, plan_batch

    register_fault_env("TestPlanRaise-v0", mode="raise", fault_seeds=[7], fault_at_step=1)  # always: masked
    register_fault_env("TestPlanHang-v0", mode="hang", fault_every=2, fault_at_step=0, hang_s=0.6)  # retried
    source = LocalSource()
    for env_id, stage, error in (("TestPlanRaise-v0", "env_step", "InjectedFault"), ("TestPlanHang-v0", "", "")):
        rollout, engine = _plan_rollout(tiny_model_dir, env_id, source, step_timeout_s=0.2, max_retries=3)
        tasks = [PlanTask(s, f"g{s}", f"g{s}/{i}") for s in (7, 8) for i in range(3)]
        try:
            trajs = asyncio.run(rollout.run(engine, tasks, max_new_tokens=8, temperature=1.0))
        finally:
            rollout.close()
        assert len(trajs) == 6
        if stage:  # seed 7 faults on every try: masked, never scored; seed 8 plays
            masked = [t for t in trajs if t.masked]
            assert [t.seed for t in masked] == [7, 7, 7]
            for t in masked:
                assert (t.failure.stage, t.failure.error, t.failure.retries) == (stage, error, 3)
                assert t.final_reward == 0.0 and not t.success
            delivered, m = plan_batch(trajs, groups=2, group_size=3)
            assert [t.seed for t in delivered] == [8, 8, 8]
            assert m["rollout/episodes_masked"] == 3 and m["rollout/groups_short"] == 1
            assert m["rollout/infra_failures"] == 12  # 4 failed tries of each masked episode
        else:  # every 2nd reset hangs past step_timeout_s: retried on a fresh env, none masked
            assert not any(t.masked for t in trajs)
            assert sum(t.infra_retries for t in trajs) > 0
    assert source.open_count == 0  # envs of hung tries are closed when their threads end (close waits for them)


@pytest.mark.slow
def test_plan_mode_survives_sandboxes_that_die(tiny_model_dir: Path) -> None:
    from rockroll.agentrl.sources.kinds import SandboxSource
    from rockroll.sandbox.base import SandboxSpec
    from rockroll.sandbox.manager import SandboxManager
    from rockroll.trainer.rollout.plan import PlanTask

    faults = {"TestPlanExit-v0": {"mode": "exit", "fault_every": 3, "fault_at_step": 1}}
    env = (
        ("ROCKROLL_ENV_MODULES", "rockroll.agentrl.faults.sandbox_envs"),
        ("ROCKROLL_FAULT_ENVS", json.dumps(faults)),
    )
    state, db = tempfile.mkdtemp(prefix="rr-", dir="/tmp"), tempfile.mkdtemp(prefix="rr-db-")
    manager = SandboxManager(
        backend="process", name=f"t{uuid.uuid4().hex[:8]}", state_dir=state, db_url=f"sqlite:///{db}/sb.db",
        monitor_interval_s=0.1, default_spec=SandboxSpec(max_sessions=4, env=env), max_sandboxes=3,
    )  # fmt: skip
    register_fault_env("TestPlanExit-v0", **faults["TestPlanExit-v0"])  # the local copy builds the prompts
    try:
        source = SandboxSource(manager)
        rollout, engine = _plan_rollout(
            tiny_model_dir, "TestPlanExit-v0", source, start_timeout_s=30, step_timeout_s=5, max_retries=6
        )
        tasks = [PlanTask(s, f"g{s}", f"g{s}/{i}") for s in (1, 2, 3) for i in range(3)]
        try:
            trajs = asyncio.run(rollout.run(engine, tasks, max_new_tokens=8, temperature=1.0))
        finally:
            rollout.close()
        assert len(trajs) == 9
        assert sum(t.infra_retries for t in trajs) > 0  # sandboxes died mid-episode and were replaced
        for t in trajs:
            assert t.masked or t.failure is None
            if t.masked:
                assert t.failure.kind == "infra" and not t.success
        assert source.open_count == 0
    finally:
        manager.close()
        for d in (state, db):
            shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ short runs with faults
def _run_cfg(tiny_model_dir: Path, tmp_path: Path, name: str, rollout: dict) -> Any:
    episode, scheduler = rollout.pop("episode", {}), rollout.pop("scheduler", {})
    return config_from_dict({
        "name": name, "seed": 2, "total_steps": 2, "model": {"path": str(tiny_model_dir), "build_tiny": False},
        "rollout": {"eval_episodes": 3, "eval_every": 0, **rollout, "episode": {"max_tokens_per_turn": 6, **episode},
                    "scheduler": {"group_size": 2, "num_env_groups": 3, **scheduler}},
        "algo": {"dynamic_sampling": False},
        "optim": {"micro_batch_size": 16},
        "sft": {"steps": 0},
        "logging": {"run_dir": str(tmp_path), "progress": False, "tensorboard": False},
    })  # fmt: skip


@pytest.mark.slow
def test_plan_mode_run_completes_with_faults_injected(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rockroll.agentrl.faults.envs import FaultyEnv
    from rockroll.agentrl.sources.kinds import CallableSource
    from rockroll.trainer import pipeline
    from rockroll.trainer.run.metrics import read_metrics

    # the envs the rollout opens break (the prompts' local copy does not): seeds 0 and 1000 (an eval
    # seed) fault on every reset, so their episodes are masked; every 4th reset faults too (retried)
    def faulty(env_id: str, kwargs: dict[str, Any]) -> Any:
        return FaultyEnv(env_id, kwargs, mode="raise", fault_seeds=[0, 1000], fault_every=4, fault_at_step=0)

    source = CallableSource(faulty)
    monkeypatch.setattr(pipeline, "run_env_source", lambda cfg, stack, run_dir: source)
    cfg = _run_cfg(
        tiny_model_dir, tmp_path, "plan_faults",
        {"mode": "plan", "env_kwargs": {"is_slippery": False}, "train_seeds": 2, "eval_seed_offset": 1000,
         "scheduler": {"group_size_redundancy": 1}, "episode": {"max_retries": 1}},
    )  # fmt: skip
    summary = pipeline.run_training(cfg)
    assert summary["steps"] == 2
    records = [r for r in read_metrics(tmp_path / "plan_faults") if r["step"] >= 0]
    assert sum(r["rollout/episodes_masked"] for r in records) > 0
    assert sum(r["rollout/infra_retries"] for r in records) > 0
    assert summary["eval_end"]["eval/FrozenLake/masked"] == 1.0  # seed 1000: not scored as the policy's failure
    assert source.open_count == 0


@pytest.mark.slow
def test_mixed_multiturn_run_with_faults_reports_per_env(tiny_model_dir: Path, tmp_path: Path) -> None:
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    register_fault_env("TestRunMtRaise-v0", mode="raise", fault_every=4, fault_at_step=1)
    envs = [{"env_id": "TestRunMtRaise-v0", "ratio": 2, "tag": "flaky"}, {**MIX[1], "ratio": 1}]
    cfg = _run_cfg(
        tiny_model_dir, tmp_path, "mt_mix",
        {"mode": "multiturn", "envs": envs, "select_episodes": 2, "scheduler": {"group_size_redundancy": 1},
         "episode": {"max_turns": 3, "history": "last_k", "history_k": 0, "max_retries": 0}},
    )  # fmt: skip
    summary = run_training(cfg)
    assert summary["steps"] == 2
    records = [r for r in read_metrics(tmp_path / "mt_mix") if r["step"] >= 0]
    assert sum(r["rollout/episodes_masked"] for r in records) > 0  # faults masked, the run went on
    for r in records:
        assert "env/flaky/success" in r and "env/sokoban/success" in r
        assert (r["env/flaky/groups"], r["env/sokoban/groups"]) == (2.0, 1.0)
    end = summary["eval_end"]
    assert "eval/flaky/success" in end and "eval/sokoban/success" in end and "eval/success" in end
    assert summary["success_end"] == pytest.approx((end["eval/flaky/success"] + end["eval/sokoban/success"]) / 2)
    assert "### flaky" in summary["report"] and "### sokoban" in summary["report"]
    assert "| all | 3 |" in summary["report"].split("### sokoban")[1]  # its 3 held-out maps (no difficulty split)
    episode = json.loads((Path(summary["export_final"]) / "rockroll_episode.json").read_text())
    assert [e["tag"] for e in episode["envs"]] == ["flaky", "sokoban"]
