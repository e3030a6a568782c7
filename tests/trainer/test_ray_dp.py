"""Two Ray workers with gloo compute the same update as one in-process worker on the same batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from tests.trainer.conftest import random_samples  # noqa: E402


@pytest.mark.slow
def test_two_gloo_workers_match_one(tiny_model_dir, tmp_path) -> None:
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.prepare import compute_advantages
    from rockroll.trainer.learner.ray_workers import RayWorkers
    from rockroll.trainer.learner.workers import LocalWorkers

    torch.set_num_threads(1)
    base = {
        "model": {"path": str(tiny_model_dir)},
        "rollout": {"scheduler": {"group_size": 4, "num_env_groups": 3}},
        "algo": {"adv_estimator": "grpo", "dynamic_sampling": False},
        "optim": {"lr": 1e-3, "ppo_epochs": 2, "mini_batch_size": 6, "micro_batch_size": 2},
        "total_steps": 5,
    }
    cfg1 = config_from_dict(base)
    model, tok = load_policy(cfg1.model)
    weights0 = {k: v.clone() for k, v in model.state_dict().items()}
    batch = collate(random_samples(12, len(tok), seed=3, groups=3), tok.pad_token_id)

    local = LocalWorkers(model, cfg1)
    batch.extras["old_logprobs"] = local.old_logprobs(batch)
    compute_advantages(batch, cfg1.algo)
    m1 = local.update(batch, step=0)
    w1 = local.policy_weights()

    cfg2 = config_from_dict({**base, "workers": {"use_ray": True, "num_workers": 2, "backend": "gloo"}})
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        workers = RayWorkers(None, cfg2, weights=weights0)
        lp2 = workers.old_logprobs(batch)
        assert torch.allclose(lp2, batch.extras["old_logprobs"], atol=1e-5)
        m2 = workers.update(batch, step=0)
        w2 = workers.policy_weights()
        w2b = ray.get(workers.train[1].weights.remote())
        workers.close()
    finally:
        ray.shutdown()
    changed = max(float((w1[k] - weights0[k]).abs().max()) for k in w1)
    assert changed > 1e-3  # the update did something
    for k in w1:
        assert torch.allclose(w1[k], w2[k], atol=1e-5), (k, float((w1[k] - w2[k]).abs().max()), changed)
        assert torch.equal(w2[k], w2b[k]), k  # ranks stay in sync
    assert m1["actor/pg_loss"] == pytest.approx(m2["actor/pg_loss"], abs=1e-5)
    assert m1["actor/grad_norm"] == pytest.approx(m2["actor/grad_norm"], rel=1e-4)
