"""Load: N concurrent sessions stepping through the API for a fixed time, per N.

    .venv/bin/python bench/dataplane/load.py [--sessions 64,128,256] [--seconds 60] [--backend docker] [--json out.json]

Starts a real ``rockroll serve`` on 127.0.0.1 (``--backend``, ``--per-sandbox`` sessions per
sandbox), then for each N: opens N FrozenLake-v0 sessions, lets N asyncio workers step them with
random actions (one HTTP request per step, auto-reset at episode end) for ``--seconds``, and closes
them. Reported per N: steps/s, step latency P50/P99, errors (goal: 0; an error is any exception or
non-2xx answer), and the control plane's resident memory (RSS, sampled every second over the whole
run: it should not grow from one level to the next).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np

ACTIONS = ["<answer>Left</answer>", "<answer>Right</answer>", "<answer>Up</answer>", "<answer>Down</answer>"]
ENV = "FrozenLake-v0"


@dataclass
class Level:
    """One load level's numbers."""

    sessions: int
    seconds: float = 0.0
    steps: int = 0
    errors: int = 0
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    error_kinds: dict[str, int] = field(default_factory=dict)
    latency_sample_ms: list[float] = field(default_factory=list)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (0 when it is gone)."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def run_level(url: str, token: str, n: int, seconds: float, seed: int = 0) -> Level:
    """N workers stepping N sessions for ``seconds`` (bounded by time; errors counted, not raised)."""
    from rockroll.client.sdk import AsyncClient

    level = Level(sessions=n)
    lat: list[float] = []
    async with AsyncClient(url, token, max_connections=n + 8, timeout_s=60, retries=2) as c:
        infos = await asyncio.gather(*[c.create_session(ENV) for _ in range(n)])
        ids = [s["id"] for s in infos]
        await asyncio.gather(*[c.reset(sid, seed=i) for i, sid in enumerate(ids)])
        t_end = time.perf_counter() + seconds

        async def worker(sid: str, k: int) -> None:
            rng = random.Random(seed * 100_003 + k)
            while time.perf_counter() < t_end:
                t = time.perf_counter()
                try:
                    out = await c.step(sid, rng.choice(ACTIONS))
                    lat.append(time.perf_counter() - t)
                    level.steps += 1
                    if out["terminated"] or out["truncated"]:
                        await c.reset(sid, seed=rng.randrange(2**31))
                except Exception as e:  # noqa: BLE001 - counted and reported
                    level.errors += 1
                    key = f"{type(e).__name__}: {str(e)[:80]}"
                    level.error_kinds[key] = level.error_kinds.get(key, 0) + 1
                    await asyncio.sleep(0.05)

        t0 = time.perf_counter()
        await asyncio.gather(*[worker(sid, k) for k, sid in enumerate(ids)])
        level.seconds = time.perf_counter() - t0
        await asyncio.gather(*[c.close_session(sid) for sid in ids], return_exceptions=True)
    if lat:
        ms = np.array(lat) * 1000
        level.p50_ms, level.p99_ms = float(np.percentile(ms, 50)), float(np.percentile(ms, 99))
        pick = np.random.default_rng(0).choice(len(ms), size=min(len(ms), 20_000), replace=False)
        level.latency_sample_ms = [round(float(x), 3) for x in ms[pick]]
    return level


def run_load(
    counts: list[int], seconds: float, backend: str = "docker", per_sandbox: int = 64
) -> tuple[list[Level], list[tuple[float, float]]]:
    """Every level against one server; returns the levels and the server's RSS timeline."""
    from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
    from rockroll.api.server.settings import Settings

    sandboxes = max(2, -(-max(counts) // per_sandbox) + 1)
    extra = ["--pool-size", "1", "--max-sandboxes", str(sandboxes), "--max-sessions-per-sandbox", str(per_sandbox)]
    srv = ServerProc(scratch_dir("load"), backend=backend, extra=extra + ["--no-train-jobs"])
    token = create_token(srv.db_url, "load")
    timeline: list[tuple[float, float]] = []
    stop = threading.Event()
    levels: list[Level] = []
    try:
        srv.start(timeout_s=180)
        pid = srv.proc.pid if srv.proc else 0
        t0 = time.monotonic()

        def sample() -> None:
            for _ in range(100_000):  # bounded: one sample a second
                timeline.append((time.monotonic() - t0, rss_mb(pid)))
                if stop.wait(1.0):
                    return

        threading.Thread(target=sample, daemon=True).start()
        for n in counts:
            start_rss = rss_mb(pid)
            level = asyncio.run(run_level(srv.url, token, n, seconds))
            level.rss_start_mb, level.rss_end_mb = start_rss, rss_mb(pid)
            levels.append(level)
            print(
                f"{n} sessions: {level.steps_per_s:,.0f} steps/s, P50 {level.p50_ms:.1f} ms, "
                f"P99 {level.p99_ms:.1f} ms, {level.errors} errors, RSS {level.rss_end_mb:.0f} MiB",
                flush=True,
            )
    finally:
        stop.set()
        srv.stop()
        if backend == "docker":
            name = Settings(database_url=srv.db_url).manager_name()
            subprocess.run(f"docker ps -aq --filter label=rockroll.manager={name} | xargs -r docker rm -f",
                           shell=True, capture_output=True, timeout=120)  # fmt: skip
        srv.cleanup()
    return levels, timeline


def render(levels: list[Level], timeline: list[tuple[float, float]]) -> str:
    """A Markdown table of the levels and a line on memory growth."""
    lines = [
        "| sessions | steps/s | P50 ms | P99 ms | errors | control-plane RSS start -> end (MiB) |",
        "| ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for lv in levels:
        lines.append(
            f"| {lv.sessions} | {lv.steps_per_s:,.0f} | {lv.p50_ms:.1f} | {lv.p99_ms:.1f} | {lv.errors} | "
            f"{lv.rss_start_mb:.0f} -> {lv.rss_end_mb:.0f} |"
        )
    for lv in levels:
        for kind, count in lv.error_kinds.items():
            lines.append(f"\n{lv.sessions} sessions: {count} x `{kind}`")
    if timeline:
        rss = [r for _t, r in timeline if r > 0]
        if rss:
            lines.append(f"\ncontrol-plane RSS: first {rss[0]:.0f} MiB, max {max(rss):.0f} MiB, last {rss[-1]:.0f} MiB")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", default="64,128,256")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--backend", default="docker", choices=["docker", "process"])
    p.add_argument("--per-sandbox", type=int, default=64)
    p.add_argument("--json", default="")
    args = p.parse_args()
    counts = [int(x) for x in args.sessions.split(",")]
    print(f"load: {counts} sessions x {args.seconds:.0f} s, {args.backend} backend, {os.cpu_count()} cores")
    levels, timeline = run_load(counts, args.seconds, args.backend, args.per_sandbox)
    print(render(levels, timeline))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"levels": [asdict(lv) | {"steps_per_s": lv.steps_per_s} for lv in levels],
                       "rss_timeline": timeline, "backend": args.backend}, f)  # fmt: skip


if __name__ == "__main__":
    main()
