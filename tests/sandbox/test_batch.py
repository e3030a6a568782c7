"""``run_batch``: many sessions' steps in one round trip per sandbox, exactly like single calls."""

from __future__ import annotations

import os
import signal
from typing import Any

import rockroll.envhub as envhub
from rockroll.envs.errors import ResetNeeded
from rockroll.sandbox.errors import SandboxLost
from rockroll.sandbox.session import run_batch

MOVES = ["<answer>Down</answer>", "<answer>Right</answer>", "junk", "<answer>Up</answer>", "<answer>Left</answer>"]


def test_batched_steps_match_in_process_play(make_manager: Any) -> None:
    m = make_manager()
    sessions = [m.open_session("FrozenLake-v0", is_slippery=True) for _ in range(3)]
    local = [envhub.make("FrozenLake-v0", is_slippery=True) for _ in range(3)]
    resets = run_batch([(s, "reset", {"seed": i}) for i, s in enumerate(sessions)])
    assert resets == [env.reset(seed=i) for i, env in enumerate(local)]
    for move in MOVES:
        live = [i for i, env in enumerate(local) if env.elapsed_steps < 20 and not env._done]
        got = run_batch([(sessions[i], "step", {"action": move}) for i in live])
        want = [local[i].step(move) for i in live]
        assert got == want
    for s in sessions:
        s.close()


def test_one_bad_item_fails_alone_and_a_dead_sandbox_fails_its_items(make_manager: Any) -> None:
    m = make_manager()
    a, b = m.open_session("Sokoban-v0"), m.open_session("Sokoban-v0")
    assert a.sandbox is b.sandbox  # least-loaded placement packs them on the one sandbox
    a.reset(seed=0)
    out = run_batch([(a, "step", {"action": "<answer>Up</answer>"}), (b, "step", {"action": "<answer>Up</answer>"})])
    assert isinstance(out[0], tuple) and isinstance(out[1], ResetNeeded)  # b was never reset
    os.killpg(int(a.sandbox.handle.ref), signal.SIGKILL)
    out = run_batch([(a, "step", {"action": "<answer>Up</answer>"}), (b, "reset", {"seed": 1})])
    assert all(isinstance(r, SandboxLost) for r in out)
    a.close()
    b.close()
