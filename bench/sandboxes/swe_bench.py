"""SWE-v0 episode wall time for a scripted solve, in Docker when available, else a process sandbox.

    .venv/bin/python bench/sandboxes/swe_bench.py [--episodes 20] [--backend auto|docker|process|local ...]

Per backend: the sandbox start (first reset), then ``--episodes`` scripted episodes on different
tasks, each: reset, read the buggy file (``bash: cat``), run the tests, apply the reference fix
(``edit:``), run the tests again, submit. It reports the median and p90 of the episode wall time
and of each kind of step, and checks that every episode scored 1.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections import defaultdict

import numpy as np
from rich.console import Console
from rich.table import Table

from rockroll.envs.swe import SWEEnv, generated_tasks


def _ms(values: list[float]) -> str:
    a = np.asarray(values) * 1000
    return f"{np.median(a):.0f} / {np.percentile(a, 90):.0f}"


def bench(backend: str, episodes: int) -> dict[str, object]:
    """Run the scripted solve ``episodes`` times on ``backend``; return timings (seconds)."""
    tasks = generated_tasks()
    picks = [tasks[i].task_id for i in np.linspace(0, len(tasks) - 1, episodes).astype(int)]
    t0 = time.perf_counter()
    env = SWEEnv(backend=backend)
    env.reset(options={"task_id": picks[0]})
    start = time.perf_counter() - t0
    steps: dict[str, list[float]] = defaultdict(list)
    walls, rewards = [], []
    try:
        for task_id in picks:
            wall = time.perf_counter()
            t = time.perf_counter()
            env.reset(options={"task_id": task_id})
            steps["reset"].append(time.perf_counter() - t)
            module = env.task.meta["module"]  # type: ignore[union-attr]
            script = [("read", f"bash: cat {module}.py"), ("test", "bash: python3 run_tests.py")]
            script += [("edit", a) for a in env.reference_solution()]
            script += [("test", "bash: python3 run_tests.py"), ("submit", "submit")]
            for kind, answer in script:
                t = time.perf_counter()
                _, reward, *_ = env.step(f"<answer>{answer}</answer>")
                steps[kind].append(time.perf_counter() - t)
            walls.append(time.perf_counter() - wall)
            rewards.append(reward)
        name = env.executor_name
        isolation = getattr(env._executor, "isolation", name)
    finally:
        env.close()
    return {"backend": name, "isolation": isolation, "start": start, "walls": walls, "steps": steps, "rewards": rewards}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=20, help="scripted episodes per backend")
    parser.add_argument("--backend", nargs="*", default=["auto"], help="backends to measure (auto: Docker if usable)")
    args = parser.parse_args()
    console = Console()
    table = Table(title=f"SWE-v0 scripted solve ({platform.python_version()}, {platform.machine()}); ms median / p90")
    for col in ("backend", "sandbox start", "episode", "reset", "read", "test", "edit", "submit", "solved"):
        table.add_column(col, justify="right" if col != "backend" else "left")
    for backend in args.backend:
        r = bench(backend, args.episodes)
        steps = r["steps"]
        table.add_row(
            f"{backend} -> {r['backend']} ({r['isolation']})",
            f"{r['start'] * 1000:.0f}",
            _ms(r["walls"]),  # type: ignore[arg-type]
            *(_ms(steps[k]) for k in ("reset", "read", "test", "edit", "submit")),  # type: ignore[index]
            f"{sum(x == 1.0 for x in r['rewards'])}/{len(r['rewards'])}",  # type: ignore[union-attr]
        )
    console.print(table)


if __name__ == "__main__":
    main()
