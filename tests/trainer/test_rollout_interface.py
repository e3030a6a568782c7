"""The trainer sees the rollout through one interface (``rockroll.trainer.rollout.base.Rollout``): a fake rollout
driven by ``run_training``'s loop, the logprob-gap metrics, and a run whose engine dies in rollout and in a
weight sync and goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from rockroll.agentrl.engines import EngineDeadError  # noqa: E402
from rockroll.agentrl.trajectory import Trajectory, Turn  # noqa: E402
from rockroll.trainer.rollout.base import Rollout  # noqa: E402


def _cfg(tiny_model_dir: Path, run_dir: Path, name: str, **over: Any) -> Any:
    from rockroll.trainer.config_io import config_from_dict

    data = {
        "name": name, "seed": 2, "total_steps": 3, "model": {"path": str(tiny_model_dir)},
        "rollout": {"mode": "plan", "env_kwargs": {"is_slippery": False}, "eval_episodes": 4, "eval_every": 2,
                    "episode": {"max_tokens_per_turn": 8}, "scheduler": {"group_size": 4, "num_env_groups": 2},
                    "plan": {"prompt_style": "grid"}},
        "algo": {"dynamic_sampling": False},
        "optim": {"lr": 1e-3, "micro_batch_size": 8},
        "logging": {"run_dir": str(run_dir), "progress": False, "tensorboard": False},
        **over,
    }  # fmt: skip
    return config_from_dict(data)


class FakeRollout(Rollout):
    """Hand-made plan trajectories; records every call the loop makes."""

    def __init__(self, tok: Any, engine_logprob: float = -1.0) -> None:
        self.tok, self.engine_logprob = tok, engine_logprob
        self.tags = ["FrozenLake"]
        self.calls: list[str] = []
        self.version = 0

    def next_batch(self, step: int) -> tuple[list[Trajectory], dict[str, float]]:
        self.calls.append(f"batch{step}")
        prompt = self.tok.encode("<|im_start|>user\nP _\n_ G<|im_end|>\n<|im_start|>assistant\n")
        trajs = []
        for g in range(2):
            for i in range(4):
                move = ("Right Down", "Down Right", "Left", "Up")[i]
                resp = self.tok.encode(f"<answer>{move}</answer>") + [self.tok.eos_token_id]
                ok = i < 2
                turn = Turn(prompt, resp, [self.engine_logprob] * len(resp), self.version, move, reward=float(ok))
                trajs.append(Trajectory(f"s{step}g{g}e{i}", f"s{step}g{g}", "FrozenLake-v0", g, "FrozenLake", [turn],
                                        final_reward=float(ok), success=ok, terminated=True))  # fmt: skip
        return trajs, {"rollout/engine_restarts": 0.0, "rollout/fake": 1.0}

    def evaluate(self, seeds: list[int], prefix: str = "eval") -> dict[str, float]:
        self.calls.append(f"eval:{prefix}:v{self.version}")
        return {f"{prefix}/FrozenLake/success": 0.25 * self.version}

    def release(self) -> None:
        self.calls.append("release")

    def update_weights(self, weights: Any, version: int) -> dict[str, float]:
        assert isinstance(weights, dict) and weights
        self.calls.append(f"sync{version}")
        self.version = version
        return {"time/sync": 0.0, "system/sync_bytes": 1.0}

    def close(self) -> None:
        self.calls.append("close")


def test_run_training_drives_any_rollout_through_the_interface(tiny_model_dir, tmp_path, monkeypatch) -> None:
    import rockroll.trainer.pipeline as pipeline
    from rockroll.trainer.run.metrics import read_metrics

    made: list[FakeRollout] = []

    def make(cfg: Any, model: Any, tok: Any, source: Any) -> FakeRollout:
        made.append(FakeRollout(tok))
        return made[-1]

    monkeypatch.setattr(pipeline, "make_rollout", make)
    summary = pipeline.run_training(_cfg(tiny_model_dir, tmp_path, "fake"))
    calls = made[0].calls
    assert calls == [
        "eval:eval:v0",
        "batch0", "release", "sync1",
        "batch1", "release", "sync2", "eval:eval:v2",
        "batch2", "release", "sync3", "eval:eval:v3",
        "eval:eval:v3",  # the final evaluation
        "close",
    ]  # fmt: skip
    assert summary["success_start"] == 0.0 and summary["success_end"] == 0.75 and summary["steps"] == 3
    records = [r for r in read_metrics(tmp_path / "fake") if r["step"] >= 0]
    assert [r["system/weight_version"] for r in records] == [1.0, 2.0, 3.0]
    assert all(r["rollout/fake"] == 1.0 and r["env/FrozenLake/success"] == 0.5 for r in records)
    # the engine said -1.0 for every sampled token; the trainer's logprobs differ from that
    for r in records:
        assert 0 < r["actor/logprob_gap_mean"] <= r["actor/logprob_gap_max"]


def test_logprob_gap_and_behaviour_logprobs_by_hand() -> None:
    from rockroll.trainer.learner.actor import behaviour_logprobs, logprob_gap

    trainer = torch.tensor([[0.0, -1.0, -2.0, -0.5]])
    engine = torch.tensor([[0.0, -1.5, float("nan"), -0.25]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])  # the first token is the prompt's
    gap = logprob_gap(trainer, engine, mask)
    assert gap == {"actor/logprob_gap_mean": pytest.approx(0.375), "actor/logprob_gap_max": pytest.approx(0.5)}
    assert logprob_gap(trainer, engine, mask * 0) == {}
    behav = behaviour_logprobs(engine, trainer)  # the engine's where known, else the trainer's (weight 1)
    assert behav.tolist() == [[0.0, -1.5, -2.0, -0.25]]


class _FlakyEngine:
    """A real engine that dies once in generation (restarting itself on the next call, as VLLMEngine's
    auto_restart does) and once in a weight sync (restarted by the trainer)."""

    def __init__(self, inner: Any, die_in_generation: int, die_in_sync: int) -> None:
        self.inner, self.tokenizer, self.name = inner, inner.tokenizer, "flaky"
        self.generations, self.syncs, self.restarts = 0, 0, 0
        self.die_in_generation, self.die_in_sync, self.dead = die_in_generation, die_in_sync, False

    @property
    def weight_version(self) -> int:
        return self.inner.weight_version

    async def generate_batch(self, requests: list) -> list:
        if self.dead:
            self.dead, self.restarts = False, self.restarts + 1  # auto restart
        self.generations += 1
        if self.generations == self.die_in_generation:
            self.dead = True
            raise EngineDeadError("the engine host died mid-generation")
        return await self.inner.generate_batch(requests)

    def update_weights(self, weights: Any, version: int) -> None:
        self.syncs += 1
        if self.syncs == self.die_in_sync:
            self.dead = True
            raise EngineDeadError("the engine host died during the weight sync")
        self.inner.update_weights(weights, version)

    def restart(self) -> None:
        self.dead, self.restarts = False, self.restarts + 1

    async def close(self) -> None:
        await self.inner.close()


def test_a_dying_engine_is_restarted_and_the_run_goes_on(tiny_model_dir, tmp_path, monkeypatch) -> None:
    import rockroll.trainer.rollout.engine_sync as es
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    engines: list[_FlakyEngine] = []
    real = es.make_engine

    def make(kind: str, **kw: Any) -> _FlakyEngine:
        engines.append(_FlakyEngine(real(kind, **kw), die_in_generation=3, die_in_sync=2))
        return engines[-1]

    monkeypatch.setattr(es, "make_engine", make)
    cfg = _cfg(tiny_model_dir, tmp_path, "flaky", total_steps=4)
    summary = run_training(cfg)
    engine = engines[0]
    assert summary["steps"] == 4 and engine.restarts == 2
    assert engine.inner.weight_version == 4  # every update reached the engine, the one that failed included
    records = [r for r in read_metrics(tmp_path / "flaky") if r["step"] >= 0]
    assert sum(r["rollout/engine_restarts"] for r in records) == 2
    # generation call 3 is step 1's batch (1: eval at start, 2: step 0): retried, not scored as the agent's
    assert records[1]["rollout/infra_retries"] > 0 and records[1]["rollout/episodes_masked"] == 0
    assert all(r["rollout/groups_short"] == 0 for r in records)
    asyncio.run(asyncio.sleep(0))
