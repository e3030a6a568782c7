"""The sandbox's manager, pool, spec and backend configs speak the one config dialect (envs/config.py)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rockroll.envs.config import ConfigError, ConfigModel
from rockroll.sandbox.backends import BackendConfig
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.docker_backend import AutoConfig, DockerConfig
from rockroll.sandbox.manager_config import ManagerConfig
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.process import ProcessConfig

MODELS = [ManagerConfig, PoolConfig, SandboxSpec, DockerConfig, AutoConfig, ProcessConfig]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_field_is_described(model: type[ConfigModel]) -> None:
    assert issubclass(model, ConfigModel)
    assert not [name for name, f in model.model_fields.items() if not f.description]


def test_configs_are_frozen_and_hashable() -> None:
    spec = SandboxSpec(name="p", memory_mb=256)
    pool = PoolConfig(spec=spec, min_idle=0, max_total=2)
    cfg = ManagerConfig(backend=ProcessConfig(state_dir="/tmp/x"), pools=[pool], monitor_interval_s=None)
    assert cfg.pools == (pool,) and isinstance(cfg.backend, ProcessConfig)  # lists read as tuples
    keyed = {spec: 1, pool: 2, cfg.backend: 3, cfg: 4}  # usable as dict keys (a pool is keyed by its spec)
    assert (
        keyed[SandboxSpec(name="p", memory_mb=256)] == 1 and keyed[PoolConfig(spec=spec, max_total=2, min_idle=0)] == 2
    )
    for obj, attr, value in ((spec, "cpus", 2.0), (pool, "min_idle", 1), (cfg, "max_sandboxes", 1)):
        with pytest.raises(ValidationError, match="frozen"):
            setattr(obj, attr, value)


@pytest.mark.parametrize(
    ("build", "key", "says"),
    [
        (lambda: ManagerConfig(max_sandboxes=0), "max_sandboxes", ">= 1"),
        (lambda: ManagerConfig(backend="proces"), "backend", "Did you mean 'process'"),
        (lambda: ManagerConfig(pools=[{"min_idle": 3, "max_total": 2}]), "pools.0", "must not exceed max_total"),
        (lambda: PoolConfig(min_idle=-1), "min_idle", ">= 0"),
        (lambda: SandboxSpec(memory_mb=4), "memory_mb", ">= 32"),
        (lambda: SandboxSpec.from_dict({"name": "x", "gpus": 1}), "gpus", "unknown key gpus"),
        (lambda: ProcessConfig(isolation="chroot"), "isolation", "must be one of auto, bwrap, unshare, none"),
    ],
)
def test_a_bad_field_names_its_key(build: Any, key: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as e:
        build()
    assert e.value.key == key and isinstance(e.value, ValueError)


def test_a_backend_takes_only_the_shared_settings_it_declares() -> None:
    cfg = ProcessConfig.from_settings(state_dir="/tmp/y", docker_hosts=("x",), image="i")
    assert cfg == ProcessConfig(state_dir="/tmp/y") and isinstance(cfg, BackendConfig)
