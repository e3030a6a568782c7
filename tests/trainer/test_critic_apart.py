"""PPO with the critic in its own Ray actor (placement ``apart``) makes the same update as the
critic colocated with the actor, on the same batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from tests.trainer.conftest import random_samples  # noqa: E402


def test_apart_needs_ray() -> None:
    from rockroll.trainer.config_io import config_from_dict

    with pytest.raises(ValueError, match="use_ray"):
        config_from_dict({"workers": {"critic_placement": "apart"}})


@pytest.mark.slow
def test_separate_critic_matches_colocated(tiny_model_dir) -> None:
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.prepare import compute_advantages
    from rockroll.trainer.learner.ray_workers import RayWorkers
    from rockroll.trainer.learner.workers import LocalWorkers

    torch.set_num_threads(1)
    base = {
        "model": {"path": str(tiny_model_dir)},
        "rollout": {"scheduler": {"group_size": 4, "num_env_groups": 2}},
        "algo": {"adv_estimator": "gae", "dynamic_sampling": False, "gamma": 1.0, "lam": 1.0},
        "optim": {"lr": 1e-3, "critic_lr": 3e-3, "ppo_epochs": 2, "mini_batch_size": 4, "micro_batch_size": 3},
        "total_steps": 5,
    }
    cfg1 = config_from_dict(base)
    model, tok = load_policy(cfg1.model)
    weights0 = {k: v.clone() for k, v in model.state_dict().items()}
    batch = collate(random_samples(8, len(tok), seed=5), tok.pad_token_id)

    def run(workers) -> tuple[dict, dict, dict]:
        metrics = {}
        for step in range(2):
            batch.extras = {"old_logprobs": workers.old_logprobs(batch), "values": workers.values(batch)}
            compute_advantages(batch, cfg1.algo)
            metrics = workers.update(batch, step)
        state = workers.state_dict()
        return workers.policy_weights(), state["critic"], metrics

    w1, c1, m1 = run(LocalWorkers(model, cfg1))
    cfg2 = config_from_dict({**base, "workers": {"use_ray": True, "critic_placement": "apart"}})
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        workers = RayWorkers(None, cfg2, weights=weights0)
        w2, c2, m2 = run(workers)
        workers.close()
    finally:
        ray.shutdown()
    assert max(float((c1[k] - c2[k]).abs().max()) for k in c1) < 1e-5
    assert any(float(c1[k].abs().max()) > 0 for k in c1 if "head" in k)  # the critic learned
    for k in w1:
        assert torch.allclose(w1[k], w2[k], atol=1e-5), k
    for key in ("critic/value_loss", "critic/grad_norm", "actor/pg_loss"):
        assert m1[key] == pytest.approx(m2[key], rel=1e-4, abs=1e-6), key
