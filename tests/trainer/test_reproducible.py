"""Same seed, same run: two multi-turn runs of one config on CPU log identical metrics (all but
timings), and a run stopped after a checkpoint and resumed continues the seed stream, matching the
uninterrupted run step for step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests.trainer.test_cli_runs import _train  # noqa: E402

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "frozenlake_slippery.yaml")
# timings, and the float noise between the engine's and the trainer's logprobs of one token (the two
# forwards batch differently, so their difference varies at 1e-8 with the machine's threads)
TIMING = ("time/", "_per_s", "sft/time", "logprob_gap")


def _args(model: Path, runs: Path, name: str, steps: int, *extra: str) -> list[str]:
    """A small multi-turn run on slippery maps: sampled turns (temperature 1.5), 2 groups of 4 a step."""
    return [
        CONFIG, f"model.path={model}", "model.build_tiny=false", f"logging.run_dir={runs}", f"name={name}",
        f"total_steps={steps}", "time_budget_s=0", "rollout.scheduler.group_size=4",
        "rollout.scheduler.num_env_groups=2",
        "rollout.eval_episodes=4", "rollout.select_episodes=4", "rollout.eval_every=0", "rollout.episode.max_turns=8",
        "algo.dynamic_sampling=false", "optim.micro_batch_size=16", "sft.steps=2", "sft.num_demos=10",
        "sft.batch_size=4", "checkpoint.every=1", "logging.tensorboard=false", *extra,
    ]  # fmt: skip


def _metrics(run: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {r["step"]: {k: v for k, v in r.items() if not any(t in k for t in TIMING)} for r in rows}


@pytest.mark.slow
def test_same_seed_same_run_and_resume_continues_the_seed_stream(tiny_model_dir: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        out = _train(*_args(tiny_model_dir, runs, name, 3))
        assert out.returncode == 0, out.stderr[-3000:]
    a, b = _metrics(runs / "a"), _metrics(runs / "b")
    assert sorted(a) == [-1, 0, 1, 2]
    for step in a:
        assert a[step] == b[step], (step, {k: (v, b[step].get(k)) for k, v in a[step].items() if v != b[step].get(k)})
    assert a[0]["actor/pg_loss"] != a[1]["actor/pg_loss"]  # the steps are not one batch played again

    out = _train(*_args(tiny_model_dir, runs, "cut", 2))
    assert out.returncode == 0, out.stderr[-3000:]
    out = _train(*_args(tiny_model_dir, runs, "cut", 3), "--resume")
    assert out.returncode == 0 and "(resuming at step 2)" in out.stdout, out.stderr[-3000:]
    resumed = _metrics(runs / "cut")
    keys = [k for k in a[2] if k.startswith(("actor/", "rollout/", "env/"))]
    assert len(keys) > 5
    assert {k: resumed[2][k] for k in keys} == {k: a[2][k] for k in keys}
