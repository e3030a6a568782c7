"""The training step on TrainSample batches: logprob alignment, every estimator and loss variant
moves the policy towards rewarded responses, masks, the critic learns, schedules."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.trainer.conftest import random_samples  # noqa: E402

torch.set_num_threads(1)


def _setup(tiny_model_dir, **sections):
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.learner.models import load_policy

    cfg = config_from_dict(
        {
            "model": {"path": str(tiny_model_dir)},
            "rollout": {"scheduler": {"group_size": 4, "num_env_groups": 2}},
            "total_steps": 10,
            **sections,
        }
    )
    torch.manual_seed(0)
    model, tok = load_policy(cfg.model)
    return cfg, model, tok


def test_logprobs_are_token_aligned(tiny_model_dir) -> None:
    from rockroll.trainer.learner.batch import collate, token_logprobs

    _, model, tok = _setup(tiny_model_dir)
    samples = random_samples(3, len(tok))
    batch = collate(samples, tok.pad_token_id)
    with torch.no_grad():
        lp, ent = token_logprobs(model, batch.input_ids, batch.attention_mask, with_entropy=True)
    ids = torch.tensor([samples[1].input_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
    t = 4
    expected = torch.log_softmax(logits[t - 1], -1)[ids[0, t]]
    assert float(lp[1, t]) == pytest.approx(float(expected), abs=1e-4)
    assert float(lp[1, 0]) == 0.0 and float(batch.response_mask[:, 0].sum()) == 0.0
    assert float(ent[1, t]) > 0


@pytest.mark.parametrize(
    ("adv", "pg", "agg"),
    [("grpo", "ppo", "token-mean"), ("grpo_mean", "cispo", "seq-mean-token-sum"), ("rloo", "topr", "token-mean"),
     ("grpo", "gspo", "seq-mean-token-mean"), ("reinforce_pp", "ppo", "token-mean"), ("gae", "ppo", "token-mean"),
     ("grpo", "decoupled_ppo", "token-mean")],
)  # fmt: skip
def test_update_moves_towards_rewarded_responses(tiny_model_dir, adv: str, pg: str, agg: str) -> None:
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.prepare import compute_advantages
    from rockroll.trainer.learner.workers import LocalWorkers

    cfg, model, tok = _setup(
        tiny_model_dir,
        algo={
            "adv_estimator": adv,
            "pg_variant": pg,
            "loss_agg_mode": agg,
            "kl_coef": 0.01,
            "entropy_coef": 0.001,
            "gamma": 1.0,
            "lam": 1.0,
        },
        optim={"lr": 3e-3, "ppo_epochs": 2, "mini_batch_size": 4, "micro_batch_size": 3},
    )
    workers = LocalWorkers(model, cfg)
    batch = collate(random_samples(8, len(tok), seed=1), tok.pad_token_id)

    def rewarded_minus_unrewarded() -> float:
        lp = workers.old_logprobs(batch)
        seq = (lp * batch.response_mask).sum(1)
        return float(seq[batch.rewards == 1].mean() - seq[batch.rewards == 0].mean())

    before = rewarded_minus_unrewarded()
    metrics = {}
    for step in range(4):
        batch.extras = {"old_logprobs": workers.old_logprobs(batch), "ref_logprobs": workers.ref_logprobs(batch)}
        if cfg.algo.needs_critic:
            batch.extras["values"] = workers.values(batch)
        metrics = {**compute_advantages(batch, cfg.algo), **workers.update(batch, step)}
    after = rewarded_minus_unrewarded()
    assert after > before + 0.5, (before, after)
    assert metrics["actor/updates"] == 4  # 2 epochs x 2 minibatches
    assert metrics["actor/grad_norm"] > 0
    if adv == "gae":
        assert "critic/value_loss" in metrics


def test_critic_value_loss_decreases(tiny_model_dir) -> None:
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.prepare import compute_advantages
    from rockroll.trainer.learner.workers import LocalWorkers

    cfg, model, tok = _setup(
        tiny_model_dir, algo={"adv_estimator": "gae", "value_clip": 0.0}, optim={"lr": 1e-6, "critic_lr": 3e-3}
    )
    workers = LocalWorkers(model, cfg)
    batch = collate(random_samples(8, len(tok), seed=2), tok.pad_token_id)
    losses = []
    for step in range(8):
        batch.extras = {"old_logprobs": workers.old_logprobs(batch), "values": workers.values(batch)}
        compute_advantages(batch, cfg.algo)
        losses.append(workers.update(batch, step)["critic/value_loss"])
    assert losses[-1] < 0.5 * losses[0], losses


def test_dynamic_sampling_skips_groups_without_signal(tiny_model_dir) -> None:
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.prepare import compute_advantages
    from rockroll.trainer.learner.workers import LocalWorkers

    cfg, model, tok = _setup(tiny_model_dir, algo={"adv_estimator": "grpo", "dynamic_sampling": True})
    workers = LocalWorkers(model, cfg)
    samples = random_samples(8, len(tok), seed=4)
    for s in samples:
        s.reward = 1.0  # every group all-correct: no signal
    batch = collate(samples, tok.pad_token_id)
    batch.extras["old_logprobs"] = workers.old_logprobs(batch)
    m = compute_advantages(batch, cfg.algo)
    w0 = {k: v.clone() for k, v in model.state_dict().items()}
    out = workers.update(batch, 0)
    assert m["rollout/kept_fraction"] == 0.0 and out["actor/updates"] == 0
    assert all(torch.equal(w0[k], v) for k, v in model.state_dict().items())


def test_truncated_responses_are_masked(tiny_model_dir) -> None:
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.prepare import compute_advantages

    cfg, _, tok = _setup(tiny_model_dir, algo={"mask_truncated": True})
    batch = collate(random_samples(4, len(tok), seed=5), tok.pad_token_id)
    batch.extras = {"old_logprobs": batch.rollout_logprobs, "truncated": torch.tensor([1.0, 0.0, 0.0, 0.0])}
    compute_advantages(batch, cfg.algo)
    assert float(batch.extras["loss_mask"][0].sum()) == 0.0 and float(batch.extras["loss_mask"][1].sum()) > 0


def test_lr_schedules() -> None:
    from rockroll.trainer.learner.actor import make_scheduler

    p = torch.nn.Parameter(torch.zeros(1))
    for kind, expect_end in [("constant", 1.0), ("linear", 0.0), ("cosine", 0.0)]:
        opt = torch.optim.SGD([p], lr=1.0)
        sched = make_scheduler(opt, kind, warmup=2, total=10)
        lrs = []
        for _ in range(10):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        assert lrs[0] == pytest.approx(0.5) and lrs[1] == pytest.approx(1.0)
        assert opt.param_groups[0]["lr"] == pytest.approx(expect_end, abs=1e-6)


def test_off_policy_losses_differ_once_ratios_move(tiny_model_dir) -> None:
    """With several epochs per batch the ratio leaves 1 after the first minibatch, so CISPO and TOPR
    (identical on-policy) give different losses and weights; decoupled PPO reads the stale engine's logprobs."""
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.prepare import compute_advantages
    from rockroll.trainer.learner.workers import LocalWorkers

    runs = {}
    for pg in ("cispo", "topr", "decoupled_ppo"):
        cfg, model, tok = _setup(
            tiny_model_dir,
            algo={"adv_estimator": "grpo", "pg_variant": pg, "clip_low": 0.2, "clip_high": 0.2},
            optim={"lr": 1e-2, "ppo_epochs": 3, "mini_batch_size": 4, "micro_batch_size": 4},
        )
        workers = LocalWorkers(model, cfg)
        batch = collate(random_samples(8, len(tok), seed=2), tok.pad_token_id)
        batch.extras = {"old_logprobs": workers.old_logprobs(batch), "ref_logprobs": workers.ref_logprobs(batch)}
        compute_advantages(batch, cfg.algo)
        metrics = workers.update(batch, 0)
        assert metrics["actor/updates"] == 6
        assert metrics["actor/approx_kl"] > 1e-6 and abs(metrics["actor/ratio_mean"] - 1.0) > 1e-4, metrics
        runs[pg] = (metrics["actor/pg_loss"], torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert runs["cispo"][0] != pytest.approx(runs["topr"][0], rel=1e-3)
    assert not torch.allclose(runs["cispo"][1], runs["topr"][1])
