"""The warm start's demonstrator can be another expert than the env spec's (rollout.expert)."""

from __future__ import annotations

from pathlib import Path

from rockroll.agentrl.models.tiny import load_tokenizer
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.trainer.learner.sft import build_turn_demos, expert_trajectory

SEARCHER = "rockroll.envs.alfworld.searcher:expert"


def test_demos_follow_the_named_expert(tiny_model_dir: Path) -> None:
    tok = load_tokenizer(tiny_model_dir)
    episode = EpisodeConfig(max_turns=40, history="full", system_prompt="none")
    longer = 0
    for seed in range(12):
        spec = expert_trajectory("ALFWorld-v0", {}, tok, episode, seed)
        searched = expert_trajectory("ALFWorld-v0", {}, tok, episode, seed, expert=SEARCHER)
        assert spec.success and searched.success
        longer += len(searched.turns) > len(spec.turns)  # it searches where the planner walks straight there
    assert longer >= 6
    rows = build_turn_demos("ALFWorld-v0", {}, tok, episode, [0, 1], expert=SEARCHER)
    assert len(rows) == 2  # full history: one row per episode
