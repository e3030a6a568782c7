"""Per-turn credit (rockroll.trainer.algos.turn_credit) against values computed by hand (arithmetic in comments)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from rockroll.trainer import algos
from rockroll.trainer.algos import TurnCreditConfig, TurnEpisode, turn_advantages

S2 = math.sqrt(0.5)  # unbiased std of {0, 1}


def close(got: list[list[float]], want: list[list[float]], tol: float = 1e-5) -> None:
    assert [len(r) for r in got] == [len(r) for r in want], (got, want)
    for g_row, w_row in zip(got, want, strict=True):
        for g, w in zip(g_row, w_row, strict=True):
            assert g == pytest.approx(w, abs=tol), (got, want)


def gigpo_batch() -> list[TurnEpisode]:
    """Group g: returns R = 1, 1, 0; keys A/B/C shared across episodes. Group h: one episode, key A."""
    return [
        TurnEpisode("g", [0, 0, 1], ["A", "B", "C"], success=True),
        TurnEpisode("g", [0, 1], ["A", "C"], success=True),
        TurnEpisode("g", [0, 0], ["A", "B"], success=False),
        TurnEpisode("h", [1], ["A"], success=True),
    ]


# ----------------------------------------------------------------------------- episode
def test_episode_grpo_and_dr_grpo() -> None:
    # group g: R = 1, 1, 0 ; mean 2/3 ; deviations 1/3, 1/3, -2/3 ; unbiased var = (1/9+1/9+4/9)/2 = 1/3
    # std = 0.57735 -> 0.57735, 0.57735, -1.1547 ; group h has one episode -> 0
    s = math.sqrt(1 / 3)
    out = turn_advantages(gigpo_batch(), mode="episode")
    close(out.advantages, [[1 / 3 / s] * 3, [1 / 3 / s] * 2, [-2 / 3 / s] * 2, [0.0]])
    assert out.returns is None
    dr = turn_advantages(gigpo_batch(), mode="episode", norm_std=False)
    close(dr.advantages, [[1 / 3] * 3, [1 / 3] * 2, [-2 / 3] * 2, [0.0]])
    m = out.metrics
    assert m["turn_credit/episodes"] == 4 and m["turn_credit/turns"] == 8
    assert m["turn_credit/single_episode_groups"] == 1 and m["turn_credit/equal_return_groups"] == 0
    assert m["turn_credit/success_rate"] == pytest.approx(0.75)
    assert m["turn_credit/return_mean"] == pytest.approx(3 / 4)


def test_episode_return_is_the_sum_of_turn_rewards() -> None:
    # R = 0.5 + 0.5 = 1 and R = 0 + 0 = 0 -> +-1/sqrt(2) on every turn
    out = turn_advantages([TurnEpisode("g", [0.5, 0.5]), TurnEpisode("g", [0.0, 0.0])])
    close(out.advantages, [[S2, S2], [-S2, -S2]])  # (1 - .5) / .7071 = .7071


def test_all_equal_returns_and_single_episode_groups_give_zero() -> None:
    # 0.1 + 0.2 != 0.3 in floats: still "all equal", not blown up by the std to +-0.7
    eps = [TurnEpisode("g", [0.1, 0.2]), TurnEpisode("g", [0.3]), TurnEpisode("h", [5.0, 1.0])]
    for norm in (True, False):
        out = turn_advantages(eps, mode="episode", norm_std=norm)
        assert out.advantages == [[0.0, 0.0], [0.0], [0.0, 0.0]]
    assert out.metrics["turn_credit/equal_return_groups"] == 1
    assert out.metrics["turn_credit/single_episode_groups"] == 1


def test_empty_episodes_get_no_turns_and_stay_out_of_the_group() -> None:
    # the empty episode (R would be 0) must not pull the mean: R = 1, 0 -> +-0.7071
    eps = [TurnEpisode("g", [1.0], ["A"]), TurnEpisode("g", [0.0], ["B"]), TurnEpisode("g", [])]
    for mode in ("episode", "gigpo", "fork"):
        out = turn_advantages(eps, mode=mode)
        close(out.advantages, [[S2], [-S2], []])
        assert out.metrics["turn_credit/empty_episodes"] == 1
    gae = turn_advantages([TurnEpisode("g", [])], mode="gae")
    assert gae.advantages == [[]] and gae.returns == [[]]
    assert turn_advantages([]).advantages == []


# ----------------------------------------------------------------------------- gigpo
def test_gigpo_anchor_states_mean_centred() -> None:
    # gamma 0.5: G(e0) = [0.25, 0.5, 1], G(e1) = [0.5, 1], G(e2) = [0, 0], G(e3) = [1]
    # step groups of g: A = {e0t0 .25, e1t0 .5, e2t0 0} mean .25 -> 0, +.25, -.25
    #                   B = {e0t1 .5, e2t1 0} mean .25 -> +.25, -.25 ; C = {e0t2 1, e1t1 1} -> 0, 0
    # group h's A is its own step group of one (not pooled with g's A) -> 0
    # episode adv (Dr. GRPO): 1/3, 1/3, -2/3, 0
    out = turn_advantages(gigpo_batch(), mode="gigpo", gamma=0.5, norm_std=False)
    close(
        out.advantages,
        [[1 / 3, 1 / 3 + 0.25, 1 / 3], [1 / 3 + 0.25, 1 / 3], [-2 / 3 - 0.25, -2 / 3 - 0.25], [0.0]],
    )
    assert out.metrics["turn_credit/step_grouped_fraction"] == pytest.approx(7 / 8)
    assert out.metrics["turn_credit/step_adv_abs_mean"] == pytest.approx(4 * 0.25 / 8)
    # step_weight 2 doubles the step part; step_weight 0 is the episode mode
    w2 = turn_advantages(gigpo_batch(), mode="gigpo", gamma=0.5, norm_std=False, step_weight=2.0)
    close(w2.advantages, [[1 / 3, 1 / 3 + 0.5, 1 / 3], [1 / 3 + 0.5, 1 / 3], [-2 / 3 - 0.5] * 2, [0.0]])
    w0 = turn_advantages(gigpo_batch(), mode="gigpo", step_weight=0.0)
    close(w0.advantages, turn_advantages(gigpo_batch(), mode="episode").advantages)


def test_gigpo_step_std_normalisation() -> None:
    # A: G = .25, .5, 0 ; deviations 0, .25, -.25 ; var = (0 + .0625 + .0625) / 2 = .0625 ; std .25 -> 0, 1, -1
    # B: G = .5, 0 ; deviations +-.25 ; var = .125 / 1 ; std = .35355 -> +-0.70711 ; C: all equal -> 0
    out = turn_advantages(gigpo_batch(), mode="gigpo", gamma=0.5, norm_std=False, step_norm_std=True, step_weight=1.0)
    close(out.advantages, [[1 / 3, 1 / 3 + S2, 1 / 3], [1 / 3 + 1, 1 / 3], [-2 / 3 - 1, -2 / 3 - S2], [0.0]])


def test_gigpo_revisits_within_one_episode_share_a_step_group() -> None:
    # one episode visits A twice; rewards [0, 1, 0], gamma 1: G = [1, 1, 0]
    # A = {t0 1, t2 0} mean .5 -> +.5, -.5 ; B alone -> 0 ; single-episode group -> episode adv 0
    out = turn_advantages([TurnEpisode("g", [0, 1, 0], ["A", "B", "A"])], mode="gigpo", gamma=1.0)
    close(out.advantages, [[0.5, 0.0, -0.5]])


def test_gigpo_needs_state_keys() -> None:
    with pytest.raises(ValueError, match=r"episode 1 \(group 'g'\): 'gigpo' needs state_keys"):
        turn_advantages([TurnEpisode("g", [1], ["A"]), TurnEpisode("g", [0])], mode="gigpo")


# ----------------------------------------------------------------------------- fork
def test_fork_value_and_continuation_return() -> None:
    assert algos.fork_value([1.0, 0.0, 0.5, 0.5]) == pytest.approx(0.5)
    assert algos.continuation_return([0.0, 1.0], gamma=0.5) == pytest.approx(0.5)  # 0 + .5 * 1
    # with a bootstrap for the cut-off rest: 0 + .5 * 1 + .25 * 2 = 1.0
    assert algos.continuation_return([0.0, 1.0], gamma=0.5, bootstrap=2.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least one continuation"):
        algos.fork_value([])


def test_fork_baseline_on_forked_turns_episode_advantage_elsewhere() -> None:
    # gamma .5: G(e0) = [.5, 1], G(e1) = [0, 0] ; episode adv (Dr. GRPO) R = 1, 0 -> +.5, -.5
    # e0: t0 forked V = .3 -> .5 - .3 = .2 ; t1 not forked -> .5
    # e1: t0 not forked -> -.5 ; t1 forked V = .2 -> 0 - .2 = -.2
    eps = [
        TurnEpisode("g", [0, 1], fork_values=[0.3, None]),
        TurnEpisode("g", [0, 0], fork_values=[None, 0.2]),
    ]
    out = turn_advantages(eps, mode="fork", gamma=0.5, norm_std=False)
    close(out.advantages, [[0.2, 0.5], [-0.5, -0.2]])
    assert out.metrics["turn_credit/forked_fraction"] == pytest.approx(0.5)
    # with norm_std the fallback turns are z-scores (+-0.7071), the forked ones are not
    close(turn_advantages(eps, mode="fork", gamma=0.5).advantages, [[0.2, S2], [-S2, -0.2]])
    # no fork values at all: the episode mode
    plain = [TurnEpisode("g", [0, 1]), TurnEpisode("g", [0, 0])]
    close(turn_advantages(plain, mode="fork").advantages, turn_advantages(plain).advantages)


# ----------------------------------------------------------------------------- gae
def test_gae_over_turns_terminal_and_truncated() -> None:
    # gamma = lam = .5
    # e0 terminal, r = [0, 1], V = [.5, .8]: d1 = 1 + 0 - .8 = .2 ; d0 = 0 + .5*.8 - .5 = -.1
    #   A0 = -.1 + .25 * .2 = -.05 -> A = [-.05, .2], returns = [.45, 1.0]
    # e1 truncated, r = [1, 0], V = [.4, .6], V_T = 1: d1 = 0 + .5*1 - .6 = -.1 ; d0 = 1 + .5*.6 - .4 = .9
    #   A0 = .9 + .25 * -.1 = .875 -> A = [.875, -.1], returns = [1.275, .5]
    eps = [
        TurnEpisode("g", [0, 1], values=[0.5, 0.8]),
        TurnEpisode("g", [1, 0], values=[0.4, 0.6], truncated=True, last_value=1.0),
    ]
    out = turn_advantages(eps, mode="gae", gamma=0.5, lam=0.5)
    close(out.advantages, [[-0.05, 0.2], [0.875, -0.1]])
    assert out.returns is not None
    close(out.returns, [[0.45, 1.0], [1.275, 0.5]])
    assert out.metrics["turn_credit/value_mean"] == pytest.approx((0.5 + 0.8 + 0.4 + 0.6) / 4)
    # the same episode ended by the env: V_T = 0 -> d1 = -.6 ; A0 = .9 + .25 * -.6 = .75 (last_value ignored)
    ended = TurnEpisode("g", [1, 0], values=[0.4, 0.6], truncated=False, last_value=1.0)
    close(turn_advantages([ended], mode="gae", gamma=0.5, lam=0.5).advantages, [[0.75, -0.6]])


def test_gae_gamma_lam_one_is_return_minus_value() -> None:
    # A_t = sum_{k>=t} r_k - V_t: [2 - .5, 2 - 1.5, 1 - .25] = [1.5, .5, .75]
    out = turn_advantages([TurnEpisode("g", [0, 1, 1], values=[0.5, 1.5, 0.25])], mode="gae", gamma=1.0, lam=1.0)
    close(out.advantages, [[1.5, 0.5, 0.75]])
    close(out.returns or [], [[2.0, 2.0, 1.0]])


def test_gae_needs_values_and_a_bootstrap_when_truncated() -> None:
    with pytest.raises(ValueError, match=r"episode 0 \(group 'g'\): 'gae' needs values"):
        turn_advantages([TurnEpisode("g", [1.0])], mode="gae")
    with pytest.raises(ValueError, match=r"'gae' needs last_value \(it was truncated\)"):
        turn_advantages([TurnEpisode("g", [1.0], values=[0.0], truncated=True)], mode="gae")


# ----------------------------------------------------------------------------- inputs, registry, config
@pytest.mark.parametrize(
    ("extra", "what"),
    [
        ({"state_keys": ["A"]}, "state_keys has 1 entries for 2 turns"),
        ({"values": [0.1, 0.2, 0.3]}, "values has 3 entries for 2 turns"),
        ({"fork_values": [None]}, "fork_values has 1 entries for 2 turns"),
    ],
)
def test_mismatched_lengths_raise_a_clear_error(extra: dict, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        TurnEpisode("g", [0.0, 1.0], **extra)
    # mappings are accepted; the error then names the episode
    good = {"group_id": "g", "rewards": [1.0, 0.0]}
    with pytest.raises(ValueError, match=rf"episode 1 \(group 'g'\): {what}"):
        turn_advantages([good, {"group_id": "g", "rewards": [0.0, 1.0], **extra}])


def test_bad_values_raise() -> None:
    with pytest.raises(ValueError, match="NaN or infinite"):
        TurnEpisode("g", [float("nan")])
    with pytest.raises(ValueError, match=r"episode 0 \(group 'g'\).*unexpected keyword argument 'reward'"):
        turn_advantages([{"group_id": "g", "reward": [1.0]}])


def test_mappings_and_numpy_inputs() -> None:
    np = pytest.importorskip("numpy")
    eps = [{"group_id": "g", "rewards": np.array([1.0])}, {"group_id": "g", "rewards": np.array([0.0])}]
    close(turn_advantages(eps).advantages, [[S2], [-S2]])


def test_unknown_mode_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown turn credit mode 'gipgo'.*episode, gigpo, fork, gae.*'gigpo'"):
        turn_advantages([TurnEpisode("g", [1.0])], mode="gipgo")
    with pytest.raises(algos.UnknownNameError):
        TurnCreditConfig(mode="nope")
    with pytest.raises(ValueError, match="unknown turn credit option"):
        turn_advantages([], gama=0.5)
    with pytest.raises(ValueError, match="gamma and lam in"):
        TurnCreditConfig(gamma=1.5)


def test_register_a_mode() -> None:
    @algos.register_turn_credit("ones_for_test")
    def ones(episodes: list[TurnEpisode], cfg: TurnCreditConfig) -> algos.TurnCredit:
        return algos.TurnCredit([[1.0] * len(e.rewards) for e in episodes])

    try:
        assert "ones_for_test" in algos.TURN_CREDIT_MODES
        assert turn_advantages([{"group_id": "g", "rewards": [0, 0]}], mode="ones_for_test").advantages == [[1.0, 1.0]]
    finally:
        algos.TURN_CREDIT_MODES.remove("ones_for_test")


def test_episode_from_trajectory() -> None:
    turn = SimpleNamespace
    traj = SimpleNamespace(
        group_id="g",
        turns=[turn(reward=0.0, state_key="s0"), turn(reward=0.5, state_key="s1")],
        final_reward=2.0,
        success=True,
        truncated=True,
    )
    ep = algos.episode_from_trajectory(traj, values=[0.1, 0.2], last_value=0.3)
    assert ep.rewards == (0.0, 0.5) and ep.state_keys == ("s0", "s1") and ep.truncated and ep.success
    assert ep.values == (0.1, 0.2) and ep.last_value == 0.3
    # "final": the difference 2.0 - 0.5 lands on the last turn, so sum(rewards) == final_reward
    assert algos.episode_from_trajectory(traj, reward="final").rewards == (0.0, 2.0)
    with pytest.raises(ValueError, match="'turns' or 'final'"):
        algos.episode_from_trajectory(traj, reward="sum")  # type: ignore[arg-type]
