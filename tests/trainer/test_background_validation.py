"""Exact validation in the background: the one-choice trie, the scorer against the engine's greedy answers
on the same maps, the order and bound of background validations, and a run that validates this way."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "frozenlake_slippery.yaml"


def test_choice_point_of_a_trie() -> None:
    from rockroll.agentrl.engines.choices import AnswerTrie

    assert AnswerTrie([[5, 1, 9, 3], [5, 2, 3]]).choice_point() == ((5,), {1: (5, 1, 9, 3), 2: (5, 2, 3)})
    assert AnswerTrie([[1, 3], [2, 3]]).choice_point() == ((), {1: (1, 3), 2: (2, 3)})
    assert AnswerTrie([[1, 2, 3], [1, 4, 3], [5, 3]]).choice_point() is None  # a second choice after 1
    assert AnswerTrie([[1, 3]]).choice_point() is None  # no choice at all


def _cfg(model: Path, *extra: str):
    from rockroll.trainer.config_io import load_config

    return load_config(CONFIG, [f"model.path={model}", "model.build_tiny=false", *extra])


def test_scorer_matches_the_engines_greedy_answers(small_model_dir: Path) -> None:
    """The background scorer's table (one forward, argmax over the move tokens) scores exactly what the rollout
    engine's restricted greedy generation scores, on the same maps, split by path length alike."""
    from rockroll.agentrl.engines.choices import AnswerTrie
    from rockroll.agentrl.engines.hf import HFEngine
    from rockroll.agentrl.models.tiny import load_model_and_tokenizer
    from rockroll.agentrl.rollout.answers import declared_actions
    from rockroll.trainer.evaluation.background import FirstChoiceScorer
    from rockroll.trainer.evaluation.exact import FrozenLakeExact
    from rockroll.trainer.rollout.multiturn import LoopThread

    cfg = _cfg(small_model_dir)
    env = cfg.rollout.env_mix()[0]
    model, tok = load_model_and_tokenizer(small_model_dir)
    with torch.no_grad():  # a policy with preferences of its own, not the fresh model's near-uniform ones
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)

    class _Rollout:
        loop = LoopThread()
        engine = HFEngine(model=model, tokenizer=tok, seed=0)

        def difficulty(self, seed: int, tag: str | None = None) -> int:
            return seed % 3

    rollout = _Rollout()
    seeds = list(range(1_500_000, 1_500_040))
    try:
        by_engine = FrozenLakeExact(cfg, env)(rollout, seeds)
    finally:
        rollout.loop.close()
    trie = AnswerTrie.from_answers(tok, declared_actions(env.env_id))
    scorer = FirstChoiceScorer(cfg, FrozenLakeExact(cfg, env), tok, trie, lambda s: s % 3)
    by_scorer = scorer(seeds, model.state_dict())
    assert by_scorer == pytest.approx(by_engine)
    assert 0.0 < by_engine["select/FrozenLake/success"] < 1.0 and by_engine["select/FrozenLake/invalid_cells"] == 0
    assert "select/FrozenLake/success_len2" in by_scorer


def test_background_validations_record_in_step_order_and_stay_bounded() -> None:
    """Results are recorded in step order (ties go to the later step), the snapshot is the weights at submit
    time, a third submit waits while two are unfinished, and ``wait`` collects everything."""
    from rockroll.trainer.evaluation.background import BackgroundValidation
    from rockroll.trainer.evaluation.selection import BestCheckpoint

    gates = [threading.Event() for _ in range(4)]
    scores = iter([0.4, 0.5, 0.5, 0.45])
    started: list[float] = []

    def score(seeds, weights):
        started.append(float(weights["w"]))
        assert gates[len(started) - 1].wait(30)
        return {"select/fl/success": next(scores)}

    best = BestCheckpoint([1, 2])
    bg = BackgroundValidation(best, score)
    w = torch.tensor([0.0])
    try:
        assert bg.submit(0, {"w": w}, ["fl"]) == {}
        w += 1  # the trainer's weights move on: the queued validation keeps its snapshot
        gates[0].set()
        assert bg.submit(1, {"w": w}, ["fl"]) in (
            {},
            {"select/fl/success": 0.4, "select/fl/best": 0.4, "select/step": 0.0},
        )
        # two unfinished (step 1 running or queued): the third submit blocks until one ends
        done = threading.Event()

        def third() -> None:
            bg.submit(2, {"w": w + 1}, ["fl"])
            done.set()

        t = threading.Thread(target=third)
        t.start()
        assert not done.wait(0.5)
        gates[1].set()
        assert done.wait(30)
        t.join(30)
        gates[2].set()
        gates[3].set()
        out = bg.submit(3, {"w": w + 2}, ["fl"], wait=True)
        assert out["select/step"] == 3.0 and out["select/fl/success"] == 0.45
        assert started == [0.0, 1.0, 2.0, 3.0]
        assert best.step == 2 and best.success == 0.5 and float(best.weights["w"]) == 2.0  # the later of the ties
        assert best.last_step == 3
    finally:
        for g in gates:
            g.set()
        bg.close()


def test_a_run_validates_in_the_background(small_model_dir: Path, tmp_path: Path) -> None:
    """A short main-config run with validation every 2 steps: the background path is taken (restricted
    FrozenLake moves), every validated step is recorded, and the report names the exported step."""
    from rockroll.trainer.config_io import load_config
    from rockroll.trainer.pipeline import run_training

    cfg = load_config(
        CONFIG,
        [
            f"model.path={small_model_dir}", "model.build_tiny=false", f"logging.run_dir={tmp_path}", "name=bg",
            "total_steps=6", "rollout.scheduler.group_size=4", "rollout.scheduler.num_env_groups=2",
            "rollout.eval_episodes=4", "rollout.select_episodes=20", "rollout.select_every=2",
            "rollout.episode.max_turns=6", "sft.steps=2", "sft.num_demos=8", "sft.batch_size=4",
            "logging.tensorboard=false", "logging.progress=false",
        ],
    )  # fmt: skip
    summary = run_training(cfg)
    rows = [json.loads(line) for line in (tmp_path / "bg" / "metrics.jsonl").read_text().splitlines()]
    validated = sorted(int(r["select/step"]) for r in rows if "select/step" in r)
    assert validated[-1] == 5 and set(validated) <= {1, 3, 5} and len(validated) >= 1
    assert summary["select_exact"] and summary["select_last_step"] == 5
    assert summary["select_best_step"] in (1, 3, 5)
    assert "Exported step" in summary["report"]
