"""The run's env source: in-process envs, or sessions in sandboxes of the run's own sandbox manager."""

from __future__ import annotations

import hashlib
from contextlib import ExitStack
from pathlib import Path

from rockroll.agentrl.sources.kinds import EnvSource, LocalSource, SandboxSource
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.manager import SandboxManager
from rockroll.trainer.config import TrainConfig

__all__ = ["run_env_source", "sandbox_manager", "sandbox_manager_name"]


def sandbox_manager(cfg: TrainConfig, run_dir: Path) -> SandboxManager:
    """The run's own sandbox manager (``rollout.sandbox`` backend, SQLite under the run dir).

    Its name carries a digest of the run dir: a manager adopts the sandboxes labelled with its name and
    removes those it has no record of, so two runs of one config name in different run dirs (a test
    beside a bench, two users) must not share one, while a resumed run keeps its own.
    """
    return SandboxManager(
        backend=cfg.rollout.sandbox,
        name=sandbox_manager_name(cfg.name, run_dir),
        db_url=f"sqlite:///{run_dir.resolve()}/sandboxes.db",
        default_spec=SandboxSpec(max_sessions=cfg.rollout.sandbox_sessions),
    )


def sandbox_manager_name(name: str, run_dir: Path) -> str:
    """``train-<run name>-<digest of the run dir>``: the label of run ``name``'s sandboxes in ``run_dir``."""
    return f"train-{name}-{hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:8]}"


def run_env_source(cfg: TrainConfig, stack: ExitStack, run_dir: Path) -> EnvSource:
    """Where envs come from: in-process, or sessions in process/docker sandboxes of the run's own manager."""
    if cfg.rollout.sandbox == "none":
        return LocalSource()
    manager = sandbox_manager(cfg, run_dir)
    stack.callback(manager.close)
    return SandboxSource(manager)
