"""RLVR beside agentic envs in one run (trainer/rollout/mixed.py): the batch split by ratio, config errors,
metrics merged, and a real run through ``run_training`` (dataset sums + FrozenLake, in process and in
process sandboxes) with metrics, evaluation and report per tag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rockroll.trainer.config_io import config_from_dict

SUMS = {"generator": "arithmetic", "options": {"max_operand": 20, "max_terms": 2, "ops": "+"}, "size": 60,
        "heldout_size": 12, "heldout_frac": 0.3}  # fmt: skip
LAKE = {"env_id": "FrozenLake-v0", "env_kwargs": {"is_slippery": False}, "tag": "lake"}


def _cfg(tmp_path: Path, **rollout: Any) -> dict[str, Any]:
    r = {
        "mode": "rlvr",
        "rlvr": {"dataset": SUMS, "rewards": {"routes": {"math": {"reward": "math"}}}, "ratio": 3.0},
        "envs": [LAKE],
        "scheduler": {"group_size": 2, "num_env_groups": 4},
        "episode": {"max_tokens_per_turn": 8, "max_turns": 6},
        "eval_episodes": 6,
        "eval_every": 0,
        **rollout,
    }
    return {
        "name": "rlvr_envs",
        "total_steps": 2,
        "model": {"path": str(tmp_path / "model"), "build_tiny": True, "tiny_hidden_size": 32, "tiny_layers": 1},
        "rollout": r,
        "sft": {"steps": 4, "num_demos": 8, "batch_size": 8},
        "checkpoint": {"every": 0},
        "logging": {"run_dir": str(tmp_path / "runs"), "progress": False, "tensorboard": False},
    }


def test_the_batch_is_split_by_the_dataset_ratio_against_the_envs(tmp_path: Path) -> None:
    from rockroll.trainer.rollout.mixed import demo_split, part_configs

    cfg = config_from_dict(_cfg(tmp_path, scheduler={"group_size": 2, "num_env_groups": 8}))
    assert cfg.rollout.plays_envs and cfg.rollout.rlvr_env_groups() == (6, 2)
    data, envs = part_configs(cfg)
    assert (data.rollout.mode, data.rollout.scheduler.num_env_groups, data.rollout.envs) == ("rlvr", 6, [])
    assert (envs.rollout.mode, envs.rollout.scheduler.num_env_groups) == ("multiturn", 2)
    assert [e.tag for e in envs.rollout.env_mix()] == ["lake"]
    assert demo_split(cfg) == (6, 2)  # sft.num_demos 8, three quarters dataset rows
    alone = config_from_dict({**_cfg(tmp_path), "rollout": {**_cfg(tmp_path)["rollout"], "envs": []}})
    assert not alone.rollout.plays_envs


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"scheduler": {"group_size": 2, "num_env_groups": 1}}, "num_env_groups"),
        ({"envs": [], "sandbox": "process"}, "rollout.sandbox"),
    ],
)
def test_bad_mixes_name_their_key(tmp_path: Path, change: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key):
        config_from_dict(_cfg(tmp_path, **change))


def test_turn_credit_without_env_state_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="algo.turn_credit: fork"):
        config_from_dict({**_cfg(tmp_path), "algo": {"turn_credit": "fork"}})


def test_both_parts_metrics_merge_counts_and_keep_the_rest() -> None:
    from rockroll.trainer.rollout.mixed import merge_metrics

    out = merge_metrics(
        {"rollout/infra_failures": 2.0, "rollout/kept_share": 0.5, "rollout/x": 1.0},
        {"rollout/infra_failures": 1.0, "rollout/x": 3.0, "rollout/staleness": 0.0},
    )
    assert out == {"rollout/infra_failures": 3.0, "rollout/kept_share": 0.5, "rollout/x": 3.0,
                   "rlvr/rollout/x": 1.0, "rollout/staleness": 0.0}  # fmt: skip


@pytest.mark.parametrize("sandbox", ["none", "process"])
def test_a_run_trains_on_dataset_rows_and_env_episodes(
    tmp_path: Path, sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("math_verify")
    import rockroll.trainer.run.sandboxes as sandboxes
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics
    from tests.sandbox.counting import counting_source

    Counting = counting_source()
    monkeypatch.setattr(sandboxes, "SandboxSource", Counting)

    torch.set_num_threads(1)
    cfg = config_from_dict(_cfg(tmp_path, sandbox=sandbox))
    summary = run_training(cfg)
    end = summary["eval_end"]
    assert end["eval/math/n"] == 6 and 0.0 <= end["eval/math/success"] <= 1.0
    assert 0.0 <= end["eval/lake/success"] <= 1.0 and end["eval/lake/turns"] >= 1
    assert end["eval/success"] == pytest.approx((end["eval/math/success"] + end["eval/lake/success"]) / 2)
    steps = [m for m in read_metrics(Path(summary["run_dir"])) if m.get("step", -1) >= 0]
    assert len(steps) == 2
    for m in steps:
        assert {"env/math/success", "env/lake/success", "reward/math/mean", "rollout/sampling_tries"} <= set(m)
        assert m["rollout/infra_failures"] == 0
    warm = [m for m in read_metrics(Path(summary["run_dir"])) if m.get("step") == -1][0]
    assert warm["sft/rlvr/demo_rows"] == 6 and warm["sft/lake/demo_episodes"] == 2
    assert "math" in summary["report"] and "lake (FrozenLake-v0" in summary["report"]
    # the env episodes (warm-start evaluation, 2 steps of 1 group of 2, 3 evaluations of 6) ran in sandboxes
    assert Counting.opened >= (6 if sandbox == "process" else 0) and (sandbox == "process") == (Counting.opened > 0)
