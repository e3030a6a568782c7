"""Step latency and throughput through the control plane, next to in-process and direct-sandbox numbers.

    .venv/bin/python bench/dataplane/api_bench.py [--seconds 4] [--sessions 1,16,64]

Starts a real ``rockroll serve`` (process backend, one pooled sandbox) and plays FrozenLake-v0 with
random actions (auto-reset at episode end) in these modes:

* ``in-process``: ``envhub.make`` envs stepped in this process (the floor);
* ``sandbox direct``: :class:`~rockroll.sandbox.session.RemoteSession` through a local ``SandboxManager``
  (no HTTP API; the cost of the sandbox hop);
* ``api step``: one HTTP request per step, N sessions stepped concurrently (AsyncClient);
* ``api websocket``: one WebSocket per session (``/v1/sessions/{id}/ws``), N sessions concurrently;
* ``api batch``: one ``POST /v1/sessions/step`` request steps all N sessions.

For each: per-step latency P50/P99 (for a batch, the batch's latency), steps/s, and CPU time per
step of the API server, of the sandbox processes and of this benchmark's client (read from /proc:
meaningful even on a busy machine). "API overhead" is the P50 of an API mode with one session minus that of ``sandbox
direct``: what HTTP/WebSocket, auth, routing and recording add on top of the sandbox hop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Callable

import numpy as np
from rich.console import Console
from rich.table import Table

ACTIONS = ["<answer>Left</answer>", "<answer>Right</answer>", "<answer>Up</answer>", "<answer>Down</answer>"]
ENV = "FrozenLake-v0"


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` (and their waited-for children) so far."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick
    return total


def pids_matching(needle: str) -> list[int]:
    out = []
    for proc in os.listdir("/proc"):
        if proc.isdigit():
            try:
                if needle in open(f"/proc/{proc}/cmdline").read():
                    out.append(int(proc))
            except OSError:
                pass
    return out


def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q)) * 1000 if samples else float("nan")


def run_local(make: Callable[[], object], n: int, seconds: float) -> tuple[list[float], int, float]:
    """Round-robin ``n`` envs in this thread; returns (step latencies, steps, elapsed)."""
    rng = np.random.default_rng(0)
    envs = [make() for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    lat: list[float] = []
    steps = 0
    t_end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < t_end:
        for env in envs:
            t = time.perf_counter()
            _, _, term, trunc, _ = env.step(ACTIONS[rng.integers(4)])
            lat.append(time.perf_counter() - t)
            steps += 1
            if term or trunc:
                env.reset(seed=steps)
    elapsed = time.perf_counter() - t0
    for env in envs:
        env.close()
    return lat, steps, elapsed


async def run_api_steps(url: str, token: str, n: int, seconds: float) -> tuple[list[float], int, float]:
    from rockroll.client.sdk import AsyncClient

    async with AsyncClient(url, token, max_connections=n + 4) as c:
        infos = [await c.create_session(ENV) for _ in range(n)]
        await asyncio.gather(*[c.reset(s["id"], seed=i) for i, s in enumerate(infos)])
        lat: list[float] = []
        counts = [0]
        t_end = time.perf_counter() + seconds

        async def worker(sid: str, seed: int) -> None:
            rng = np.random.default_rng(seed)
            while time.perf_counter() < t_end:
                t = time.perf_counter()
                out = await c.step(sid, ACTIONS[rng.integers(4)])
                lat.append(time.perf_counter() - t)
                counts[0] += 1
                if out["terminated"] or out["truncated"]:
                    await c.reset(sid, seed=counts[0])

        t0 = time.perf_counter()
        await asyncio.gather(*[worker(s["id"], i) for i, s in enumerate(infos)])
        elapsed = time.perf_counter() - t0
        await asyncio.gather(*[c.close_session(s["id"]) for s in infos])
    return lat, counts[0], elapsed


async def run_api_ws(url: str, token: str, n: int, seconds: float) -> tuple[list[float], int, float]:
    """N sessions, each played over its own WebSocket, concurrently."""
    import json

    from websockets.asyncio.client import connect

    from rockroll.client.sdk import AsyncClient

    async with AsyncClient(url, token) as c:
        infos = [await c.create_session(ENV) for _ in range(n)]
        lat: list[float] = []
        counts = [0]
        t_end = time.perf_counter() + seconds
        ws_base = "ws" + url.removeprefix("http")

        async def worker(sid: str, seed: int) -> None:
            rng = np.random.default_rng(seed)
            headers = {"Authorization": f"Bearer {token}"}
            async with connect(f"{ws_base}/v1/sessions/{sid}/ws", additional_headers=headers) as ws:
                await ws.send(json.dumps({"op": "reset", "seed": seed}))
                await ws.recv()
                while time.perf_counter() < t_end:
                    t = time.perf_counter()
                    await ws.send(json.dumps({"op": "step", "action": ACTIONS[rng.integers(4)]}))
                    out = json.loads(await ws.recv())
                    lat.append(time.perf_counter() - t)
                    counts[0] += 1
                    if out["terminated"] or out["truncated"]:
                        await ws.send(json.dumps({"op": "reset", "seed": counts[0]}))
                        await ws.recv()

        t0 = time.perf_counter()
        await asyncio.gather(*[worker(s["id"], i) for i, s in enumerate(infos)])
        elapsed = time.perf_counter() - t0
        for s in infos:
            await c.close_session(s["id"])
    return lat, counts[0], elapsed


def run_api_batch(url: str, token: str, n: int, seconds: float) -> tuple[list[float], int, float]:
    from rockroll.client.sdk import Client

    rng = np.random.default_rng(1)
    with Client(url, token) as c:
        ids = [c.create_session(ENV)["id"] for _ in range(n)]
        c.step_many({}, resets={sid: i for i, sid in enumerate(ids)})
        lat: list[float] = []
        steps = 0
        done: dict[str, int] = {}
        t_end = time.perf_counter() + seconds
        t0 = time.perf_counter()
        while time.perf_counter() < t_end:
            live = [sid for sid in ids if sid not in done]
            t = time.perf_counter()
            results = c.step_many({sid: ACTIONS[rng.integers(4)] for sid in live}, resets=done)
            lat.append(time.perf_counter() - t)
            steps += len(live)
            done = {
                sid: steps for sid, r in zip(live, results, strict=False) if r.get("terminated") or r.get("truncated")
            }
        elapsed = time.perf_counter() - t0
        for sid in ids:
            c.close_session(sid)
    return lat, steps, elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=4.0, help="Duration of each measurement.")
    p.add_argument("--sessions", default="1,16,64", help="Concurrent session counts.")
    p.add_argument("--per-sandbox", type=int, default=16, help="Sessions per sandbox on the server.")
    p.add_argument("--modes", default="local,direct,step,ws,batch", help="Which of local,direct,step,ws,batch to run.")
    args = p.parse_args()
    counts = [int(x) for x in args.sessions.split(",")]

    import rockroll.envhub as envhub
    from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
    from rockroll.sandbox.manager import SandboxManager

    console = Console()
    modes = set(args.modes.split(","))
    rows: list[tuple[str, int, list[float], int, float, str]] = []
    for n in counts if "local" in modes else []:
        rows.append(("in-process", n, *run_local(lambda: envhub.make(ENV), n, args.seconds), ""))

    d = scratch_dir("bench")
    with SandboxManager(
        name="bench-direct",
        backend="process",
        db_url=f"sqlite:///{d}/direct.db",
        state_dir=str(d / "sb-direct"),
        pools=(),
        idle_ttl_s=None,
    ) as mgr:
        from rockroll.sandbox.base import SandboxSpec

        spec = SandboxSpec(name="bench", max_sessions=max(counts) + 1)
        for n in counts if "direct" in modes else []:
            rows.append(
                ("sandbox direct", n, *run_local(lambda s=spec: mgr.open_session(ENV, spec=s), n, args.seconds), "")
            )

    srv = ServerProc(d, extra=["--pool-size", "2", "--max-sessions-per-sandbox", str(args.per_sandbox)])
    token = create_token(srv.db_url, "bench")
    try:
        srv.start()
        api_pid = [srv.proc.pid] if srv.proc else []

        def measured(mode: str, n: int, fn: Callable[[], tuple[list[float], int, float]]) -> None:
            from rockroll.client.sdk import Client

            with Client(srv.url, token) as c:  # grow the pool first, so every sandbox is counted
                for sid in [c.create_session(ENV)["id"] for _ in range(n)]:
                    c.close_session(sid)
            sandbox_pids = [p for p in pids_matching(str(d / "sb")) if p not in api_pid]
            c0, s0, b0 = cpu_seconds(api_pid), cpu_seconds(sandbox_pids), time.process_time()
            lat, steps, elapsed = fn()
            api_ms = (cpu_seconds(api_pid) - c0) / max(1, steps) * 1000
            sb_ms = (cpu_seconds(sandbox_pids) - s0) / max(1, steps) * 1000
            bench_ms = (time.process_time() - b0) / max(1, steps) * 1000
            rows.append((mode, n, lat, steps, elapsed, f"{api_ms:.3f} / {sb_ms:.3f} / {bench_ms:.3f}"))

        for n in counts if "step" in modes else []:
            measured("api step", n, lambda n=n: asyncio.run(run_api_steps(srv.url, token, n, args.seconds)))
        for n in counts if "ws" in modes else []:
            measured("api websocket", n, lambda n=n: asyncio.run(run_api_ws(srv.url, token, n, args.seconds)))
        for n in counts if "batch" in modes else []:
            measured("api batch", n, lambda n=n: run_api_batch(srv.url, token, n, args.seconds))
    finally:
        srv.cleanup()

    table = Table(
        "mode",
        "sessions",
        "P50 ms",
        "P99 ms",
        "steps/s",
        "CPU ms/step (API / sandbox / client)",
        title=f"{ENV}, random actions, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
    )
    p50: dict[tuple[str, int], float] = {}
    for mode, n, lat, steps, elapsed, cpu in rows:
        p50[(mode, n)] = pct(lat, 50)
        table.add_row(mode, str(n), f"{pct(lat, 50):.3f}", f"{pct(lat, 99):.3f}", f"{steps / elapsed:,.0f}", cpu)
    console.print(table)
    for mode in ("api step", "api websocket", "api batch"):
        if (mode, 1) in p50 and ("sandbox direct", 1) in p50:
            over = p50[(mode, 1)] - p50[("sandbox direct", 1)]
            console.print(f"API overhead per step, {mode} (P50, 1 session, minus sandbox direct): {over:.3f} ms")


if __name__ == "__main__":
    main()
