"""``rollout.sandbox_sessions``: the run's sandbox manager hosts that many env sessions per sandbox, so a
light env's episodes pack into few sandboxes (one round trip per sandbox a lock-step round)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockroll.agentrl.sources.sandbox import SandboxSource
from rockroll.trainer.config_io import load_config
from rockroll.trainer.pipeline import sandbox_manager

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "frozenlake_slippery.yaml"


@pytest.mark.parametrize("per_sandbox, sandboxes", [(8, 1), (3, 3)])
def test_sessions_per_sandbox(tmp_path: Path, per_sandbox: int, sandboxes: int) -> None:
    cfg = load_config(CONFIG, ["rollout.sandbox=process", f"rollout.sandbox_sessions={per_sandbox}"])
    manager = sandbox_manager(cfg, tmp_path)
    source = SandboxSource(manager)
    try:
        envs = [source.open("FrozenLake-v0", {"is_slippery": True, "size": 4}) for _ in range(8)]
        assert all(env.reset(seed=i)[0] for i, env in enumerate(envs))
        assert len({source.location(env) for env in envs}) == sandboxes
        for env in envs:
            source.close(env)
    finally:
        manager.close()
    assert manager.backend.list_managed(manager.config.name) == []
