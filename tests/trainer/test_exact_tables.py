"""The pieces of exact FrozenLake validation that the trainer and ``bench/learning/frozenlake_exact_eval.py`` share:
a map's cells, the answers' table scored by dynamic programming, and the answer trie built once per tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockroll.envs.frozenlake.exact import expert_policy, policy_success
from rockroll.envs.frozenlake.maps import ACTIONS
from rockroll.trainer.evaluation.exact import cell_action, map_cells, table_success

ROOT = Path(__file__).resolve().parents[2]
KWARGS = {"is_slippery": True, "size": 4}


def test_an_answer_names_a_move_or_none() -> None:
    assert [cell_action(f"<answer>{a}</answer>") for a in ACTIONS] == [0, 1, 2, 3]
    assert cell_action("<answer> right </answer>") == ACTIONS.index("Right")
    assert cell_action("<answer>Jump</answer>") is None and cell_action("no answer") is None


def test_the_table_of_answers_scores_as_its_policy_and_an_invalid_cell_as_left() -> None:
    maps = [map_cells("FrozenLake-v0", KWARGS, seed) for seed in (3, 4)]
    grids = [g for g, _ in maps]
    where = [(m, r, c) for m, (_, cells) in enumerate(maps) for r, c, _ in cells]
    experts = [expert_policy(g) for g in grids]
    answers = [f"<answer>{ACTIONS[experts[m][(r, c)]]}</answer>" for m, r, c in where]
    success, invalid = table_success(grids, where, answers, 20)
    assert success == [pytest.approx(policy_success(g, 20, p)) for g, p in zip(grids, experts, strict=True)]
    assert invalid == [0, 0]
    m, r, c = where[0]
    success, invalid = table_success(grids, where, ["<answer>Jump</answer>", *answers[1:]], 20)
    assert invalid == [1, 0]
    assert success[0] == pytest.approx(policy_success(grids[0], 20, {**experts[0], (r, c): 0}))


def test_the_answer_trie_is_built_once_and_background_validation_reuses_it(tiny_model_dir: Path) -> None:
    pytest.importorskip("torch")
    from rockroll.agentrl.models.tiny import load_model_and_tokenizer
    from rockroll.agentrl.rollout.answers import declared_trie
    from rockroll.trainer.config_io import load_config
    from rockroll.trainer.evaluation.background import background_validation
    from rockroll.trainer.evaluation.exact import FrozenLakeExact
    from rockroll.trainer.evaluation.selection import BestCheckpoint

    tok = load_model_and_tokenizer(tiny_model_dir)[1]
    cfg = load_config(ROOT / "configs/frozenlake_slippery.yaml")
    exact = FrozenLakeExact(cfg, cfg.rollout.env_mix()[0])
    trie = exact.answers(tok)
    assert trie is not None and exact.answers(tok) is trie
    assert trie.sequences == declared_trie(tok, "FrozenLake-v0").sequences

    class _Rollout:
        def difficulty(self, seed: int, tag: str | None = None) -> int:
            return 0

    background = background_validation(cfg, BestCheckpoint([1, 2], exact), _Rollout(), tok)
    assert background is not None
    try:
        assert background.score.trie is trie  # type: ignore[attr-defined]
    finally:
        background.close()
    off = load_config(ROOT / "configs/frozenlake_slippery.yaml", ["rollout.episode.restrict_answers=false"])
    assert FrozenLakeExact(off, off.rollout.env_mix()[0]).answers(tok) is None
