"""Multi-turn RL pieces on real parts: expert demos in the rollout's chat format, masks that keep env
tokens out of the loss, per-turn advantages on the right tokens, merged identical turns with an
unchanged loss and gradient, the episode caps, and configs that cannot work failing before rollout."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rockroll.agentrl.models.tiny import load_model_and_tokenizer  # noqa: E402
from rockroll.agentrl.rollout.config import EpisodeConfig  # noqa: E402

SLIPPERY = {"is_slippery": True, "size": 4}


def _algo(**over):
    from rockroll.trainer.config import AlgoConfig

    return AlgoConfig(**{"turn_credit": "gigpo", "dynamic_sampling": False, **over})


@pytest.fixture(scope="module")
def tok(tiny_model_dir: Path):
    return load_model_and_tokenizer(tiny_model_dir)[1]


@pytest.mark.parametrize("history", ["full", "last_k"])
def test_demo_masks_cover_exactly_the_assistant_tokens(tok, history: str) -> None:
    from rockroll.trainer.learner.sft import expert_trajectory
    from rockroll.trainer.learner.turns import turn_rows

    episode = EpisodeConfig(history=history, history_k=0, max_turns=20, max_tokens_per_turn=8)
    traj = next(
        t for s in range(50) if len((t := expert_trajectory("FrozenLake-v0", SLIPPERY, tok, episode, s)).turns) >= 3
    )
    layout = "concat" if history == "full" else "per_turn"
    rows = traj.to_samples(layout)
    answers = [tok.decode(t.response_ids, skip_special_tokens=False) for t in traj.turns]
    policy_tokens = [tid for r in rows for tid, m in zip(r.input_ids, r.response_mask, strict=True) if m]
    assert tok.decode(policy_tokens, skip_special_tokens=False) == "".join(answers)
    for r in rows:  # the env's grid and the template's markers are in the rows, never under the mask
        context = tok.decode([t for t, m in zip(r.input_ids, r.response_mask, strict=True) if not m])
        assert "<|im_start|>user" in context and "<answer>" not in context.split("<|im_start|>assistant")[-1]
    # per-turn advantages sit on their own turn's tokens only
    traj.group_id = "g"
    other = expert_trajectory("FrozenLake-v0", SLIPPERY, tok, episode, traj.seed + 1000)
    other.group_id = "g"
    out = turn_rows([traj, other], _algo(), layout)
    for sample, adv in zip(out.samples, out.advantages, strict=True):
        assert all(a == 0.0 for a, m in zip(adv, sample.response_mask, strict=True) if not m)
    if layout == "concat":  # one row: each turn's run of response tokens carries one value
        mask, adv = out.samples[0].response_mask, out.advantages[0]
        runs, prev = [], 0
        for i, m in enumerate(mask):
            if m and not prev:
                runs.append(adv[i])
            if m:
                assert adv[i] == runs[-1]
            prev = m
        assert len(runs) == len(traj.turns)


def test_merged_identical_turns_keep_loss_and_gradient(tiny_model_dir: Path) -> None:
    from rockroll.agentrl.trajectory import TrainSample
    from rockroll.trainer.algos import aggregate_loss, policy_loss
    from rockroll.trainer.learner.batch import collate, token_logprobs
    from rockroll.trainer.learner.turns import TurnRows, merge_identical

    model, tok = load_model_and_tokenizer(tiny_model_dir)
    prompt = tok.encode("<|im_start|>user\nP _ _\n_ O G<|im_end|>\n<|im_start|>assistant\n")
    moves = [tok.encode(f"<answer>{m}</answer>") + [tok.eos_token_id] for m in ("Right", "Down", "Right")]
    samples, advs = [], []
    for resp, a in zip(moves * 3, [0.5, -0.4, 0.9, 0.7, -1.0, 0.3, 0.2, -0.2, 0.4], strict=True):
        samples.append(
            TrainSample(
                prompt + resp, [0] * len(prompt) + [1] * len(resp), [0.0] * (len(prompt) + len(resp)), 0, "g", "e", 0
            )
        )
        advs.append([0.0] * len(prompt) + [a] * len(resp))
    rows = TurnRows(samples, advs, {})
    merged = merge_identical(rows)
    assert len(merged.samples) < len(samples)

    def loss_and_grad(r: TurnRows):
        model.zero_grad()
        batch = collate(r.samples, tok.pad_token_id)
        adv = r.advantage_tensor(batch.input_ids.shape[1])
        mask = batch.response_mask * r.loss_weights()
        with torch.no_grad():
            old, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
        lp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
        lp = lp + 0.05 * (lp.detach() != 0)  # ratios away from 1, so clipping is exercised
        loss_tok, _ = policy_loss("ppo", lp, old, adv, mask, clip_low=0.01, clip_high=0.01)
        loss = aggregate_loss(loss_tok, mask, "token-mean")
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    l1, g1 = loss_and_grad(rows)
    l2, g2 = loss_and_grad(merged)
    assert l1 == pytest.approx(l2, rel=1e-5, abs=1e-7)
    for a, b in zip(g1, g2, strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7)


def test_consecutive_invalid_actions_end_the_episode_as_the_agents_failure() -> None:
    from rockroll.agentrl.engines.random_engine import RandomEngine
    from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
    from rockroll.agentrl.sources.kinds import LocalSource

    engine = RandomEngine(invalid_prob=1.0, seed=0)
    manager = EnvManager(
        engine, LocalSource(), EpisodeConfig(max_turns=20, max_invalid_actions=3, history="last_k", history_k=0)
    )
    traj = asyncio.run(manager.run(EpisodeSpec("FrozenLake-v0", 3, env_kwargs=SLIPPERY)))
    manager.shutdown()
    assert len(traj.turns) == 3 and traj.truncated and not traj.masked
    assert traj.failure is not None and traj.failure.kind == "agent" and traj.failure.error == "InvalidActions"
    assert traj.total_reward == pytest.approx(-0.3)  # the format penalty per invalid action, nothing hidden


def test_warm_start_without_an_expert_fails_at_config_time(tiny_model_dir: Path) -> None:
    import rockroll.envhub as envhub
    from rockroll.envs.config import ConfigError
    from rockroll.trainer.config_io import config_from_dict

    envhub.register("NoExpertLake-v0", "rockroll.envs.frozenlake:FrozenLakeEnv", max_steps=20)
    try:
        data = {"model": {"path": str(tiny_model_dir)}, "rollout": {"env_id": "NoExpertLake-v0"}, "sft": {"steps": 10}}
        with pytest.raises(ConfigError, match="needs an expert for NoExpertLake-v0"):
            config_from_dict(data)
        config_from_dict({**data, "sft": {"steps": 0}})  # RL alone is fine
    finally:
        envhub.deregister("NoExpertLake-v0")


def test_history_beyond_the_context_fails_before_rollout(tok) -> None:
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.rollout.multiturn import check_context

    base = {
        "rollout": {
            "env_kwargs": SLIPPERY,
            "episode": {"history": "last_k", "history_k": 8, "max_context_tokens": 100, "system_prompt": "none"},
        }
    }
    with pytest.raises(ValueError, match="history_k=8 needs about .* rollout.episode.max_context_tokens is 100"):
        check_context(config_from_dict(base), tok)
    check_context(
        config_from_dict({"rollout": {**base["rollout"], "episode": {"history": "last_k", "history_k": 0}}}), tok
    )


def test_reseeded_snapshots_keep_the_state_and_draw_their_own_slips() -> None:
    import rockroll.envhub as envhub
    from rockroll.envs.core import reseed_snapshot

    env = envhub.make("FrozenLake-v0", **SLIPPERY)
    env.reset(seed=11)
    snap = env.get_state()
    outcomes = set()
    for seed in range(12):
        fork = envhub.make("FrozenLake-v0", **SLIPPERY)
        fork.reset(seed=11)
        fork.set_state(reseed_snapshot(snap, seed))
        assert fork.unwrapped.grid == env.unwrapped.grid and fork.get_state()["elapsed_steps"] == snap["elapsed_steps"]
        outcomes.add(fork.step("<answer>Right</answer>")[0])
    assert len(outcomes) > 1  # independent slips: the same move lands on different tiles


def test_fork_values_estimate_state_values_from_continuations(tok) -> None:
    from rockroll.agentrl.engines.random_engine import RandomEngine
    from rockroll.agentrl.sources.kinds import LocalSource
    from rockroll.trainer.learner.sft import expert_trajectory
    from rockroll.trainer.rollout.forks import ForkEstimator

    episode = EpisodeConfig(history="last_k", history_k=0, max_turns=20, max_tokens_per_turn=8)
    trajs = [expert_trajectory("FrozenLake-v0", SLIPPERY, tok, episode, s) for s in range(6)]
    engine = RandomEngine(tok, seed=0)
    est = ForkEstimator(engine, LocalSource(), "FrozenLake-v0", SLIPPERY, episode, k=3, turns=2, gamma=0.9)
    values = asyncio.run(est.values(trajs))
    assert est.failures == 0
    forked = [v for t in trajs for v in values[t.episode_id] if v is not None]
    assert forked and all(0.0 <= v <= 1.0 for v in forked)
    for t in trajs:  # one value slot per turn; only chosen turns (not the first) are forked
        assert len(values[t.episode_id]) == len(t.turns) and values[t.episode_id][0] is None
    # a turn whose replay does not reach the recorded observation yields no value, never a wrong one
    bad = trajs[0]
    if len(bad.turns) > 1:
        bad.turns[1].state_key = "not this grid"
        assert asyncio.run(est._value(bad, 1)) is None and est.failures == 1


def test_exploring_demos_mix_random_candidate_actions_into_the_experts_play(tok) -> None:
    """``sft.explore``: with chance p a demo turn takes a random candidate action (seeded), else the expert's."""
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.learner.sft import expert_trajectory

    episode = EpisodeConfig(history="last_k", history_k=0, max_turns=20, max_tokens_per_turn=8)
    plain = {"is_slippery": False, "size": 4}  # no slips: every deviation from the expert is a drawn action

    def moves(explore: float, seed: int) -> list[str]:
        traj = expert_trajectory("FrozenLake-v0", plain, tok, episode, seed, explore=explore)
        return [t.action_text for t in traj.turns]

    seeds = range(40)
    expert = [moves(0.0, s) for s in seeds]
    assert all(m == moves(0.0, s) for m, s in zip(expert, seeds, strict=True))  # the expert is deterministic
    assert [moves(0.5, s) for s in seeds] == [moves(0.5, s) for s in seeds]  # and so are the seeded draws
    assert any(moves(0.5, s) != m for m, s in zip(expert, seeds, strict=True))
    shortest = sum(len(m) for m in expert)
    assert sum(len(moves(0.5, s)) for s in seeds) > shortest  # random moves leave the shortest path
    answers = {a for s in seeds for a in moves(1.0, s)}
    assert answers <= {f"<answer>{a}</answer>" for a in ("Left", "Down", "Right", "Up")} and len(answers) == 4
    with pytest.raises(ValueError, match="explore"):
        expert_trajectory("FrozenLake-v0", plain, tok, episode, 0, explore=1.5)
    with pytest.raises(ValueError, match="multi-turn"):
        TrainConfig.model_validate({"rollout": {"mode": "plan"}, "sft": {"steps": 1, "explore": 0.1}})


