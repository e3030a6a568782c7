"""Algorithm math against values computed by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from rockroll.trainer import algos  # noqa: E402

torch.set_num_threads(1)


def close(a, b, tol: float = 1e-4) -> None:
    assert torch.allclose(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32), atol=tol), (
        a,
        b,
    )


# ----------------------------------------------------------------------------- advantages
def test_gae_gamma_lambda_one() -> None:
    # delta1 = 1 + 0 - 0.8 = 0.2 ; delta0 = 0 + 0.8 - 0.5 = 0.3 ; A0 = 0.3 + 0.2 = 0.5
    adv, ret = algos.compute_gae(torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 0.8]]), torch.ones(1, 2))
    close(adv, [[0.5, 0.2]])
    close(ret, [[1.0, 1.0]])


def test_gae_discounted_and_skips_masked_tokens() -> None:
    # gamma = lam = 0.5: delta1 = 0.2 ; delta0 = 0 + 0.5*0.8 - 0.5 = -0.1 ; A0 = -0.1 + 0.25*0.2 = -0.05
    adv, ret = algos.compute_gae(
        torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 0.8]]), torch.ones(1, 2), gamma=0.5, lam=0.5
    )
    close(adv, [[-0.05, 0.2]])
    close(ret, [[0.45, 1.0]])
    # an env-observation token (mask 0) in the middle is skipped, not discounted through
    adv2, _ = algos.compute_gae(
        torch.tensor([[0.0, 7.0, 1.0]]),
        torch.tensor([[0.5, 9.0, 0.8]]),
        torch.tensor([[1.0, 0.0, 1.0]]),
        gamma=0.5,
        lam=0.5,
    )
    close(adv2, [[-0.05, 0.0, 0.2]])


def test_group_advantages_grpo_and_mean_only() -> None:
    r = torch.tensor([1.0, 0.0, 1.0, 1.0])
    g = ["a", "a", "b", "b"]
    # group a: mean 0.5, unbiased std sqrt(0.5) = 0.7071 -> +-0.7071 ; group b: all equal -> 0
    close(algos.group_advantages(r, g), [0.7071, -0.7071, 0.0, 0.0])
    close(algos.group_advantages(r, g, norm_std=False), [0.5, -0.5, 0.0, 0.0])
    close(algos.group_advantages(torch.tensor([3.0]), ["x"]), [0.0])
    with pytest.raises(ValueError, match="one group id per reward"):
        algos.group_advantages(r, ["a"])


def test_rloo() -> None:
    # 1 - mean(0, 0) = 1 ; 0 - mean(1, 0) = -0.5
    close(algos.rloo_advantages(torch.tensor([1.0, 0.0, 0.0]), ["g"] * 3), [1.0, -0.5, -0.5])


def test_token_returns_and_reinforce_pp() -> None:
    ret = algos.token_returns(torch.tensor([[0.0, 0.0, 1.0]]), torch.ones(1, 3), gamma=0.5)
    close(ret, [[0.25, 0.5, 1.0]])
    # whiten [0.25, 0.5, 1]: mean 0.58333, biased var 0.097222, std 0.31180
    adv = algos.reinforce_pp_advantages(torch.tensor([[0.0, 0.0, 1.0]]), torch.ones(1, 3), gamma=0.5)
    close(adv, [[-1.0690, -0.2673, 1.3363]])


def test_discounted_returns_step_level() -> None:
    assert algos.discounted_returns([0.0, 0.0, 1.0], 0.9) == pytest.approx([0.81, 0.9, 1.0])
    assert algos.discounted_returns([1.0, -0.1, 2.0], 1.0) == pytest.approx([2.9, 1.9, 2.0])


# ----------------------------------------------------------------------------- policy losses
def lp_pair(ratios: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    old = torch.full((1, len(ratios)), math.log(0.3))
    new = (old + torch.log(torch.tensor([ratios]))).requires_grad_(True)
    return new, old


def test_ppo_clip_symmetric_asymmetric_dual() -> None:
    new, old = lp_pair([1.5, 0.5, 1.5, 4.0])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    loss, stats = algos.ppo_clip_loss(new, old, adv, torch.ones(1, 4), clip_low=0.2, clip_high=0.2, dual_clip=3.0)
    # r=1.5,A=1: max(-1.5,-1.2)=-1.2 ; r=.5,A=1: max(-.5,-.8)=-.5 ; r=1.5,A=-1: max(1.5,1.2)=1.5 ; r=4,A=-1: min(4,3)=3
    close(loss, [[-1.2, -0.5, 1.5, 3.0]])
    assert stats["clipfrac"] == pytest.approx(0.25)
    loss2, _ = algos.ppo_clip_loss(new, old, adv, torch.ones(1, 4), clip_low=0.2, clip_high=0.28, dual_clip=None)
    close(loss2, [[-1.28, -0.5, 1.5, 4.0]])
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        algos.ppo_clip_loss(new, old, adv, torch.ones(1, 4), dual_clip=0.5)


def test_cispo_keeps_gradient_on_clipped_tokens() -> None:
    new, old = lp_pair([1.5])
    loss, _ = algos.cispo_loss(new, old, torch.tensor([1.0]), torch.ones(1, 1), clip_low=1.0, clip_high=0.28)
    # -min(1.5, 1.28) * 1 * log(0.45)
    close(loss, [[-1.28 * math.log(0.45)]])
    loss.sum().backward()
    close(new.grad, [[-1.28]])


def test_topr_weights() -> None:
    new, old = lp_pair([1.5, 0.5, 2.0])
    adv = torch.tensor([[-1.0, -1.0, 1.0]])
    loss, _ = algos.topr_loss(new, old, adv, torch.ones(1, 3))
    loss.sum().backward()
    # A<0: weight clip(r,0,1): 1.0 and 0.5 ; A>0: weight 1 -> dloss/dlogp = -w*A
    close(new.grad, [[1.0, 0.5, -1.0]])


def test_gspo_sequence_ratio() -> None:
    old = torch.zeros(1, 2)
    new = torch.tensor([[0.1, 0.3]], requires_grad=True)
    # s = exp(mean(0.1, 0.3)) = exp(0.2) = 1.2214
    loss, _ = algos.gspo_loss(new, old, torch.tensor([1.0]), torch.ones(1, 2))
    close(loss, [[-1.0004, -1.0004]])  # clipped at 1 + 4e-4
    loss_neg, _ = algos.gspo_loss(new, old, torch.tensor([-1.0]), torch.ones(1, 2))
    close(loss_neg, [[1.2214, 1.2214]])
    loss_neg.sum().backward()
    close(new.grad, [[1.2214, 1.2214]])


def test_decoupled_ppo_clips_around_the_proximal_policy_and_weights_by_the_behaviour_one() -> None:
    new, prox = lp_pair([1.5, 0.5, 1.5])  # r = pi / pi_prox
    behav = prox - torch.log(torch.tensor([[2.0, 0.5, 10.0]]))  # pi_prox / pi_behav = 2, 0.5, 10 -> capped at 5
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    loss, stats = algos.decoupled_ppo_loss(
        new, prox, adv, torch.ones(1, 3), behavior_logprobs=behav, clip_low=0.2, clip_high=0.2, behav_cap=5.0
    )
    # surrogates: r=1.5,A=1: -1.2 ; r=.5,A=1: -.5 ; r=1.5,A=-1: 1.5 ; times the weights 2, .5, 5
    close(loss, [[-2.4, -0.25, 7.5]])
    assert stats["behav_capped"] == pytest.approx(1 / 3)
    loss.sum().backward()
    # the weight is detached: d/dlogp of -w*A*r = -w*A*r where the surrogate is unclipped (token 1: .5*1*.5 ;
    # token 2, A<0 and r above the range stays unclipped: 5*1*1.5), 0 where clipped (token 0)
    close(new.grad, [[0.0, -0.25, 7.5]])
    # no behaviour logprobs: PPO's clipped surrogate around the proximal policy (no dual clip)
    new2, prox2 = lp_pair([1.5, 0.5, 1.5])
    plain, _ = algos.decoupled_ppo_loss(new2, prox2, adv, torch.ones(1, 3), clip_low=0.2, clip_high=0.2)
    ppo, _ = algos.ppo_clip_loss(new2, prox2, adv, torch.ones(1, 3), clip_low=0.2, clip_high=0.2, dual_clip=None)
    close(plain, ppo)
    # dispatch by name passes the behaviour logprobs through
    via, _ = algos.policy_loss("decoupled_ppo", new2, prox2, adv, torch.ones(1, 3), behavior_logprobs=behav)
    close(via, [[-2.4, -0.25, 7.5]])
    with pytest.raises(ValueError, match="behav_cap must be > 0"):
        algos.decoupled_ppo_loss(new2, prox2, adv, torch.ones(1, 3), behav_cap=0.0)


def test_tis_and_value_loss() -> None:
    close(algos.tis_weights(torch.tensor([math.log(3.0), 0.0]), torch.tensor([0.0, 0.0]), cap=2.0), [2.0, 1.0])
    # unclipped (1.5-2)^2 = .25 ; clipped value 1.2 -> (1.2-2)^2 = .64 ; 0.5 * max = .32
    close(algos.value_loss(torch.tensor([1.5]), torch.tensor([1.0]), torch.tensor([2.0]), clip=0.2), [0.32])
    close(algos.value_loss(torch.tensor([1.5]), torch.tensor([1.0]), torch.tensor([2.0]), clip=None), [0.125])


def test_policy_loss_dispatch() -> None:
    new, old = lp_pair([1.0])
    with pytest.raises(ValueError, match="pg_variant must be one of"):
        algos.policy_loss(
            "nope", new, old, torch.ones(1), torch.ones(1, 1), clip_low=0.2, clip_high=0.2, dual_clip=None
        )


# ----------------------------------------------------------------------------- KL and entropy
def test_kl_estimators() -> None:
    lp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    close(algos.kl_estimate(lp, ref, "k1"), [0.6931])  # ln 2
    close(algos.kl_estimate(lp, ref, "k2"), [0.2402])  # 0.5 ln(2)^2
    close(algos.kl_estimate(lp, ref, "k3"), [0.1931])  # 0.5 + ln 2 - 1
    with pytest.raises(ValueError, match="KL estimator"):
        algos.kl_estimate(lp, ref, "k9")


def test_kl_penalty_reward() -> None:
    lp = torch.tensor([[0.1, 0.2, 5.0]])
    tok = algos.kl_penalized_rewards(
        torch.tensor([1.0]), lp, torch.zeros(1, 3), torch.tensor([[1.0, 1.0, 0.0]]), coef=0.5
    )
    close(tok, [[-0.05, 1.0 - 0.1, 0.0]])


def test_entropy_uniform() -> None:
    close(algos.entropy_from_logits(torch.zeros(2, 4)), [math.log(4)] * 2)


# ----------------------------------------------------------------------------- aggregation, shaping, masks
def test_aggregation_modes() -> None:
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert float(algos.aggregate_loss(loss, mask, "token-mean")) == pytest.approx(10 / 4)
    assert float(algos.aggregate_loss(loss, mask, "seq-mean-token-sum")) == pytest.approx((6 + 4) / 2)
    assert float(algos.aggregate_loss(loss, mask, "seq-mean-token-mean")) == pytest.approx((2 + 4) / 2)
    assert float(algos.aggregate_loss(loss, mask, "token-mean", denominator=8)) == pytest.approx(10 / 8)
    with pytest.raises(ValueError, match="loss_agg_mode"):
        algos.aggregate_loss(loss, mask, "mean")


def test_reward_shaping_and_whitening() -> None:
    close(algos.shape_rewards(torch.tensor([3.0, -0.5]), clip=1.0, scale=2.0), [2.0, -1.0])
    close(algos.shape_rewards(torch.tensor([1.0, 3.0]), normalize="batch"), [-0.7071, 0.7071])
    close(
        algos.shape_rewards(torch.tensor([1.0, 3.0, 5.0, 5.0]), normalize="group", group_ids="aabb"),
        [-0.7071, 0.7071, 0, 0],
    )
    with pytest.raises(ValueError, match="normalize must be"):
        algos.shape_rewards(torch.tensor([1.0]), normalize="zscore")
    w = algos.masked_whiten(torch.tensor([[1.0, 3.0, 100.0]]), torch.tensor([[1.0, 1.0, 0.0]]))
    close(w[:, :2], [[-1.0, 1.0]])
    close(algos.clip_advantages(torch.tensor([-5.0, 0.5, 5.0]), 2.0), [-2.0, 0.5, 2.0])


def test_difficulty_and_length_masks() -> None:
    close(algos.difficulty_mask(torch.tensor([1.0, 1.0, 0.0, 1.0]), ["a", "a", "b", "b"]), [0.0, 0.0, 1.0, 1.0])
    close(algos.max_length_mask(torch.tensor([3, 8, 7]), 8), [1.0, 0.0, 1.0])
