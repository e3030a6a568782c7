"""Registrations of the user's own code reach worker processes (:mod:`rockroll.envs.carry`).

A loss and an estimator registered by a module outside the package (written to ``tmp_path``) and a
loss registered by a ``__main__`` are used by a real Ray worker's update; a fresh Python process
redoes them (and an env's registration) from the carried bytes; what cannot be pickled is refused
with an error saying what to do.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from rockroll.envs.carry import CarryError, carried_registrations

PLUGIN = """
import torch

import rockroll.envhub as envhub
from rockroll.trainer.algos import ratio_stats, register_advantage_estimator, register_policy_loss


@register_policy_loss("{loss}")
def double_reinforce(logprobs, old_logprobs, advantages, mask):
    adv = advantages if advantages.dim() == 2 else advantages.unsqueeze(-1)
    ratio = torch.exp(logprobs - old_logprobs)
    return -2.0 * adv * logprobs, ratio_stats(ratio, torch.zeros_like(mask, dtype=torch.bool), mask, logprobs,
                                              old_logprobs)


@register_advantage_estimator("{adv}", group_based=True)
def centered(x):
    from rockroll.trainer.algos import group_advantages

    return group_advantages(x.rewards, x.group_ids, norm_std=False).unsqueeze(1) * x.mask, None


envhub.register("{env}", "rockroll.envs.frozenlake.env:FrozenLakeEnv")
"""

MAIN = """
import torch

from rockroll.trainer.algos import register_policy_loss

SCALE = 3.0


@register_policy_loss("{loss}")
def scaled_reinforce(logprobs, old_logprobs, advantages, mask):
    adv = advantages if advantages.dim() == 2 else advantages.unsqueeze(-1)
    return -SCALE * adv * logprobs, {{"clipfrac": 0.0, "ratio_mean": 1.0, "approx_kl": 0.0}}
"""


@pytest.fixture
def plugins(tmp_path: Path):
    """A plugin module on the driver's ``sys.path`` and a ``__main__``-style registration; removed afterwards."""
    from rockroll import envhub
    from rockroll.trainer import algos

    tag = uuid.uuid4().hex[:8]
    names = {"module": f"rr_plugins_{tag}", "loss": f"double_{tag}", "adv": f"centered_{tag}",
             "env": f"CarriedLake{tag}-v0", "main_loss": f"scaled_{tag}"}  # fmt: skip
    (tmp_path / f"{names['module']}.py").write_text(
        PLUGIN.format(loss=names["loss"], adv=names["adv"], env=names["env"])
    )
    sys.path.insert(0, str(tmp_path))
    __import__(names["module"])
    main_ns = {"__name__": "__main__"}  # a script's globals: its functions pickle by value
    exec(compile(MAIN.format(loss=names["main_loss"]), "<script>", "exec"), main_ns)  # noqa: S102
    yield names
    algos.POLICY_LOSSES.remove(names["loss"])
    algos.POLICY_LOSSES.remove(names["main_loss"])
    algos.ADVANTAGE_ESTIMATORS.remove(names["adv"])
    envhub.deregister(names["env"])
    sys.path.remove(str(tmp_path))
    sys.modules.pop(names["module"], None)


def test_carried_registrations_are_redone_in_a_fresh_process(plugins, tmp_path: Path) -> None:
    carried = carried_registrations()
    assert plugins["module"] in carried.modules
    assert str(tmp_path) in carried.paths
    blob = tmp_path / "carried.pkl"
    blob.write_bytes(pickle.dumps(carried))
    check = textwrap.dedent(f"""
        import pickle, sys
        from rockroll.envs.carry import apply_registrations
        from rockroll.trainer.algos import POLICY_LOSSES, ADVANTAGE_ESTIMATORS
        import rockroll.envhub as envhub
        apply_registrations(pickle.loads(open({str(blob)!r}, "rb").read()))
        assert {plugins["loss"]!r} in POLICY_LOSSES and {plugins["main_loss"]!r} in POLICY_LOSSES
        assert ADVANTAGE_ESTIMATORS.get({plugins["adv"]!r}).group_based
        assert envhub.spec({plugins["env"]!r}).entry_point.endswith(":FrozenLakeEnv")
        assert POLICY_LOSSES.get({plugins["main_loss"]!r}).__globals__["SCALE"] == 3.0
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_an_unpicklable_main_registration_is_refused_with_what_to_do() -> None:
    import threading

    from rockroll.trainer import algos

    name = f"locked_{uuid.uuid4().hex[:8]}"
    ns = {"__name__": "__main__", "LOCK": threading.Lock()}
    exec(  # noqa: S102
        f"from rockroll.trainer.algos import register_policy_loss\n"
        f"@register_policy_loss({name!r})\n"
        "def locked(logprobs, old_logprobs, advantages, mask):\n"
        "    with LOCK:\n"
        "        return logprobs, {}\n",
        ns,
    )
    try:
        with pytest.raises(CarryError, match="importable module") as err:
            carried_registrations()
        assert err.value.key == ("policy loss", name) and err.value.module == "__main__"
    finally:
        algos.POLICY_LOSSES.remove(name)
    carried_registrations()  # unregistered: nothing left to refuse


def test_a_registry_pickles_by_reference() -> None:
    from rockroll.trainer.algos import POLICY_LOSSES

    assert pickle.loads(pickle.dumps(POLICY_LOSSES)) is POLICY_LOSSES


@pytest.mark.slow
def test_plugin_loss_and_estimator_reach_ray_workers(plugins, tiny_model_dir) -> None:
    torch = pytest.importorskip("torch")
    ray = pytest.importorskip("ray")
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.learner.batch import collate
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.prepare import compute_advantages
    from rockroll.trainer.learner.ray_workers import RayWorkers
    from rockroll.trainer.learner.workers import LocalWorkers
    from tests.trainer.conftest import random_samples

    torch.set_num_threads(1)
    base = {
        "model": {"path": str(tiny_model_dir)},
        "rollout": {"scheduler": {"group_size": 4, "num_env_groups": 2}},
        "algo": {"adv_estimator": plugins["adv"], "pg_variant": plugins["loss"], "dynamic_sampling": False},
        "optim": {"lr": 1e-3, "micro_batch_size": 4},
    }
    ray_cfg = {"workers": {"use_ray": True, "num_workers": 1, "backend": "gloo"}}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        for loss in (plugins["loss"], plugins["main_loss"]):
            algo = {**base["algo"], "pg_variant": loss}
            cfg = config_from_dict({**base, "algo": algo})
            model, tok = load_policy(cfg.model)
            weights0 = {k: v.clone() for k, v in model.state_dict().items()}
            batch = collate(random_samples(8, len(tok), seed=5, groups=2), tok.pad_token_id)
            local = LocalWorkers(model, cfg)
            batch.extras["old_logprobs"] = local.old_logprobs(batch)
            compute_advantages(batch, cfg.algo)
            expected = local.update(batch, step=0)
            workers = RayWorkers(None, config_from_dict({**base, "algo": algo, **ray_cfg}), weights=weights0)
            try:
                got = workers.update(batch, step=0)
            finally:
                workers.close()
            assert got["actor/pg_loss"] == pytest.approx(expected["actor/pg_loss"], abs=1e-5), loss
            assert got["actor/grad_norm"] == pytest.approx(expected["actor/grad_norm"], rel=1e-4), loss
    finally:
        ray.shutdown()