def test_expert_labelled_demos_train_the_experts_move_where_a_random_one_was_played(tok) -> None:
    """``sft.label: expert``: the episode goes on with the action played (random with ``sft.explore``), each turn's
    target is the expert's move in the state it was played from; every episode is kept."""
    import rockroll.envhub as envhub
    from rockroll.envs.frozenlake.exact import expert_policy
    from rockroll.envs.frozenlake.maps import ACTIONS
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.learner.sft import build_turn_demos, expert_trajectory

    episode = EpisodeConfig(history="last_k", history_k=0, max_turns=20, max_tokens_per_turn=8)
    plain = {"is_slippery": False, "size": 4}
    played = differs = 0
    for seed in range(30):
        traj = expert_trajectory("FrozenLake-v0", plain, tok, episode, seed, explore=0.6, label="expert")
        same = expert_trajectory("FrozenLake-v0", plain, tok, episode, seed, explore=0.6)
        assert [t.action_text for t in traj.turns] == [t.action_text for t in same.turns]  # the same play
        env = envhub.make("FrozenLake-v0", **plain)
        env.reset(seed=seed)
        table = expert_policy(env.unwrapped.grid)
        for turn in traj.turns:
            best = ACTIONS[table[(env.unwrapped.row, env.unwrapped.col)]]
            assert tok.decode(turn.response_ids, skip_special_tokens=True) == f"<answer>{best}</answer>"
            assert turn.response_ids[-1] == tok.eos_token_id
            played += 1
            differs += turn.action_text != f"<answer>{best}</answer>"
            env.step(turn.action_text)
    assert played > 60 and differs > 10  # random moves were played, and labelled with the expert's
    kept = build_turn_demos("FrozenLake-v0", {"size": 4}, tok, episode, range(20), explore=0.6, label="expert")
    taken = build_turn_demos("FrozenLake-v0", {"size": 4}, tok, episode, range(20), explore=0.6)
    assert len(kept) > len(taken)  # failed episodes stay: their targets are the expert's moves
    with pytest.raises(ValueError, match="label"):
        expert_trajectory("FrozenLake-v0", plain, tok, episode, 0, label="best")
    with pytest.raises(ValueError, match="history: last_k"):
        TrainConfig.model_validate(
            {"rollout": {"mode": "multiturn", "episode": {"history": "full"}}, "sft": {"steps": 1, "label": "expert"}}
        )
