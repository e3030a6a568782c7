"""Typed config: YAML 1:1, key=value overrides, validation messages, example configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockroll.trainer.config import TrainConfig
from rockroll.trainer.config_io import (
    apply_overrides,
    config_from_dict,
    config_to_dict,
    describe_config,
    load_config,
    save_config,
)

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def test_defaults_roundtrip(tmp_path: Path) -> None:
    cfg = TrainConfig()
    save_config(cfg, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == cfg
    assert config_from_dict(config_to_dict(cfg)) == cfg


def test_overrides_parse_yaml_values(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("name: a\noptim: {lr: 1.0e-4}\n")
    cfg = load_config(
        tmp_path / "c.yaml",
        ["optim.lr=3e-4", "rollout.env_kwargs={is_slippery: false}", "total_steps=7", "algo.use_kl_loss=false"],
    )
    assert cfg.optim.lr == pytest.approx(3e-4)
    assert cfg.rollout.env_kwargs == {"is_slippery": False}
    assert cfg.total_steps == 7 and cfg.algo.use_kl_loss is False
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides({}, ["optim.lr"])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"optim": {"lrr": 1}}, "did you mean optim.lr"),
        ({"algo": {"adv_estimator": "ppo"}}, "algo.adv_estimator must be one of"),
        ({"algo": {"dual_clip": 0.5}}, "dual_clip must be > 1"),
        ({"optim": {"lr": 0}}, "try 1e-4"),
        ({"rollout": {"group_size": 1}}, "needs rollout.group_size >= 2"),
        ({"workers": {"num_workers": 2}}, "needs workers.use_ray: true"),
        ({"total_steps": "many"}, "total_steps must be int"),
        ({"model": 3}, "model must be a mapping"),
    ],
)
def test_validation_says_what_to_do(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config_from_dict(data)


def test_every_field_has_help() -> None:
    rows = describe_config()
    assert len(rows) > 50
    assert all(help_text for _, _, help_text in rows), [k for k, _, h in rows if not h]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_example_configs_load(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.name


def test_examples_exist() -> None:
    names = {p.name for p in CONFIGS}
    assert {"frozenlake_tiny.yaml", "sokoban_tiny.yaml", "qwen2.5-0.5b_frozenlake_gpu.yaml"} <= names


def test_deepspeed_strategy_is_an_optional_extra() -> None:
    import importlib.util

    from rockroll.trainer.workers import make_workers

    if importlib.util.find_spec("deepspeed") is not None:
        pytest.skip("deepspeed is installed")
    cfg = config_from_dict({"workers": {"strategy": "deepspeed"}})
    with pytest.raises(RuntimeError, match="needs deepspeed"):
        make_workers(None, cfg)
