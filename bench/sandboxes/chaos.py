"""Chaos test: a rollout through real Docker sandboxes while sandboxes are killed at random times.

    .venv/bin/python bench/sandboxes/chaos.py [--groups 32] [--group-size 8] [--sandboxes 16] [--json out.json]

A :class:`~rockroll.agentrl.rollout.scheduler.RolloutScheduler` plays ``groups x group_size`` FrozenLake episodes
(the ``random`` engine with a constant per-request latency stands in for a model) on env sessions
placed by a :class:`~rockroll.sandbox.manager.SandboxManager` on ``--sandboxes`` Docker sandboxes. While it
runs, a killer thread faults ``--kill-fraction`` of the sandboxes per wave, at random times, with
these faults in turn:

* ``kill``: ``docker kill`` of the container;
* ``server``: SIGKILL of the in-sandbox server process (seen from the host);
* ``pause``: ``docker pause``: the container stays but stops answering.

Reported: groups completed vs requested (goal: all), episodes masked as infra failures, retries,
time from fault to replacement healthy (P50/P95, goal P95 <= 3 s), containers and sessions leaked
after the manager closed (goal 0). Everything talks to the host's Docker socket and unix sockets
only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rockroll.sandbox.managed import SandboxState

FAULTS = ("kill", "server", "pause")


@dataclass
class ChaosConfig:
    """One chaos run.

    Attributes:
        groups: env groups requested; group_size: episodes per group.
        sandboxes: Docker sandboxes (the manager's ``max_sandboxes``); sessions_per_sandbox: slots each.
        kill_fraction: share of the sandboxes faulted per wave.
        wave_s: seconds between waves; max_waves: most waves (the run stops them when it ends).
        gen_ms: engine latency per request; invalid_prob: share of invalid (no-op) answers, which
            keeps episodes going; max_turns: turns per episode.
        redundancy / extra_groups: the scheduler's redundancy; max_retries: retries per episode.
        timeout_s: bound on the whole rollout; seed: RNG of the faults and the batch.
        faults: fault kinds, applied in turn (a comma-separated subset of ``kill,server,pause``).
    """

    groups: int = 32
    group_size: int = 8
    sandboxes: int = 16
    sessions_per_sandbox: int = 4
    kill_fraction: float = 0.2
    wave_s: float = 3.0
    max_waves: int = 10
    gen_ms: float = 300.0
    invalid_prob: float = 0.6
    max_turns: int = 10
    redundancy: int = 2
    extra_groups: int = 2
    max_retries: int = 3
    timeout_s: float = 600.0
    seed: int = 0
    faults: str = "kill,server,pause"
    image: str = "rockroll-sandbox:latest"


@dataclass
class ChaosResult:
    """What a chaos run measured (times in seconds from the rollout's start)."""

    config: dict[str, Any]
    groups_requested: int = 0
    groups_completed: int = 0
    episodes_delivered: int = 0
    episodes_masked: int = 0
    infra_retries: int = 0
    faults: list[dict[str, Any]] = field(default_factory=list)
    ready_timeline: list[tuple[float, int]] = field(default_factory=list)
    rollout_s: float = 0.0
    containers_leaked: int = 0
    sessions_leaked: int = 0
    failures_by_stage: dict[str, float] = field(default_factory=dict)
    masked_reasons: dict[str, int] = field(default_factory=dict)

    def recovery(self, q: float) -> float:
        """Percentile ``q`` of fault -> replacement healthy (NaN when no fault recovered)."""
        xs = [f["recovered_s"] for f in self.faults if f.get("recovered_s") is not None]
        return float(np.percentile(xs, q)) if xs else float("nan")

    @property
    def unrecovered(self) -> int:
        return sum(f.get("recovered_s") is None for f in self.faults if "error" not in f)


def inject(manager: Any, handle: Any, kind: str) -> bool:
    """Apply fault ``kind`` to the container of ``handle`` (Docker backend); False if there was none to fault."""
    container = manager.backend._container(handle)
    if container is None:
        return False
    if kind == "kill":
        container.kill()
    elif kind == "pause":
        for attempt in range(3):  # the cgroup-v1 freezer sometimes fails on a busy container
            try:
                container.pause()
                break
            except Exception:  # noqa: BLE001 - docker.errors.APIError; the last one is reported
                if attempt == 2:
                    raise
                time.sleep(0.2)
    elif kind == "server":
        top = container.top(ps_args="-eo pid,args")
        pid_col = top["Titles"].index("PID")
        pids = [int(p[pid_col]) for p in top["Processes"] if "rockroll.sandbox.server" in " ".join(p[pid_col + 1 :])]
        killed = 0
        for pid in pids:
            try:  # gone since the listing (a child dies with the server): not this fault's to count
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                continue
        return killed > 0
    else:
        raise ValueError(f"unknown fault {kind!r}, expected one of {FAULTS}")
    return True


def target(sb: Any) -> tuple[int, Any] | None:
    """``sb``'s generation and handle if it is ready now, read together under its lock (None if not).

    A sandbox being replaced holds its lock while it boots, so a busy lock means "not ready". Reading
    the generation and the handle apart would let a replacement slip in between: the fault would then
    hit a container the manager is already throwing away, and the watch would wait for a generation
    that never comes.
    """
    if not sb.lock.acquire(blocking=False):
        return None
    try:
        if sb.deleted or sb.state != SandboxState.READY or sb.handle is None:
            return None
        return sb.generation, sb.handle
    finally:
        sb.lock.release()


def _watch(manager: Any, sb: Any, generation: int, record: dict[str, Any], t0: float, limit_s: float) -> None:
    """Set ``record['recovered_s']`` once ``sb`` runs a newer generation and answers again."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if sb.deleted:
            return
        if sb.generation > generation and sb.state == SandboxState.READY:
            record["recovered_s"] = time.monotonic() - start
            record["recovered_at"] = time.monotonic() - t0
            return
        time.sleep(0.01)
    record["left_as"] = f"{sb.state.value} at generation {sb.generation}, deleted={sb.deleted}"


class Killer(threading.Thread):
    """Faults ``kill_fraction`` of the ready sandboxes per wave at random times until stopped."""

    def __init__(self, manager: Any, cfg: ChaosConfig, t0: float, faults: list[dict[str, Any]]) -> None:
        super().__init__(name="chaos-killer", daemon=True)
        self.manager, self.cfg, self.t0, self.faults = manager, cfg, t0, faults
        self.rng = random.Random(cfg.seed)
        self.kinds = [k for k in cfg.faults.split(",") if k]
        if not self.kinds or set(self.kinds) - set(FAULTS):
            raise ValueError(f"faults must be a comma-separated subset of {','.join(FAULTS)}, got {cfg.faults!r}")
        self.stop = threading.Event()
        self.watchers: list[threading.Thread] = []

    def run(self) -> None:
        per_wave = max(1, math.ceil(self.cfg.kill_fraction * self.cfg.sandboxes))
        for _wave in range(self.cfg.max_waves):
            offsets = sorted(self.rng.uniform(0.2, self.cfg.wave_s) for _ in range(per_wave))
            wave_start = time.monotonic()
            hit: set[str] = set()
            for off in offsets:
                if self.stop.wait(max(0.0, wave_start + off - time.monotonic())):
                    return
                ready = [sb for sb in self.manager.list() if sb.state == SandboxState.READY and sb.id not in hit]
                if not ready:
                    continue
                sb = self.rng.choice(ready)
                picked = target(sb)
                if picked is None:  # replaced since the listing
                    continue
                gen, handle = picked
                kind = self.kinds[len(self.faults) % len(self.kinds)]
                record: dict[str, Any] = {
                    "at": time.monotonic() - self.t0, "kind": kind, "sandbox": sb.id, "generation": gen,
                }  # fmt: skip
                try:
                    if not inject(self.manager, handle, kind):
                        continue  # its container was gone already: nothing was faulted
                except Exception as e:  # noqa: BLE001 - a fault that could not be applied is reported
                    record["error"] = f"{type(e).__name__}: {e}"
                    self.faults.append(record)
                    continue
                hit.add(sb.id)
                self.faults.append(record)
                w = threading.Thread(target=_watch, args=(self.manager, sb, gen, record, self.t0, 60.0), daemon=True)
                w.start()
                self.watchers.append(w)
            if self.stop.wait(max(0.0, wave_start + self.cfg.wave_s - time.monotonic())):
                return


def _sample_ready(manager: Any, t0: float, out: list[tuple[float, int]], stop: threading.Event) -> None:
    for _ in range(100_000):  # bounded: 10 samples/s for ~3 hours at most
        out.append((time.monotonic() - t0, sum(sb.state == SandboxState.READY for sb in manager.list())))
        if stop.wait(0.1):
            return


def count_containers(manager_name: str) -> int:
    """Containers (any state) labelled with this manager's name."""
    import docker

    client = docker.from_env()
    try:
        return len(client.containers.list(all=True, filters={"label": f"rockroll.manager={manager_name}"}))
    finally:
        client.close()


def run_chaos(cfg: ChaosConfig) -> ChaosResult:
    """Run one chaos rollout (see the module docstring) and return its measurements."""
    from rockroll.agentrl.engines.random_engine import RandomEngine
    from rockroll.agentrl.faults.latency import Latency
    from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
    from rockroll.agentrl.rollout.scheduler import RolloutScheduler
    from rockroll.agentrl.sources.kinds import SandboxSource
    from rockroll.sandbox.base import SandboxSpec
    from rockroll.sandbox.manager import SandboxManager

    res = ChaosResult(config=asdict(cfg), groups_requested=cfg.groups)
    name = f"chaos{uuid.uuid4().hex[:6]}"
    state = tempfile.mkdtemp(prefix="rrc-", dir="/tmp")
    spec = SandboxSpec(image=cfg.image, max_sessions=cfg.sessions_per_sandbox, memory_mb=256, cpus=1.0)
    manager = SandboxManager(
        name=name, backend="docker", state_dir=state, db_url=f"sqlite:///{state}/chaos.db",
        default_spec=spec, max_sandboxes=cfg.sandboxes, monitor_interval_s=0.2, probe_timeout_s=1.0,
        failure_threshold=2, idle_ttl_s=None,
    )  # fmt: skip
    stop = threading.Event()
    killer: Killer | None = None
    source = SandboxSource(manager, capacity_wait_s=cfg.timeout_s)
    try:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=4) as pool:  # warm: every sandbox up before the clock starts
            list(pool.map(lambda _i: manager.create(), range(cfg.sandboxes)))
        engine = RandomEngine(
            latency=Latency("constant", cfg.gen_ms / 1000), invalid_prob=cfg.invalid_prob, seed=cfg.seed
        )
        episode = EpisodeConfig(
            max_turns=cfg.max_turns, max_tokens_per_turn=32, max_retries=cfg.max_retries,
            step_timeout_s=10.0, start_timeout_s=60.0, episode_timeout_s=min(300.0, cfg.timeout_s),
        )  # fmt: skip
        rcfg = SchedulerConfig(
            env_ids=["FrozenLake-v0"], num_env_groups=cfg.groups, group_size=cfg.group_size,
            group_size_redundancy=cfg.redundancy, extra_groups=cfg.extra_groups, episode=episode, seed=cfg.seed,
        )  # fmt: skip
        t0 = time.monotonic()
        sampler = threading.Thread(target=_sample_ready, args=(manager, t0, res.ready_timeline, stop), daemon=True)
        sampler.start()
        killer = Killer(manager, cfg, t0, res.faults)
        killer.start()

        async def rollout() -> Any:
            scheduler = RolloutScheduler(engine, source, rcfg)
            try:
                return await asyncio.wait_for(scheduler.run_batch(), cfg.timeout_s)
            finally:
                await scheduler.close(timeout_s=60.0)

        batch = asyncio.run(rollout())
        res.rollout_s = time.monotonic() - t0
        killer.stop.set()
        killer.join(timeout=30)  # a fault it is applying now still gets its watcher, and that watcher is joined
        for w in killer.watchers:
            w.join(timeout=65)
        m = batch.metrics
        res.groups_completed = int(m["rollout/groups_delivered"])
        res.episodes_delivered = int(m["rollout/episodes_delivered"])
        res.episodes_masked = int(m["rollout/episodes_masked"])
        res.infra_retries = int(m.get("rollout/infra_retries", 0))
        res.failures_by_stage = {k.split("/", 2)[-1]: v for k, v in m.items() if "infra_failures/" in k}
        for t in batch.masked:
            if t.failure is not None:
                key = f"{t.failure.stage}: {t.failure.error}: {t.failure.message[:100]}"
                res.masked_reasons[key] = res.masked_reasons.get(key, 0) + 1
    finally:
        stop.set()
        if killer is not None:
            killer.stop.set()
        manager.close()
        res.sessions_leaked = source.open_count
        res.containers_leaked = count_containers(name)
    return res


def render(res: ChaosResult) -> str:
    """A Markdown table of the run."""
    applied = [f for f in res.faults if "error" not in f]
    refused = [f for f in res.faults if "error" in f]
    kinds = {k: sum(f["kind"] == k for f in applied) for k in FAULTS}
    rows = [
        ("groups completed / requested", f"{res.groups_completed} / {res.groups_requested}", "all"),
        ("episodes delivered", str(res.episodes_delivered), ""),
        ("episodes masked (infra failures)", str(res.episodes_masked), ""),
        ("infra retries", str(res.infra_retries), ""),
        ("infra failures by stage", ", ".join(f"{k} {v:.0f}" for k, v in res.failures_by_stage.items()) or "-", ""),
        ("faults applied", f"{len(applied)} ({', '.join(f'{k} {v}' for k, v in kinds.items())})", ""),
        ("faults the daemon refused", "; ".join(f"{f['kind']}: {f['error'][:90]}" for f in refused) or "0", ""),
        ("fault -> replacement healthy P50 / P95", f"{res.recovery(50):.2f} / {res.recovery(95):.2f} s", "P95 <= 3 s"),
        ("faults never recovered", str(res.unrecovered), "0"),
        ("containers leaked / sessions leaked", f"{res.containers_leaked} / {res.sessions_leaked}", "0 / 0"),
        ("rollout wall time", f"{res.rollout_s:.1f} s", ""),
    ]
    lines = ["| metric | measured | goal |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    top = sorted(res.masked_reasons.items(), key=lambda kv: -kv[1])[:5]
    lines += [f"\nmasked: {n} x `{reason}`" for reason, n in top]
    lost = [f for f in applied if f.get("recovered_s") is None]
    lines += [
        f"\nnever recovered: {f['kind']} on {f['sandbox']} at {f['at']:.1f} s, left {f.get('left_as')}" for f in lost
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = ChaosConfig()
    for name, value in asdict(d).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    p.add_argument("--json", default="", help="also write the measurements here")
    args = vars(p.parse_args())
    out = args.pop("json")
    cfg = ChaosConfig(**args)
    print(
        f"chaos: {cfg.groups} groups x {cfg.group_size} episodes on {cfg.sandboxes} Docker sandboxes, "
        f"{cfg.kill_fraction:.0%} of them faulted every {cfg.wave_s:.0f} s"
    )
    res = run_chaos(cfg)
    print(render(res))
    if out:
        with open(out, "w") as f:
            json.dump(asdict(res) | {"p50_s": res.recovery(50), "p95_s": res.recovery(95)}, f, indent=1)


if __name__ == "__main__":
    main()
