"""ALFWorld-v0's two experts on generated homes: success, turns per task type, share solved within a turn cap.

The planner knows where every object is; the searching expert (:mod:`rockroll.envs.alfworld.searcher`) acts
only on what the agent has seen, so its episodes are longer. The cap is the multi-turn config's ``max_turns``::

    .venv/bin/python bench/learning/alfworld_experts.py [--episodes 300] [--seed 0] [--cap 20] [--num-rooms 1]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

import rockroll.envhub as envhub
from rockroll.envs.experts import expert_for

EXPERTS = {"planner": None, "searcher": "rockroll.envs.alfworld.searcher:expert"}


def play(factory: str | None, episodes: int, seed: int, num_rooms: int) -> dict[str, list[tuple[bool, int]]]:
    """(success, turns) of each episode by task type, within the env's 50-step limit."""
    env = envhub.make("ALFWorld-v0", num_rooms=num_rooms)
    out: dict[str, list[tuple[bool, int]]] = defaultdict(list)
    for s in range(seed, seed + episodes):
        env.reset(seed=s)
        expert, turns, success = expert_for(env, factory), 0, False
        while (cmd := expert()) is not None:
            _, _, terminated, truncated, info = env.step(f"<answer>{cmd}</answer>")
            turns += 1
            if terminated or truncated:
                success = bool(info["success"])
                break
        out[env.unwrapped.category() or "?"].append((success, turns))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cap", type=int, default=20)
    ap.add_argument("--num-rooms", type=int, default=1)
    a = ap.parse_args()
    print(f"| expert | task type | homes | success | median turns | max turns | solved within {a.cap} turns |")
    print("|---|---|---|---|---|---|---|")
    for name, factory in EXPERTS.items():
        by = play(factory, a.episodes, a.seed, a.num_rooms)
        by["all"] = [r for rows in list(by.values()) for r in rows]
        for kind, rows in sorted(by.items(), key=lambda kv: (kv[0] == "all", kv[0])):
            turns = [t for _, t in rows]
            within = sum(ok and t <= a.cap for ok, t in rows) / len(rows)
            print(
                f"| {name} | {kind} | {len(rows)} | {sum(ok for ok, _ in rows) / len(rows):.1%} | "
                f"{statistics.median(turns):g} | {max(turns)} | {within:.1%} |"
            )


if __name__ == "__main__":
    main()
