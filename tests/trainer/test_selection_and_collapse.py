"""Checkpoint selection (ties go later, exact validation where it exists), the cap-hit metric and its
warning, and the main job's fixed-step config."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockroll.agentrl.trajectory import Trajectory, Turn

ROOT = Path(__file__).resolve().parents[2]


class _FakeRollout:
    tags = ["fl"]

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores
        self.played = 0

    def evaluate(self, seeds, prefix="eval"):
        self.played += 1
        return {f"{prefix}/fl/success": self.scores.pop(0)}


def _weights(v: float):
    torch = pytest.importorskip("torch")
    return {"w": torch.tensor([v])}


def test_ties_go_to_the_later_step() -> None:
    from rockroll.trainer.evaluation.selection import BestCheckpoint

    best = BestCheckpoint([1, 2, 3])
    rollout = _FakeRollout([0.40, 0.44, 0.44, 0.43])
    for step in range(4):
        best.consider(rollout, step, _weights(float(step)))
    assert best.step == 2 and best.success == pytest.approx(0.44)
    assert float(best.weights["w"]) == 2.0
    assert best.last_step == 3 and best.last_success == pytest.approx(0.43)


def test_exact_validation_is_used_when_present() -> None:
    from rockroll.trainer.evaluation.selection import BestCheckpoint

    calls = []

    def exact(rollout, seeds):
        calls.append(list(seeds))
        return {"select/fl/success": 0.5, "select/fl/exact": 1.0}

    rollout = _FakeRollout([0.1])
    best = BestCheckpoint([7, 8], exact)
    out = best.consider(rollout, 0, _weights(0.0))
    assert calls == [[7, 8]] and rollout.played == 0
    assert out["select/fl/success"] == 0.5 and best.success == 0.5


def test_frozenlake_main_job_gets_an_exact_validator() -> None:
    from rockroll.trainer.config_io import load_config
    from rockroll.trainer.evaluation.exact import FrozenLakeExact, exact_validator

    cfg = load_config(ROOT / "configs/frozenlake_slippery.yaml")

    class _Driver:
        loop = engine = None

    assert isinstance(exact_validator(cfg, _Driver()), FrozenLakeExact)
    assert exact_validator(cfg, object()) is None  # no engine loop (plan mode's driver)
    two = load_config(ROOT / "configs/frozenlake_slippery.yaml", ["rollout.episode.history_k=2"])
    assert exact_validator(two, _Driver()) is None  # the policy sees more than the grid: not a cell table
    grid, cells = FrozenLakeExact(cfg, cfg.rollout.env_mix()[0]).cells(500_000)
    assert len(grid) == 4 and cells and all(grid[r][c] not in "HG" for r, c, _ in cells)


def _traj(reasons: list[str]) -> Trajectory:
    turns = [Turn([1], [2], [0.0], 0, finish_reason=r) for r in reasons]
    return Trajectory("e", "g", "FrozenLake-v0", 0, turns=turns)


def test_cap_hit_share_on_a_fake_batch() -> None:
    from rockroll.trainer.learner.learn import cap_hit_share

    batch = [_traj(["stop", "length", "stop"]), _traj(["length"]), _traj([])]
    assert cap_hit_share(batch) == pytest.approx(2 / 4)
    assert cap_hit_share([]) == 0.0


def test_cap_hits_warn_in_the_progress_line_and_the_report() -> None:
    from rockroll.trainer.config_io import load_config
    from rockroll.trainer.evaluation.selection import run_notes
    from rockroll.trainer.pipeline import _cap_hits, _env_metrics
    from rockroll.trainer.run.progress import step_line

    cfg = load_config(ROOT / "configs/frozenlake_slippery.yaml")

    class _Run:
        summary: dict = {}

    run = _Run()
    run.cfg = cfg
    ok = _env_metrics([_traj(["stop"] * 9 + ["length"])], ["fl"])
    _cap_hits(run, 3, ok)
    assert ok["rollout/cap_hit_share"] == pytest.approx(0.1) and "rollout/cap_hit_alert" not in ok
    assert "WARNING" not in step_line(3, 10, ok)
    bad = _env_metrics([_traj(["length"] * 3 + ["stop"])], ["fl"])
    _cap_hits(run, 4, bad)
    assert bad["rollout/cap_hit_alert"] == 1.0
    assert "WARNING 75% of answers hit the token cap" in step_line(4, 10, bad)
    notes = run_notes(run.summary, cfg)
    assert "WARNING" in notes and "step 5" in notes and "75%" in notes


def test_report_names_the_exported_step_next_to_the_last() -> None:
    from rockroll.trainer.config_io import load_config
    from rockroll.trainer.evaluation.selection import BestCheckpoint, run_notes, selection_summary

    cfg = load_config(ROOT / "configs/frozenlake_slippery.yaml")
    best = BestCheckpoint([1], lambda r, s: {"select/fl/success": [0.5, 0.6, 0.55][len(seen)]})
    seen: list[int] = []
    for step in (24, 49, 74):
        best.consider(_FakeRollout([]), step, _weights(0.0))
        seen.append(step)
    notes = run_notes(selection_summary(best, 74), cfg)
    assert "Exported step 50: exact validation 60.0%" in notes and "last validated step 75: 55.0%" in notes


def test_eta_in_the_progress_line() -> None:
    from rockroll.trainer.run.progress import step_line

    assert "eta 1m30s" in step_line(9, 100, {"time/run_s": 10.0})
    assert "eta" not in step_line(99, 100, {"time/run_s": 10.0})


def test_main_job_runs_a_fixed_number_of_steps() -> None:
    from rockroll.trainer.config_io import load_config

    cfg = load_config(ROOT / "configs/frozenlake_slippery.yaml")
    assert cfg.total_steps == 2000 and cfg.time_budget_s == 0
    assert cfg.rollout.episode.restrict_answers and cfg.rollout.select_episodes >= 200
    assert "time_budget_s" not in (ROOT / "configs/frozenlake_slippery.yaml").read_text()


def test_validation_runs_on_its_own_cadence_apart_from_played_evaluation() -> None:
    """``select_every`` validates (exactly, where it can) without a played evaluation; None keeps them together;
    both run after the last step."""
    from rockroll.trainer.config_io import load_config
    from rockroll.trainer.pipeline import _due

    cfg = load_config(ROOT / "configs/frozenlake_slippery.yaml")
    apart = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"eval_every": 0, "select_every": 25})})
    due = [(s, _due(apart, s, s == 99)) for s in range(100)]
    assert [s for s, (e, v) in due if v] == [24, 49, 74, 99]
    assert [s for s, (e, v) in due if e] == [99]
    together = cfg.model_copy(
        update={"rollout": cfg.rollout.model_copy(update={"eval_every": 10, "select_every": None})}
    )
    assert all(_due(together, s, False) == ((s + 1) % 10 == 0,) * 2 for s in range(50))
    never = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"eval_every": 10, "select_every": 0})})
    assert not any(_due(never, s, False)[1] for s in range(50)) and _due(never, 60, True) == (True, True)
