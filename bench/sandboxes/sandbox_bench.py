"""Sandbox manager benchmark: start-up, pool, crash recovery, step latency, density.

    .venv/bin/python bench/sandboxes/sandbox_bench.py [--backend docker|process] [--creates 10] [--max-concurrent 40]

Prints one table:

* create -> healthy P50/P95: ``SandboxManager.create()`` until the server answers ``health``;
* warm-pool acquire P50: ``acquire()`` with an idle sandbox ready in the pool;
* crash -> replacement healthy P50: ``docker kill`` (or SIGKILL) until the monitor's replacement
  answers (monitor interval 0.2 s, included);
* session step latency P50/P99 of FrozenLake through the sandbox vs in-process;
* how many concurrent sandboxes this machine holds: sandboxes are added (each with an open
  FrozenLake session) until a round of one step on every session has a P99 above 50 ms, creation
  fails, or ``--max-concurrent`` is reached.

Targets (Docker): create -> healthy P50 <= 1.0 s, pool acquire P50 <= 20 ms, crash -> healthy
P50 <= 2 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
import uuid

import numpy as np
from rich.console import Console
from rich.table import Table

import rockroll.envhub as envhub
from rockroll.sandbox.backends import backend_names
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.managed import SandboxState
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.pool import PoolConfig


def _ms(xs: list[float], q: float) -> float:
    return float(np.percentile(np.array(xs) * 1000, q))


def _manager(backend: str, state: str, **kw: object) -> SandboxManager:
    return SandboxManager(
        name=f"bench{uuid.uuid4().hex[:6]}",
        backend=backend,
        state_dir=state,
        db_url=f"sqlite:///{state}/bench.db",
        monitor_interval_s=0.2,
        idle_ttl_s=None,
        **kw,  # type: ignore[arg-type]
    )


def bench_create(m: SandboxManager, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        sb = m.create()
        times.append(time.perf_counter() - t)
        m.delete(sb.id)
    return times


def bench_acquire(backend: str, state: str, n: int) -> list[float]:
    pool = PoolConfig(spec=SandboxSpec(name="warm"), min_idle=2, max_total=4)
    m = _manager(backend, state, pools=(pool,))
    times = []
    try:
        for _ in range(n):
            m.wait_until(
                lambda: sum(s.state == SandboxState.READY and not s.leased for s in m.members("warm")) >= 2, 60
            )
            t = time.perf_counter()
            sb = m.acquire("warm")
            times.append(time.perf_counter() - t)
            m.release(sb)
    finally:
        m.close()
    return times


def _kill(m: SandboxManager, ref: str) -> None:
    if m.backend.name == "docker":
        import docker

        docker.from_env().containers.get(ref).kill()
    else:
        os.killpg(int(ref), signal.SIGKILL)


def bench_crash(m: SandboxManager, n: int) -> list[float]:
    sb = m.create()
    times = []
    for _ in range(n):
        gen = sb.generation
        t = time.perf_counter()
        _kill(m, sb.handle.ref)
        if not m.wait_until(lambda g=gen: sb.generation > g and sb.state == SandboxState.READY, 60, 0.005):
            raise SandboxError("no replacement within 60 s")
        times.append(time.perf_counter() - t)
    m.delete(sb.id)
    return times


def bench_steps(env: object, n: int) -> list[float]:
    env.reset(seed=0)  # type: ignore[attr-defined]
    actions = ["<answer>Right</answer>", "<answer>Down</answer>", "<answer>Left</answer>", "<answer>Up</answer>"]
    times = []
    for i in range(n):
        t = time.perf_counter()
        _, _, term, trunc, _ = env.step(actions[i % 4])  # type: ignore[attr-defined]
        times.append(time.perf_counter() - t)
        if term or trunc:
            env.reset(seed=i)  # type: ignore[attr-defined]
    return times


def bench_density(m: SandboxManager, limit: int) -> tuple[int, float, str]:
    """Sandboxes held with one live session each before a step round's P99 passes 50 ms."""
    sessions = []
    p99 = 0.0
    stop = "max-concurrent reached"
    for _ in range(limit):
        try:
            sb = m.create(SandboxSpec(cpus=0.5, memory_mb=256))
            s = sb.open_session("FrozenLake-v0")
            s.reset(seed=0)
            sessions.append(s)
        except SandboxError as e:
            stop = f"create failed: {type(e).__name__}"
            break
        if len(sessions) % 4 == 0:
            lat = []
            for _ in range(5):
                for s in sessions:
                    t = time.perf_counter()
                    _, _, term, trunc, _ = s.step("<answer>Right</answer>")
                    lat.append(time.perf_counter() - t)
                    if term or trunc:
                        s.reset(seed=1)
            p99 = _ms(lat, 99)
            if p99 > 50:
                stop = f"step P99 {p99:.1f} ms > 50 ms"
                break
    return len(sessions), p99, stop


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="docker", choices=backend_names())
    p.add_argument("--creates", type=int, default=10)
    p.add_argument("--acquires", type=int, default=20)
    p.add_argument("--crashes", type=int, default=5)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--max-concurrent", type=int, default=40)
    args = p.parse_args()
    console = Console()
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="rrb-", dir="/tmp") as state:
        m = _manager(args.backend, state, max_sandboxes=args.max_concurrent + 2)
        try:
            c = bench_create(m, args.creates)
            rows.append(("create -> healthy P50 / P95", f"{_ms(c, 50):.0f} / {_ms(c, 95):.0f} ms", "P50 <= 1000 ms"))
            console.print(f"create done: {rows[-1][1]}")
            a = bench_acquire(args.backend, state, args.acquires)
            rows.append(("warm-pool acquire P50 / P95", f"{_ms(a, 50):.2f} / {_ms(a, 95):.2f} ms", "P50 <= 20 ms"))
            console.print(f"acquire done: {rows[-1][1]}")
            k = bench_crash(m, args.crashes)
            rows.append(
                ("crash -> replacement healthy P50", f"{_ms(k, 50):.0f} ms (max {_ms(k, 100):.0f})", "<= 2000 ms")
            )
            console.print(f"crash done: {rows[-1][1]}")
            with m.open_session("FrozenLake-v0") as s:
                remote = bench_steps(s, args.steps)
            local = bench_steps(envhub.make("FrozenLake-v0"), args.steps)
            rows.append(("step P50 / P99, sandbox", f"{_ms(remote, 50):.3f} / {_ms(remote, 99):.3f} ms", ""))
            rows.append(("step P50 / P99, in-process", f"{_ms(local, 50):.3f} / {_ms(local, 99):.3f} ms", ""))
            n, p99, why = bench_density(m, args.max_concurrent)
            rows.append((f"concurrent sandboxes on {os.cpu_count()} cores", f"{n} (step P99 {p99:.1f} ms)", why))
        finally:
            m.close()
    table = Table(title=f"sandbox bench ({args.backend} backend)")
    for col in ("metric", "measured", "target / note"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
