"""Policy losses and advantage estimators are registries: a new one is usable by name everywhere."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rockroll.trainer import algos  # noqa: E402
from rockroll.trainer.config import AlgoConfig, RolloutConfig, TrainConfig  # noqa: E402
from rockroll.trainer.learner.batch import Batch  # noqa: E402
from rockroll.trainer.learner.prepare import compute_advantages  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture
def half_loss():
    """A policy loss registered for one test: half of REINFORCE, told only ``clip_high``."""
    seen: dict[str, object] = {}

    @algos.register_policy_loss("half_reinforce")
    def half_reinforce(logprobs, old_logprobs, advantages, mask, *, clip_high: float = 0.0):
        seen["clip_high"] = clip_high
        ratio = torch.exp(logprobs - old_logprobs)
        loss = -0.5 * advantages.unsqueeze(-1) * logprobs
        return loss, algos.ratio_stats(ratio, torch.zeros_like(mask, dtype=torch.bool), mask, logprobs, old_logprobs)

    yield seen
    algos.POLICY_LOSSES.remove("half_reinforce")


def test_registered_loss_is_usable_by_name(half_loss) -> None:
    assert "half_reinforce" in algos.policy_loss_names()
    assert AlgoConfig(pg_variant="half_reinforce").pg_variant == "half_reinforce"
    lp = torch.tensor([[-1.0, -2.0]])
    loss, stats = algos.policy_loss(
        "half_reinforce",
        lp,
        lp.clone(),
        torch.tensor([2.0]),
        torch.ones(1, 2),
        clip_low=0.2,
        clip_high=0.3,
        dual_clip=3.0,
    )
    assert torch.allclose(loss, torch.tensor([[1.0, 2.0]]))
    assert half_loss["clip_high"] == 0.3  # only the options the loss names reach it
    assert set(stats) == {"clipfrac", "ratio_mean", "approx_kl"}


def test_builtin_losses_keep_their_options() -> None:
    lp, old = torch.tensor([[0.0]]), torch.tensor([[-1.0]])  # ratio e
    adv, mask = torch.tensor([-1.0]), torch.ones(1, 1)
    direct, _ = algos.ppo_clip_loss(lp, old, adv, mask, clip_low=0.2, clip_high=0.2, dual_clip=1.5)
    via, _ = algos.policy_loss("ppo", lp, old, adv, mask, clip_low=0.2, clip_high=0.2, dual_clip=1.5)
    assert torch.equal(direct, via) and float(via) == pytest.approx(1.5)  # the dual clip reached ppo
    topr, _ = algos.policy_loss("topr", lp, old, adv, mask, clip_low=0.2, clip_high=0.2, dual_clip=1.5)
    assert torch.equal(topr, algos.topr_loss(lp, old, adv, mask)[0])
    assert algos.policy_loss_names()[:4] == ("ppo", "cispo", "topr", "gspo")


def test_unknown_loss_names_close_ones() -> None:
    with pytest.raises(algos.UnknownNameError, match=r"pg_variant must be one of ppo, .*Did you mean 'gspo'") as e:
        algos.get_policy_loss("gpso")
    assert isinstance(e.value, ValueError) and e.value.suggestions[0] == "gspo"
    with pytest.raises(ValueError, match="pg_variant must be one of"):
        AlgoConfig(pg_variant="gpso")


def test_a_taken_name_needs_override() -> None:
    with pytest.raises(ValueError, match="already registered"):
        algos.register_policy_loss("ppo")(algos.topr_loss)
    with pytest.raises(ValueError, match="already registered"):
        algos.register_advantage_estimator("grpo")(lambda x: (x.rewards, None))


@pytest.fixture
def median_estimator():
    @algos.register_advantage_estimator("median_baseline", group_based=True)
    def median_baseline(x: algos.AdvantageInputs):
        out = torch.zeros_like(x.rewards)
        for g in set(x.group_ids):
            idx = [i for i, gi in enumerate(x.group_ids) if gi == g]
            out[idx] = x.rewards[idx] - x.rewards[idx].median()
        return out.unsqueeze(1) * x.mask, None

    yield
    algos.ADVANTAGE_ESTIMATORS.remove("median_baseline")


def _batch(rewards: list[float], groups: str) -> Batch:
    n = len(rewards)
    return Batch(
        input_ids=torch.zeros(n, 3, dtype=torch.long),
        attention_mask=torch.ones(n, 3, dtype=torch.long),
        response_mask=torch.tensor([[0.0, 1.0, 1.0]] * n),
        rollout_logprobs=torch.zeros(n, 3),
        rewards=torch.tensor(rewards),
        group_ids=list(groups),
        episode_ids=[str(i) for i in range(n)],
        weight_versions=[0] * n,
        extras={"old_logprobs": torch.zeros(n, 3)},
    )


def test_registered_estimator_is_usable_by_name(median_estimator) -> None:
    assert "median_baseline" in algos.advantage_estimator_names()
    cfg = TrainConfig(algo=AlgoConfig(adv_estimator="median_baseline", dynamic_sampling=False))
    assert not cfg.algo.needs_critic
    batch = _batch([1.0, 2.0, 4.0, 0.0, 0.0, 3.0], "aaabbb")
    compute_advantages(batch, cfg.algo)
    # medians 2 and 0: advantages -1, 0, 2 and 0, 0, 3 on the two response tokens
    assert torch.allclose(batch.extras["advantages"][:, 1], torch.tensor([-1.0, 0.0, 2.0, 0.0, 0.0, 3.0]))
    assert torch.equal(batch.extras["advantages"][:, 0], torch.zeros(6))
    with pytest.raises(ValueError, match="needs rollout.scheduler.group_size >= 2"):  # group_based asks for groups
        TrainConfig(
            algo=AlgoConfig(adv_estimator="median_baseline"), rollout=RolloutConfig(scheduler=dict(group_size=1))
        )


def test_builtin_estimators_declare_what_they_need() -> None:
    estimators = {n: algos.get_advantage_estimator(n) for n in algos.advantage_estimator_names()}
    flags = {n: (e.group_based, e.needs_critic) for n, e in estimators.items()}
    assert flags["grpo"] == flags["grpo_mean"] == flags["rloo"] == (True, False)
    assert flags["reinforce_pp"] == (False, False) and flags["gae"] == (False, True)
    assert AlgoConfig(adv_estimator="gae").needs_critic and not AlgoConfig(adv_estimator="rloo").needs_critic
    r, mask = torch.tensor([1.0, 0.0, 3.0, 3.0]), torch.ones(4, 2)
    x = algos.AdvantageInputs(rewards=r, mask=mask, response_mask=mask, group_ids=list("aabb"))
    adv, returns = algos.get_advantage_estimator("grpo")(x)
    assert returns is None and torch.allclose(adv, algos.group_advantages(r, list("aabb")).unsqueeze(1) * mask)
    with pytest.raises(ValueError, match="needs the critic's values"):
        algos.get_advantage_estimator("gae")(algos.AdvantageInputs(torch.zeros(4, 2), mask, mask, list("aabb")))


def test_unknown_estimator_names_close_ones() -> None:
    with pytest.raises(ValueError, match=r"adv_estimator must be one of grpo, .*Did you mean 'rloo'"):
        algos.get_advantage_estimator("rlooo")
    with pytest.raises(ValueError, match="adv_estimator must be one of"):
        AlgoConfig(adv_estimator="rlooo")
