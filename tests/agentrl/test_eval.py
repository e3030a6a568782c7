"""``rockroll eval``: typed YAML config, evaluation in-process and on warm sandboxes, reports, CLI, job adapter."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rockroll.agentrl.eval.config import EvalConfig, EvalEnvConfig, SourceConfig, from_dict, load_eval_config
from rockroll.agentrl.eval.run import open_source, run_eval, run_eval_job

YAML = """
name: smoke
engine: {kind: random, args: {invalid_prob: 0.3, seed: 1}}
source: {kind: local}
envs:
  - {env: FrozenLake-v0, episodes: 4}
  - {tag: puzzle, episodes: 1}
episode: {max_turns: 4, max_tokens_per_turn: 32}
seed: 100
concurrency: 4
"""


def test_yaml_maps_onto_typed_config(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text(YAML)
    cfg = load_eval_config(path)
    assert cfg.engine.kind == "random" and cfg.engine.args["invalid_prob"] == 0.3
    assert cfg.envs[0] == EvalEnvConfig(env="FrozenLake-v0", episodes=4)
    assert cfg.envs[1].tag == "puzzle" and cfg.episode.max_turns == 4 and cfg.seed == 100


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"envz": []}, "unknown key.*envz.*known: .*envs"),
        ({"envs": [{"env": "FrozenLake-v0", "tag": "grid"}]}, "exactly one of 'env' or 'tag'"),
        ({"envs": [{"env": "FrozenLake-v0", "episodes": 0}]}, "episodes must be >= 1"),
        ({"engine": {"kind": "gpt"}}, "engine.kind must be one of"),
        ({"source": {"kind": "cloud"}}, "source.kind must be one of"),
        ({"episode": {"history": "some"}}, "episode.history must be one of full, last_k; got 'some'"),
        ({"episode": {"max_tokens_per_turn": 64, "max_context_tokens": 32}}, "must exceed max_tokens_per_turn"),
        ({"envs": []}, "at least one entry"),
        ({"concurrency": 0}, "concurrency must be >= 1"),
    ],
)
def test_invalid_configs_say_what_to_do(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        from_dict(EvalConfig, data)


def test_eval_in_process_writes_json_and_markdown(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text(YAML + f"output_dir: {tmp_path / 'out'}\n")
    report = run_eval(path, progress=False)
    assert report.per_env["FrozenLake-v0"]["episodes"] == 4
    puzzle = [e for e in report.per_env if e != "FrozenLake-v0"]
    assert puzzle and all(report.per_env[e]["episodes"] == 1 for e in puzzle)
    assert report.per_tag["puzzle"]["episodes"] == len(puzzle)
    assert report.overall["episodes"] == 4 + len(puzzle)
    for row in report.per_env.values():
        assert 0 <= row["success"] <= 1 and 0 <= row["valid_action_rate"] <= 1 and 1 <= row["mean_turns"] <= 4
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["per_env"]["FrozenLake-v0"]["episodes"] == 4
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| FrozenLake-v0 | 4 |" in md and "## Per tag" in md
    assert report.metrics()["eval/FrozenLake-v0/episodes"] == 4


def test_eval_reuses_warm_sandboxes() -> None:
    cfg = from_dict(
        EvalConfig,
        {
            "envs": [{"env": "FrozenLake-v0", "episodes": 6}],
            "concurrency": 3,
            "engine": {"kind": "random"},
            "episode": {"max_turns": 3},
        },
    )
    with open_source(SourceConfig(kind="sandbox", backend="process", max_sandboxes=1)) as source:
        report = run_eval(cfg, source=source, progress=False)
        manager = source.manager
        assert source.opened == 6 and source.open_count == 0
        assert len(manager.list()) == 1  # six episodes, one (warm, pooled) sandbox
    assert report.overall["episodes"] == 6 and report.overall["masked"] == 0
    assert manager.backend.list_managed(manager.config.name) == []


def test_eval_with_the_tiny_model(tmp_path: Path) -> None:
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    model = build_tiny_model(tmp_path / "tiny", TinyModelConfig(episodes_per_env=3))
    cfg = from_dict(EvalConfig, {
        "engine": {"kind": "hf", "args": {"model_path": str(model), "num_threads": 1}},
        "envs": [{"env": "FrozenLake-v0", "episodes": 2}, {"env": "Sokoban-v0", "episodes": 2}],
        "episode": {"max_turns": 3, "max_tokens_per_turn": 8},
    })  # fmt: skip
    report = run_eval(cfg, progress=False)
    assert report.engine == "hf" and report.overall["episodes"] == 4


def test_cli_eval(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rockroll.cli.main import app

    path = tmp_path / "eval.yaml"
    path.write_text(YAML)
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["eval", str(path), "--no-progress", "--episodes", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "| FrozenLake-v0 | 2 |" in result.output
    assert (out / "report.json").is_file() and (out / "report.md").is_file()
    bad = tmp_path / "bad.yaml"
    bad.write_text("envs: [{env: FrozenLake-v0, episodes: -1}]\n")
    result = CliRunner().invoke(app, ["eval", str(bad)])
    assert result.exit_code == 2 and "episodes must be >= 1" in result.output


def test_job_adapter_reports_progress_and_metrics() -> None:
    import rockroll.envhub as envhub

    reports: list[dict[str, Any]] = []
    ctx = SimpleNamespace(
        config={"envs": [{"env": "FrozenLake-v0", "episodes": 3}], "engine": {"kind": "random"}},
        open_session=lambda env, kwargs: envhub.make(env, **kwargs),
        report=lambda **kw: reports.append(kw),
        log=lambda line: None,
        check=lambda: None,
    )
    metrics = run_eval_job(ctx)
    assert metrics["eval/FrozenLake-v0/episodes"] == 3
    assert reports[-1]["progress"] == 1.0 and "eval/FrozenLake-v0/success" in reports[-1]["metrics"]
