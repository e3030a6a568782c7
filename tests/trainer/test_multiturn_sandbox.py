"""The trainer's multi-turn rollout through process sandboxes survives a sandbox killed mid-episode:
the batch completes, the lost episodes are replayed on a fresh env (or masked), and no infra loss is
scored as the agent's failure."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.slow
@pytest.mark.parametrize("lockstep", [True, False])
def test_multiturn_batch_survives_a_killed_process_sandbox(
    tiny_model_dir: Path, tmp_path: Path, lockstep: bool
) -> None:
    from rockroll.agentrl.engines.hf import HFEngine
    from rockroll.agentrl.sources.kinds import SandboxSource
    from rockroll.sandbox.manager import SandboxManager
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.rollout.multiturn import MultiTurnDriver

    cfg = config_from_dict({
        "model": {"path": str(tiny_model_dir)},
        "rollout": {"env_kwargs": {"is_slippery": True}, "sandbox": "process",
                    "episode": {"history": "last_k", "history_k": 0, "system_prompt": "none", "max_turns": 12,
                                "max_tokens_per_turn": 6, "max_invalid_actions": None, "lockstep": lockstep},
                    "scheduler": {"group_size": 4, "num_env_groups": 4}},
    })  # fmt: skip
    manager = SandboxManager(backend="process", name="mt-kill", db_url=f"sqlite:///{tmp_path}/sb.db")
    killed: list[str] = []

    class KillingEngine(HFEngine):
        """Kills the sandboxes hosting sessions at the 40th generation request: every one of the 16
        episodes has reset and most are between turns, so the kill lands mid-episode (a timer could
        fire before the first step, which a re-open absorbs, or after the last: the batch takes well
        under a second). Lock-step rounds ask for a round's requests together."""

        requests = 0

        def _count(self, n: int) -> None:
            before = KillingEngine.requests
            KillingEngine.requests += n
            if before < 40 <= KillingEngine.requests:
                for sb in manager.list():
                    if sb.sessions > 0:
                        os.killpg(int(sb.handle.ref), signal.SIGKILL)
                        killed.append(sb.id)

        async def generate(self, request: Any) -> Any:
            self._count(1)
            return await super().generate(request)

        async def generate_batch(self, requests: list[Any]) -> list[Any]:
            self._count(len(requests))
            return await super().generate_batch(requests)

    engine = KillingEngine(model_path=str(tiny_model_dir), max_batch_size=64, seed=0)
    driver = MultiTurnDriver(cfg, engine, SandboxSource(manager))
    try:
        trajs, metrics = driver.next_batch()
    finally:
        driver.close()
        manager.close()
    assert killed, "no sandbox was killed"
    assert len(trajs) == 16  # complete groups: every episode replayed or masked, none lost
    assert metrics["rollout/infra_retries"] + sum(t.masked for t in trajs) > 0
    for t in trajs:
        assert t.failure is None or t.failure.kind == "agent" or t.masked
        if not t.masked:
            assert t.turns and all(u.response_ids for u in t.turns)
