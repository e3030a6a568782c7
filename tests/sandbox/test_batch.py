"""``run_batch``: many sessions' steps in one round trip per sandbox, exactly like single calls."""

from __future__ import annotations

import os
import signal
import time
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


def test_closing_a_session_while_a_batch_rides_on_its_connection_spoils_no_other_session(make_manager: Any) -> None:
    """A batch travels on its first session's connection; an episode cancelled meanwhile closes that
    session from another thread (a straggler of a redundant group). Once the close closed the
    connection halfway through the round trip, and every other session of the batch failed with it."""
    import random
    import threading

    m = make_manager(monitor_interval_s=None, max_sandboxes=1)
    rng = random.Random(0)
    failures: list[str] = []
    for _ in range(150):
        first, other = (m.open_session("FrozenLake-v0", is_slippery=False) for _ in range(2))
        run_batch([(first, "reset", {"seed": 1}), (other, "reset", {"seed": 1})])

        def steps(first: Any = first, other: Any = other) -> None:
            for _ in range(6):  # Left from the start: a wall, the episode goes on
                try:
                    out = run_batch([(first, "step", {"action": "Left"}), (other, "step", {"action": "Left"})])
                except Exception as e:  # noqa: BLE001 - the failure under test
                    failures.append(f"run_batch raised {e!r}")
                    return
                if isinstance(out[1], Exception):
                    failures.append(f"the other session failed: {out[1]!r}")

        t = threading.Thread(target=steps)
        t.start()
        time.sleep(rng.uniform(0, 0.008))
        first.close()
        t.join(30)
        other.close()
    assert failures == []
    assert m.get(m.list()[0].id).sessions == 0  # every close counted once
