"""The RLVR settings (rollout.mode: rlvr, rollout.rlvr): bad values are ConfigErrors naming the key, bad rows
fail at load naming the row, and the shipped configs load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rockroll.agentrl.rewards import DatasetRowError, RewardRouter
from rockroll.envs.config import ConfigError
from rockroll.trainer.config_io import config_from_dict, describe_config, load_config, save_config
from rockroll.trainer.rollout.rlvr_data import load_rows

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def rlvr(**section: Any) -> dict[str, Any]:
    rollout = section.pop("rollout", {})
    return {"rollout": {"mode": "rlvr", **rollout, "rlvr": section}}


@pytest.mark.parametrize(
    ("data", "key", "says"),
    [
        (rlvr(oversampel=2), "rollout.rlvr.oversampel", "did you mean rollout.rlvr.oversample"),
        (rlvr(oversample=0.5), "rollout.rlvr.oversample", ">= 1"),
        (rlvr(max_sampling_tries=0), "rollout.rlvr.max_sampling_tries", ">= 1"),
        (rlvr(overlong="cut"), "rollout.rlvr.overlong", "filter, penalty, none"),
        (rlvr(dataset={"generator": "arithmetc"}), "rollout.rlvr.dataset.generator", "did you mean 'arithmetic'"),
        (rlvr(dataset={"source": "csv"}), "rollout.rlvr.dataset.source", "generator, jsonl, hf_disk"),
        (rlvr(dataset={"options": {"max_opperand": 9}}), "rollout.rlvr.dataset.options", "max_operand"),
        (rlvr(dataset={"source": "jsonl"}), "rollout.rlvr.dataset.path", "set path"),
        (rlvr(dataset={"size": 0}), "rollout.rlvr.dataset.size", ">= 1"),
        (rlvr(dataset={"heldout_frac": 1}), "rollout.rlvr.dataset.heldout_frac", "< 1"),
        (rlvr(dataset={"prompt_template": "{prompt"}), "rollout.rlvr.dataset.prompt_template", "literal brace"),
        (rlvr(dataset={"demo_template": "{} x"}), "rollout.rlvr.dataset.demo_template", "must name a row field"),
        (rlvr(rewards={"routes": {"math": {"reward": "maths"}}}), "rollout.rlvr.rewards.routes.math.reward", "math"),
        (rlvr(rewards={"routes": {}}), "rollout.rlvr.rewards.routes", "at least 1"),
        (rlvr(rewards={"routes": {"m": {"reward": "math"}}, "timeout_s": 0}), "rollout.rlvr.rewards.timeout_s", "> 0"),
    ],
)
def test_bad_settings_name_their_key(data: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        config_from_dict(data)
    assert e.value.key == key
    assert key in str(e.value) and says in str(e.value)


@pytest.mark.parametrize(
    ("rollout", "key"),
    [
        ({"sandbox": "process"}, "rollout.sandbox"),
        ({"scheduler": {"extra_groups": 2}}, "rollout.scheduler.extra_groups"),
        ({"scheduler": {"async_generation_ratio": 1}}, "rollout.scheduler.async_generation_ratio"),
    ],
)
def test_env_settings_do_not_apply_to_rlvr(rollout: dict[str, Any], key: str) -> None:
    """(``rollout.envs`` does apply: agentic envs beside the dataset, tests/trainer/test_rlvr_with_envs.py.)"""
    with pytest.raises(ConfigError, match=f"{key} does not apply to rollout.mode: rlvr"):
        config_from_dict(rlvr(rollout=rollout))
    config_from_dict({"rollout": {"mode": "multiturn", **rollout}})  # fine where envs play


@pytest.mark.parametrize(
    ("dataset", "key"),
    [
        ({"options": {"max_operand": 3, "max_terms": 2}, "size": 60}, "rollout.rlvr.dataset.size"),
        (
            {"options": {"max_operand": 9, "max_terms": 2, "ops": "+"}, "size": 10, "heldout_size": 40},
            "rollout.rlvr.dataset.heldout_size",
        ),
        ({"heldout_frac": 0, "size": 10, "heldout_size": 5}, "rollout.rlvr.dataset.heldout_frac"),
        ({"options": {"max_operand": -1}, "size": 10}, "rollout.rlvr.dataset.options"),
        ({"options": {"ops": "/"}, "size": 10}, "rollout.rlvr.dataset.options"),
    ],
)
def test_a_generator_that_cannot_draw_names_the_key(dataset: dict[str, Any], key: str) -> None:
    cfg = config_from_dict(rlvr(dataset=dataset))
    with pytest.raises(ConfigError) as e:
        load_rows(cfg.rollout.rlvr.dataset)
    assert e.value.key == key and key in str(e.value)


def test_a_generated_row_missing_what_its_reward_needs_names_the_row() -> None:
    # arithmetic rows routed to the countdown reward lack its numbers and target
    cfg = config_from_dict(rlvr(dataset={"tag": "cd", "size": 5}, rewards={"routes": {"cd": {"reward": "countdown"}}}))
    router = RewardRouter(cfg.rollout.rlvr.rewards)
    try:
        with pytest.raises(DatasetRowError, match=r"generator arithmetic \(train\): row 0: tag 'cd' needs numbers"):
            load_rows(cfg.rollout.rlvr.dataset, router.required_fields)
    finally:
        router.close()


def test_generated_splits_are_disjoint_and_fixed_by_the_seed() -> None:
    options = {"max_operand": 30, "max_terms": 2, "ops": "+"}
    data = config_from_dict(rlvr(dataset={"options": options, "size": 50, "heldout_size": 40})).rollout.rlvr
    train, heldout = load_rows(data.dataset)
    assert len(train) == 50 and len(heldout) == data.dataset.heldout_size
    assert not {s.prompt for s in train} & {s.prompt for s in heldout}
    assert all(2 <= int(s.metadata["answer"]) <= 60 for s in train)  # the sum of two operands of 1 to 30
    assert load_rows(data.dataset) == (train, heldout)


def test_a_saved_rlvr_config_reads_back_equal(tmp_path: Path) -> None:
    cfg = config_from_dict(rlvr(dataset={"options": {"max_operand": 9}}, overlong="penalty"))
    save_config(cfg, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == cfg
    keys = {f.key for f in describe_config()}
    assert {"rollout.rlvr.dataset.generator", "rollout.rlvr.max_sampling_tries", "rollout.rlvr.overlong"} <= keys


@pytest.mark.parametrize("name", ["rlvr_arithmetic.yaml", "rlvr_code.yaml"])
def test_the_shipped_configs_load(name: str) -> None:
    cfg = load_config(CONFIGS / name)
    assert cfg.rollout.mode == "rlvr"
