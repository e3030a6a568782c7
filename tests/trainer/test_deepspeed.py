"""The DeepSpeed strategy: config mapping, the install hint when it is missing, and (where
deepspeed is installed) the same update as the torch strategy for ZeRO stages 0-3 on CPU (gloo)."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from tests.trainer.conftest import random_samples  # noqa: E402

torch.set_num_threads(1)

BASE = {
    "rollout": {"scheduler": {"group_size": 4, "num_env_groups": 2}},
    "optim": {"lr": 1e-3, "ppo_epochs": 2, "mini_batch_size": 4, "micro_batch_size": 3, "grad_clip": 1.0},
    "total_steps": 5,
}


def _cfg(tiny_model_dir, algo: dict | None = None, **workers):
    from rockroll.trainer.config_io import config_from_dict

    return config_from_dict(
        {
            **BASE,
            "model": {"path": str(tiny_model_dir)},
            "algo": algo or {"dynamic_sampling": False},
            "workers": workers,
        }
    )


def test_ds_config_maps_the_optim_and_workers_sections(tiny_model_dir) -> None:
    from rockroll.trainer.strategies.deepspeed import ds_config

    cfg = _cfg(tiny_model_dir, strategy="deepspeed", zero_stage=3, deepspeed_config={"zero_optimization": {"x": 1}})
    ds = ds_config(cfg.optim, cfg.workers, "bfloat16", gas=2)
    assert ds["zero_optimization"] == {"stage": 3, "x": 1}
    assert ds["bf16"]["enabled"] and not ds["fp16"]["enabled"]
    assert ds["gradient_clipping"] == 1.0 and ds["gradient_accumulation_steps"] == 2
    assert ds["train_micro_batch_size_per_gpu"] == 3


def test_zero_stage_is_validated(tiny_model_dir) -> None:
    with pytest.raises(ValueError, match="zero_stage"):
        _cfg(tiny_model_dir, zero_stage=4)


def test_missing_deepspeed_names_the_install(tiny_model_dir, monkeypatch) -> None:
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.workers import make_workers

    monkeypatch.setitem(sys.modules, "deepspeed", None)  # import deepspeed -> ImportError
    cfg = _cfg(tiny_model_dir, strategy="deepspeed")
    model, _ = load_policy(cfg.model)
    with pytest.raises(RuntimeError, match=r"pip install 'rockroll\[gpu\]'.*pip install deepspeed"):
        make_workers(model, cfg)


def _one_update(cfg, weights0, batch, steps: int = 1):
    """Weights and metrics after ``steps`` updates of fresh workers started from ``weights0``."""
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.prepare import compute_advantages
    from rockroll.trainer.learner.workers import LocalWorkers

    model, _ = load_policy(cfg.model)
    model.load_state_dict(weights0)
    workers = LocalWorkers(model, cfg)
    metrics = {}
    for step in range(steps):
        batch.extras = {"old_logprobs": workers.old_logprobs(batch)}
        if cfg.algo.needs_critic:
            batch.extras["values"] = workers.values(batch)
        compute_advantages(batch, cfg.algo)
        metrics = workers.update(batch, step)
    return workers, workers.policy_weights(), metrics


@pytest.mark.slow
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_deepspeed_update_matches_torch(tiny_model_dir, stage: int) -> None:
    pytest.importorskip("deepspeed")
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.models import load_policy

    algo = {"adv_estimator": "gae", "dynamic_sampling": False, "gamma": 1.0, "lam": 1.0}
    cfg_t = _cfg(tiny_model_dir, algo)
    model, tok = load_policy(cfg_t.model)
    weights0 = {k: v.clone() for k, v in model.state_dict().items()}
    batch = collate(random_samples(8, len(tok), seed=7), tok.pad_token_id)

    torch.manual_seed(0)
    _, w_t, m_t = _one_update(cfg_t, weights0, batch, steps=2)
    torch.manual_seed(0)
    cfg_d = _cfg(tiny_model_dir, algo, strategy="deepspeed", zero_stage=stage, backend="gloo")
    ds_workers, w_d, m_d = _one_update(cfg_d, weights0, batch, steps=2)

    changed = max(float((w_t[k] - weights0[k]).abs().max()) for k in w_t)
    assert changed > 1e-4
    for k in w_t:
        assert torch.allclose(w_t[k], w_d[k], atol=1e-5), (k, float((w_t[k] - w_d[k]).abs().max()), changed)
    for key in ("actor/pg_loss", "actor/grad_norm", "critic/value_loss", "critic/grad_norm", "actor/lr"):
        assert m_t[key] == pytest.approx(m_d[key], rel=1e-4, abs=1e-6), key
    state = ds_workers.state_dict()  # gathered weights round-trip
    assert torch.allclose(state["model"][next(iter(w_t))], w_d[next(iter(w_t))])


@pytest.mark.slow
def test_deepspeed_engine_checkpoint_round_trip(tiny_model_dir, tmp_path) -> None:
    pytest.importorskip("deepspeed")
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.models import load_policy

    cfg = _cfg(tiny_model_dir, strategy="deepspeed", zero_stage=2, backend="gloo")
    model, tok = load_policy(cfg.model)
    weights0 = {k: v.clone() for k, v in model.state_dict().items()}
    batch = collate(random_samples(8, len(tok), seed=7), tok.pad_token_id)
    workers, w1, _ = _one_update(cfg, weights0, batch)
    workers.trainer.save_checkpoint(tmp_path / "ds")
    workers.trainer.load_state_dict({"model": weights0, "sched": workers.trainer.sched.state_dict()})
    assert torch.allclose(workers.policy_weights()[next(iter(w1))], weights0[next(iter(w1))])
    workers.trainer.load_checkpoint(tmp_path / "ds")
    w2 = workers.policy_weights()
    for k in w1:
        assert torch.equal(w1[k], w2[k]), k


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_two_ray_deepspeed_workers_match_torch(tiny_model_dir, stage: int) -> None:
    pytest.importorskip("deepspeed")
    ray = pytest.importorskip("ray")
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.ray_workers import RayWorkers

    algo = {"adv_estimator": "gae", "dynamic_sampling": False, "gamma": 1.0, "lam": 1.0}
    cfg_t = _cfg(tiny_model_dir, algo)
    model, tok = load_policy(cfg_t.model)
    weights0 = {k: v.clone() for k, v in model.state_dict().items()}
    batch = collate(random_samples(8, len(tok), seed=7), tok.pad_token_id)
    torch.manual_seed(0)
    _, w_t, m_t = _one_update(cfg_t, weights0, batch)

    from rockroll.trainer.learner.prepare import compute_advantages

    cfg_d = _cfg(
        tiny_model_dir, algo, strategy="deepspeed", zero_stage=stage, use_ray=True, num_workers=2, backend="gloo"
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        workers = RayWorkers(None, cfg_d, weights=weights0)
        batch.extras = {"old_logprobs": workers.old_logprobs(batch), "values": workers.values(batch)}
        compute_advantages(batch, cfg_d.algo)
        m_d = workers.update(batch, 0)
        w_d = workers.policy_weights()
        workers.close()
    finally:
        ray.shutdown()
    for k in w_t:
        assert torch.allclose(w_t[k], w_d[k], atol=1e-5), (k, float((w_t[k] - w_d[k]).abs().max()))
    for key in ("actor/pg_loss", "actor/grad_norm", "critic/value_loss", "critic/grad_norm"):
        assert m_t[key] == pytest.approx(m_d[key], rel=1e-4, abs=1e-6), key
