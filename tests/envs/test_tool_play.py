"""Experts that call tools work wherever experts are used: ``play_episode``, ``rockroll play`` and the warm
start's demos (their tool turns written in the model's tool-call format, which parses back to the calls)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import rockroll.envhub as envhub
from rockroll.agentrl.models.char_tokenizer import CharTokenizer
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.tools import get_parser
from rockroll.cli.main import app
from rockroll.envs.experts import expert_for
from rockroll.envs.play import RANDOM_TEXT_TURN, describe_action, play_episode, random_tool_turn
from rockroll.envs.tools import ToolAction, ToolCall
from rockroll.trainer.learner.sft import expert_trajectory, response_tokens

HELDOUT = 1_000_000  # rollout.eval_seed_offset's default: held-out seeds start here
SEEDS = range(HELDOUT, HELDOUT + 12)


def _expert_turns(kwargs: dict, seed: int) -> list[ToolAction]:
    """The expert's turns of one episode, played straight."""
    env = envhub.make("Lookup-v0", **kwargs)
    env.reset(seed=seed)
    expert, turns = expert_for(env), []
    while (turn := expert()) is not None:
        turns.append(turn)
        if env.step(turn)[2]:
            break
    return turns


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_expert_play_solves_heldout_seeds_at_its_rate(difficulty: int) -> None:
    env = envhub.make("Lookup-v0", difficulty=difficulty)
    seen: list[str] = []
    results = [play_episode(env, "expert", s, on_step=lambda a, o, r: seen.append(a)) for s in SEEDS]
    assert all(r.success and r.terminated and r.total_reward == 1.0 for r in results)  # the expert's rate: 100%
    assert all(r.steps == difficulty + 2 and r.tool_calls == r.steps for r in results)
    assert all(r.invalid_actions == r.unknown_tools == r.bad_arguments == 0 for r in results)
    assert seen[0].startswith('find({"name": ') and seen[difficulty + 1].startswith('answer({"value": ')


def test_random_policy_plays_tool_envs() -> None:
    env = envhub.make("Lookup-v0")
    results = [play_episode(env, "random", s) for s in SEEDS]
    assert all(r.terminated or r.truncated for r in results)
    assert all(r.bad_arguments == r.unknown_tools == 0 for r in results)  # tool_examples are valid calls
    assert sum(r.tool_calls for r in results) > 0
    assert sum(r.success for r in results) < len(results)
    again = [play_episode(env, "random", s) for s in SEEDS]
    assert [(r.steps, r.tool_calls, r.success) for r in again] == [(r.steps, r.tool_calls, r.success) for r in results]


def test_bad_calls_are_counted_per_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    import rockroll.envs.play as play

    bad = [
        ToolAction("", (ToolCall("c1", "search", {"q": "Ann"}), ToolCall("c2", "get", {"key": "p1"}))),
        ToolAction("", (ToolCall("c3", "find", {}),)),
    ]

    def then_the_expert(env: object):
        real = expert_for(env)
        return lambda: bad.pop(0) if bad else real()

    monkeypatch.setattr(play, "expert_for", then_the_expert)
    result = play_episode(envhub.make("Lookup-v0", difficulty=1), "expert", HELDOUT)
    assert result.success and result.steps == 2 + 3 and result.tool_calls == 3 + 3
    assert (result.unknown_tools, result.bad_arguments, result.invalid_actions) == (1, 2, 2)


def test_random_tool_turn_picks_every_example_and_a_text_turn() -> None:
    import numpy as np

    env = envhub.make("Lookup-v0")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    picked = {describe_action(random_tool_turn(env, rng)).split("(")[0] for _ in range(60)}
    assert picked == {"find", "get", "answer", RANDOM_TEXT_TURN}


def test_a_text_env_plays_as_before() -> None:
    env = envhub.make("FrozenLake-v0", is_slippery=False)
    result = play_episode(env, "expert", 3)
    assert result.success and result.tool_calls == 0


def test_describe_action() -> None:
    turn = ToolAction("Looking up.", (ToolCall("c1", "find", {"name": "Ann"}), ToolCall("c2", "get", {"id": "p1"})))
    assert describe_action(turn) == 'Looking up.\nfind({"name": "Ann"})\nget({"id": "p1"})'
    assert describe_action("<answer>Left</answer>") == "<answer>Left</answer>"


@pytest.mark.parametrize("history", ["full", "last_k"])
def test_sft_demo_turns_parse_back_to_the_experts_calls(history: str) -> None:
    tok, kwargs, seed = CharTokenizer(), {"difficulty": 3}, 5
    episode = EpisodeConfig(max_turns=10, history=history, max_tokens_per_turn=96)
    traj = expert_trajectory("Lookup-v0", kwargs, tok, episode, seed)
    expected = _expert_turns(kwargs, seed)
    assert traj.success and len(traj.turns) == len(expected) == 5
    hermes = get_parser("hermes")
    for turn, want in zip(traj.turns, expected, strict=True):
        assert turn.response_ids[-1] == tok.eos_token_id
        parsed = hermes.parse(tok.decode(turn.response_ids, skip_special_tokens=True))
        assert parsed.ok and parsed.text == want.text
        assert [(c.name, dict(c.arguments)) for c in parsed.calls] == [(c.name, dict(c.arguments)) for c in want.calls]
    # the results of earlier calls reach the next prompt (as the env's observation)
    assert '{"id": "p' in tok.decode(traj.turns[1].prompt_ids)


def test_sft_demo_uses_the_configured_parser_and_text_experts_are_unchanged() -> None:
    tok = CharTokenizer()
    turn = ToolAction("", (ToolCall("c1", "find", {"name": "Ann"}),))
    mistral = get_parser("mistral")
    ids = response_tokens(tok, turn, mistral)
    assert mistral.parse(tok.decode(ids, skip_special_tokens=True)).calls[0].name == "find"
    assert tok.decode(response_tokens(tok, "Left"), skip_special_tokens=True) == "<answer>Left</answer>"
    with pytest.raises(ValueError, match="parser"):
        response_tokens(tok, turn)
    episode = EpisodeConfig(max_turns=10, tool_call_parser="llama3_json")
    traj = expert_trajectory("Lookup-v0", {"difficulty": 1}, tok, episode, 0)
    assert traj.success and "<tool_call>" not in tok.decode(traj.turns[0].response_ids)
    text = expert_trajectory("FrozenLake-v0", {"is_slippery": False}, tok, EpisodeConfig(max_turns=20), 3)
    assert text.success and all(t.action_text.startswith("<answer>") for t in text.turns)


def test_sft_explore_on_a_tool_env_draws_tool_examples() -> None:
    tok, episode = CharTokenizer(), EpisodeConfig(max_turns=10, history="last_k")
    trajs = [expert_trajectory("Lookup-v0", {}, tok, episode, s, explore=0.5, label="expert") for s in range(6)]
    assert all(t.turns for t in trajs)
    assert any('<tool_call>\n{"name": "answer", "arguments": {"value": 0}}' in t.turns[-1].action_text for t in trajs)


def test_cli_play_shows_tool_calls() -> None:
    out = CliRunner().invoke(app, ["play", "Lookup-v0", "difficulty=2", "--seed", str(HELDOUT)])
    assert out.exit_code == 0, out.output
    assert 'find({"name": ' in out.output and '  -> {"id": "p' in out.output
    assert 'answer({"value": ' in out.output and "success=True" in out.output
    random = CliRunner().invoke(app, ["play", "Lookup-v0", "--policy", "random", "--seed", "1"])
    assert random.exit_code == 0, random.output
    assert "steps=" in random.output
