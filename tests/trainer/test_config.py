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
        ({"rollout": {"scheduler": {"group_size": 1}}}, "needs rollout.scheduler.group_size >= 2"),
        ({"workers": {"num_workers": 2}}, "needs workers.use_ray: true"),
        ({"total_steps": "many"}, "total_steps must be int"),
        ({"model": 3}, "model must be a mapping"),
        ({"rollout": {"expert": "rockroll.envs.alfworld.searcher:nope"}}, "is not a registered expert"),
        ({"rollout": {"envs": [{"env_id": "ALFWorld-v0", "expert": "no_such_module:x"}]}}, "alfworld_searcher"),
    ],
)
def test_validation_says_what_to_do(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config_from_dict(data)


def test_every_field_has_help() -> None:
    rows = describe_config()
    assert len(rows) > 50
    assert all(r.description for r in rows), [r.key for r in rows if not r.description]


def test_help_config_lists_every_key_with_type_default_and_description() -> None:
    from typer.testing import CliRunner

    from rockroll.cli.main import app

    out = CliRunner().invoke(app, ["train", "--help-config"])
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines() if line.strip()}
    for r in describe_config():
        assert r.key in lines, r.key
        assert r.type in lines[r.key] and r.default in lines[r.key] and r.description in lines[r.key]
    assert "plan|multiturn" in lines["rollout.mode"] and '"multiturn"' in lines["rollout.mode"]
    assert "grpo" in lines["algo.adv_estimator"] and "int, >= 1" in lines["rollout.scheduler.group_size"]


def test_train_without_yaml_takes_defaults_plus_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``rockroll train k=v ...``: no YAML, the defaults plus the overrides (the pipeline is faked here)."""
    pytest.importorskip("torch")
    from typer.testing import CliRunner

    import rockroll.trainer.pipeline as pipeline
    from rockroll.cli.main import app

    seen: list[TrainConfig] = []

    def fake_run(
        cfg: TrainConfig,
        on_step: object = None,
        resume: bool = False,
        on_event: object = None,
        env_source: object = None,
    ) -> dict:
        seen.append(cfg)
        return {"success_end": 0.0, "run_dir": "nowhere", "steps": 0}

    monkeypatch.setattr(pipeline, "run_training", fake_run)
    monkeypatch.chdir(tmp_path)  # runs/run (the default run dir) must not exist from an earlier run
    out = CliRunner().invoke(
        app, ["train", "total_steps=3", "rollout.scheduler.group_size=4", "logging.progress=false"]
    )
    assert out.exit_code == 0, out.output
    assert seen[0] == TrainConfig(total_steps=3, rollout={"scheduler": {"group_size": 4}}, logging={"progress": False})
    out = CliRunner().invoke(app, ["train", "optim.lrr=1"])
    assert out.exit_code == 2 and "did you mean optim.lr" in out.output


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_example_configs_load(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.name


def test_examples_exist() -> None:
    names = {p.name for p in CONFIGS}
    assert {"frozenlake_tiny.yaml", "sokoban_tiny.yaml", "qwen2.5-0.5b_frozenlake_gpu.yaml"} <= names


def test_deepspeed_strategy_is_an_optional_extra() -> None:
    import importlib.util

    from rockroll.trainer.learner.workers import make_workers

    if importlib.util.find_spec("deepspeed") is not None:
        pytest.skip("deepspeed is installed")
    cfg = config_from_dict({"workers": {"strategy": "deepspeed"}})
    with pytest.raises(RuntimeError, match="needs deepspeed"):
        make_workers(None, cfg)
