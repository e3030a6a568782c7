"""The controller end to end on a tiny model: metrics, checkpoints, exact resume, plots, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

torch.set_num_threads(1)

VOLATILE = ("time/", "system/tokens_per_s", "sft/tokens_per_s", "sft/time")


def _cfg(tiny_model_dir: Path, run_dir: Path, name: str, **over):
    from rockroll.trainer.config_io import config_from_dict

    data = {
        "name": name,
        "seed": 1,
        "total_steps": 4,
        "model": {"path": str(tiny_model_dir)},
        "rollout": {"mode": "plan", "env_kwargs": {"is_slippery": False}, "eval_episodes": 8, "eval_every": 2,
                    "episode": {"max_tokens_per_turn": 8}, "scheduler": {"group_size": 4, "num_env_groups": 2},
                    "plan": {"prompt_style": "grid"}},
        "algo": {"dynamic_sampling": False, "kl_coef": 0.01},
        "optim": {"lr": 1e-3, "mini_batch_size": 4, "micro_batch_size": 4},
        "sft": {"steps": 2, "num_demos": 20, "batch_size": 4},
        "checkpoint": {"every": 2},
        "logging": {"run_dir": str(run_dir), "progress": False},
    }  # fmt: skip
    for k, v in over.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
    return config_from_dict(data)


def _stable(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in records]


@pytest.mark.slow
def test_pipeline_smoke_metrics_checkpoint_plot(tiny_model_dir: Path, tmp_path: Path) -> None:
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.checkpoint import load_latest
    from rockroll.trainer.run.metrics import read_metrics
    from rockroll.trainer.run.plot import plot_run

    cfg = _cfg(tiny_model_dir, tmp_path, "smoke")
    seen = []
    summary = run_training(cfg, lambda s, t, m: seen.append((s, t)))
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4)]
    records = read_metrics(tmp_path / "smoke")
    steps = [r["step"] for r in records]
    assert steps == [-1, 0, 1, 2, 3]  # -1: the SFT warm start
    for key in (
        "env/FrozenLake/success",
        "actor/pg_loss",
        "actor/kl_loss",
        "time/rollout",
        "time/train",
        "system/tokens_per_s",
    ):
        assert key in records[1], key
    assert "eval/FrozenLake/success" in records[2] and "eval_pre_sft/FrozenLake/success" in records[0]
    assert 0.0 <= summary["success_end"] <= 1.0 and "success_before_sft" in summary
    state = load_latest(tmp_path / "smoke")
    assert state["step"] == 3 and state["version"] == 4
    initial, _ = load_policy(cfg.model)
    changed = any(not torch.equal(initial.state_dict()[k], v) for k, v in state["workers"]["model"].items())
    assert changed
    assert list((tmp_path / "smoke" / "tb").glob("events.*"))
    pngs = plot_run(tmp_path / "smoke")
    assert {p.name for p in pngs} >= {"actor.png", "env.png", "time.png", "step_time.png"}
    assert all(p.stat().st_size > 1000 for p in pngs)


@pytest.mark.slow
def test_killed_and_resumed_run_matches_uninterrupted(tiny_model_dir: Path, tmp_path: Path) -> None:
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    full = run_training(_cfg(tiny_model_dir, tmp_path, "full"))

    class Killed(Exception):
        pass

    def die_at_2(step: int, total: int, m: dict) -> None:
        if step == 2:
            raise Killed  # after step 1's checkpoint, in the middle of step 2

    with pytest.raises(Killed):
        run_training(_cfg(tiny_model_dir, tmp_path, "resumed"), die_at_2)
    resumed = run_training(_cfg(tiny_model_dir, tmp_path, "resumed"), resume=True)
    a = _stable(read_metrics(tmp_path / "full"))
    b = _stable(read_metrics(tmp_path / "resumed"))
    assert [r["step"] for r in b] == [-1, 0, 1, 2, 3]
    # tolerance: 1e-6 absolute on every logged value (CPU, one thread: in practice identical)
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for k in ra:
            assert rb[k] == pytest.approx(ra[k], abs=1e-6), (ra["step"], k)
    assert resumed["success_end"] == pytest.approx(full["success_end"], abs=1e-6)


@pytest.mark.slow
def test_cli_train_and_plot(tiny_model_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rockroll.cli.main import app

    cfg_path = Path(__file__).resolve().parents[2] / "configs" / "frozenlake_tiny.yaml"
    args = [
        "train", str(cfg_path), f"model.path={tiny_model_dir}", f"logging.run_dir={tmp_path}", "name=cli", "total_steps=2",
        "rollout.scheduler.num_env_groups=2", "rollout.scheduler.group_size=2", "rollout.eval_episodes=4",
        "sft.steps=1", "sft.num_demos=10",
        "logging.progress=false", "logging.tensorboard=false",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "success after RL" in result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["steps"] == 2
    result = CliRunner().invoke(app, ["plot", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    assert "env.png" in result.output
    bad = CliRunner().invoke(app, ["train", str(cfg_path), "optim.lrr=1"])
    assert bad.exit_code == 2 and "did you mean optim.lr" in bad.output


@pytest.mark.slow
def test_multiturn_mode_through_agentrl_scheduler(tiny_model_dir: Path, tmp_path: Path) -> None:
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    cfg = _cfg(
        tiny_model_dir, tmp_path, "mt", total_steps=2,
        rollout={"mode": "multiturn", "episode": {"max_turns": 3}, "scheduler": {"async_generation_ratio": 1.0}},
        sft={"steps": 0}, checkpoint={"every": 0},
    )  # fmt: skip
    summary = run_training(cfg)
    records = read_metrics(tmp_path / "mt")
    assert [r["step"] for r in records] == [0, 1] and summary["steps"] == 2
    assert records[1]["system/weight_version"] == 2.0 and "env/FrozenLake/success" in records[1]
    assert records[0]["env/FrozenLake/turns"] > 1  # several turns per episode (scheduler metrics share the tag)


def test_step_time_split_divides_the_rollout_by_the_generation_share() -> None:
    from rockroll.trainer.run.plot import step_time_split

    rec = {"time/rollout": 10.0, "time/generation_share": 0.25, "time/logprobs": 1.0, "time/train": 2.0,
           "time/sync": 0.5}  # fmt: skip
    assert step_time_split(rec) == {"generation": 2.5, "env": 7.5, "reward": 0.0, "logprobs": 1.0, "train": 2.0,
                                    "sync": 0.5}  # fmt: skip
    assert step_time_split({"time/rollout": 4.0})["generation"] == 4.0  # no share known: all of it
    split = step_time_split({**rec, "time/reward_share": 0.2})  # the reward's share first, the rest by generation's
    assert split["reward"] == 2.0 and split["generation"] == 2.0 and split["env"] == 6.0


@pytest.mark.slow
def test_one_batch_ahead_with_batch_sync_repeats_exactly(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``async_generation_ratio: 1`` with ``weight_sync: batch``: each batch is generated by the weights one update
    behind (staleness 1), so two runs of one seed give the same metrics, however their timing went."""
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    runs = []
    for name in ("a", "b"):
        cfg = _cfg(
            tiny_model_dir, tmp_path, name, total_steps=4,
            rollout={"mode": "multiturn", "env_kwargs": {"is_slippery": True}, "eval_episodes": 4, "eval_every": 0,
                     "episode": {"max_turns": 4, "history_k": 0, "max_tokens_per_turn": 8},
                     "scheduler": {"group_size": 4, "num_env_groups": 2, "async_generation_ratio": 1,
                                   "weight_sync": "batch"}},
            sft={"steps": 0}, checkpoint={"every": 0},
        )  # fmt: skip
        run_training(cfg)
        timing = ("rollout/episodes_per_s",)
        runs.append([{k: v for k, v in r.items() if k not in timing} for r in _stable(read_metrics(tmp_path / name))])
    assert [r["rollout/staleness"] for r in runs[0]] == [0.0, 1.0, 1.0, 1.0]
    # the same tokens, rewards and updates; the engine's logprobs may differ in their last bits with the rounds' sizes
    diff = [
        (i, k, a[k], b.get(k))
        for i, (a, b) in enumerate(zip(*runs, strict=True))
        for k in a
        if b.get(k) != pytest.approx(a[k], rel=1e-6, abs=1e-6)
    ]
    assert len(runs[0]) == len(runs[1]) == 4 and not diff, diff
