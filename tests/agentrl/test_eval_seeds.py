"""``rockroll eval --model DIR --env ID --seeds A:B``: one multi-turn episode per seed, a JSON of per-episode
records and a summary; bad input is one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rockroll.agentrl.eval.config import EvalConfig, from_dict, model_eval_config, parse_env_kwargs, parse_seeds
from rockroll.agentrl.eval.run import run_eval


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "rockroll.cli", "eval", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    cfg = TinyModelConfig(
        hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, episodes_per_env=5
    )
    return build_tiny_model(tmp_path_factory.mktemp("eval_seeds") / "model", cfg)


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("5000:5008", list(range(5000, 5008))), ("7", [7]), ("0:3,10,20:22", [0, 1, 2, 10, 20, 21]), (" 4 , 2 ", [4, 2])],
)
def test_parse_seeds(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10:5", "seed range 10:5 is empty"),
        ("5:5", "seed range 5:5 is empty"),
        ("a:b", "cannot read seeds"),
        ("1:2:3", "cannot read seeds"),
        ("", "cannot read seeds"),
        ("-2:1", "seeds must be >= 0"),
        ("1,0:3", "must not repeat, got 1"),
        ("0:2000000", "more than 1,000,000"),
    ],
)
def test_bad_seeds_say_what_to_do(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_seeds(text)


def test_env_kwargs_are_read_as_yaml_values() -> None:
    assert parse_env_kwargs(["is_slippery=true", "size=4", "p=0.8", "name=a=b"]) == {
        "is_slippery": True,
        "size": 4,
        "p": 0.8,
        "name": "a=b",
    }
    with pytest.raises(ValueError, match="key=value"):
        parse_env_kwargs(["is_slippery"])


def test_config_entries_may_list_their_seeds() -> None:
    cfg = from_dict(EvalConfig, {
        "engine": {"kind": "random", "args": {"seed": 3}},
        "envs": [{"env": "FrozenLake-v0", "seeds": [11, 3, 7], "kwargs": {"size": 4}}],
        "episode": {"max_turns": 3},
    })  # fmt: skip
    report = run_eval(cfg, progress=False)
    assert [e["seed"] for e in report.episodes] == [3, 7, 11]
    assert report.summary["count"] == 3 and report.overall["episodes"] == 3
    with pytest.raises(ValueError, match="must not repeat"):
        from_dict(EvalConfig, {"envs": [{"env": "FrozenLake-v0", "seeds": [1, 1]}]})
    with pytest.raises(ValueError, match="at least one seed"):
        from_dict(EvalConfig, {"envs": [{"env": "FrozenLake-v0", "seeds": []}]})


def test_model_eval_config(tiny_dir: Path) -> None:
    cfg = model_eval_config(tiny_dir, "FrozenLake-v0", [5, 6], env_kwargs={"is_slippery": True}, history_k=0)
    assert cfg.engine.kind == "hf" and cfg.engine.args["model_path"] == str(tiny_dir)
    assert cfg.envs[0].seeds == [5, 6] and cfg.envs[0].kwargs == {"is_slippery": True}
    assert (cfg.episode.history, cfg.episode.history_k, cfg.episode.temperature) == ("last_k", 0, 0.0)
    assert cfg.episode.max_turns == 20  # FrozenLake-v0's step limit
    assert cfg.source.kind == "local"
    cfg = model_eval_config(tiny_dir, "FrozenLake-v0", [1], env_kwargs={"max_steps": 5}, overrides=["concurrency=2"])
    assert cfg.episode.max_turns == 5 and cfg.episode.history == "full" and cfg.concurrency == 2


@pytest.mark.slow
def test_cli_plays_one_episode_per_seed(tiny_dir: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = _cli(
        "--model", str(tiny_dir), "--env", "FrozenLake-v0",
        "--env-kwargs", "is_slippery=true", "--env-kwargs", "size=4",
        "--seeds", "5000:5008", "--temperature", "0", "--max-turns", "3", "--history-k", "0",
        "--max-tokens-per-turn", "8", "--threads", "1", "--no-progress", "--json", str(report),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| FrozenLake-v0 | 8 |" in proc.stdout
    data = json.loads(report.read_text())
    episodes = data["episodes"]
    assert [e["seed"] for e in episodes] == list(range(5000, 5008))
    for e in episodes:
        assert e["env"] == "FrozenLake-v0" and isinstance(e["success"], bool) and not e["masked"]
        assert 1 <= e["turns"] <= 3 and isinstance(e["reward"], float)
    wins = sum(e["success"] for e in episodes)
    assert data["summary"] == {"count": 8, "masked": 0, "successes": wins, "success_rate": wins / 8}
    env_cfg = data["config"]["envs"][0]
    assert env_cfg["kwargs"] == {"is_slippery": True, "size": 4} and env_cfg["seeds"] == list(range(5000, 5008))
    assert data["config"]["episode"]["history"] == "last_k" and data["config"]["episode"]["history_k"] == 0
    assert data["config"]["engine"] == {
        "kind": "hf",
        "args": {"model_path": str(tiny_dir), "device": "cpu", "num_threads": 1},
    }


@pytest.mark.slow
def test_cli_bad_input_is_one_line(tiny_dir: Path, tmp_path: Path) -> None:
    cases = [
        (["--model", str(tmp_path / "missing"), "--env", "FrozenLake-v0", "--seeds", "0:2"], "does not exist"),
        (["--model", str(tiny_dir), "--env", "FrozenLake-v0", "--seeds", "10:5"], "seed range 10:5 is empty"),
        (["--model", str(tiny_dir), "--env", "FrozenLak-v0", "--seeds", "0:2"], "Did you mean: FrozenLake-v0"),
        (["--model", str(tiny_dir), "--env", "FrozenLake-v0", "--seeds", "0:2", "--env-kwargs", "sise=4"], "sise"),
        (["--model", str(tiny_dir), "--env", "FrozenLake-v0"], "needs --seeds"),
        ([str(tmp_path / "eval.yaml"), "--model", str(tiny_dir)], "not both"),
        ([str(tmp_path / "eval.yaml"), "--temperature", "1", "--history-k", "0"], "--temperature, --history-k belong"),
    ]
    procs = []
    for args, message in cases:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, "-m", "rockroll.cli", "eval", *args]
        procs.append(
            (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env), message)
        )
    for proc, message in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (message, out, err)
        assert err.startswith("error: ") and message in err and "Traceback" not in err + out
        assert len(err.strip().splitlines()) == 1, err
