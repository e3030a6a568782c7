"""Many sessions held open and stepped for minutes at one node agent: step latency, errors, memory drift.

    .venv/bin/python bench/dataplane/hold_bench.py --sessions 1024 --minutes 10 [--rate 0.5] [--json PATH]

Starts, on 127.0.0.1 only, a control plane without an embedded node (``rockroll serve
--no-embedded-node``) and one standalone ``rockroll node`` (process sandboxes) registered with it,
with room for every session (``--per-sandbox`` sessions per sandbox, enough sandboxes). Opens
``--sessions`` FrozenLake-v0 4x4 sessions through the control plane with the SDK (a few openers at a
time), then opens one data-plane WebSocket per session at the agent (``/v1/node/sessions/{id}/ws``)
and holds every socket open for the whole run. Each session plays like an agent that thinks between
steps: after each answer it waits a random time, uniform in [0.5, 1.5] / ``--rate`` seconds, then
sends one numbered step (random action; a reset when an episode ends; resets are not timed). The
offered load is ``sessions x rate`` steps/s; the achieved one is printed next to it.

Every ``--sample`` seconds (30) it reads from /proc the resident memory (RSS) of the control plane,
of the agent and the sum over the sandbox processes (the servers and their children), and their CPU.
Printed: per minute the steps, steps/s, P50/P99 step latency and errors; the RSS series; and one final
line: overall P99, errors, and the RSS drift (first vs last sample, and the slope of a least-squares
line in MB/min: over the run, after minute 1, over the last half). Where the slow steps sit: per
10-second window the P99, the steps over 100 ms and on how many sandboxes, how late this client's own
event loop ran, how long the agent's event-loop thread and this client's waited for a CPU
(/proc/PID/schedstat) and the most runnable tasks on the machine (/proc/stat), so a stall caused by
other work on a shared machine can be told from one inside the agent. ``--json PATH`` writes all of it.
Targets (issue "scale out on Ray", Numbers): at 1,024 sessions P99 <= 100 ms, 0 errors, memory flat
over 10 minutes.

Errors counted: an answer with ``error``, a socket that drops or times out (``--step-timeout``), a
failed reconnect. A dropped socket is reopened (at most ``MAX_RECONNECTS`` times per session) and
resumes from the session's last step number. Every loop is bounded in count and in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import secrets
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from rockroll.api.server.serve_proc import NodeProc, ServerProc, create_token, sandbox_pids, scratch_dir
from rockroll.client.sdk import ApiClientError, Client

ACTIONS = ["<answer>Left</answer>", "<answer>Right</answer>", "<answer>Up</answer>", "<answer>Down</answer>"]
ENV, KWARGS = "FrozenLake-v0", {"size": 4}
MAX_RECONNECTS = 5
CONNECT_CONCURRENCY = 32  # sockets opened at once (a burst of 1,024 handshakes would only queue)
OPENERS = 4  # threads opening sessions through the control plane
MB = 1024 * 1024
SLOW_S = 0.1  # a step slower than this is listed with its sandbox (where the stalls sit)
LAG_TICK_S = 0.05  # the client's own event loop is checked this often (a stall there is the client's, not the agent's)


# ------------------------------------------------------------------ /proc
def _stat(pid: int) -> tuple[int, float] | None:
    """``(ppid, CPU seconds)`` of ``pid``, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = raw[raw.rindex(")") + 2 :].split()
    return int(f[1]), (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (VmRSS; 0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(roots: list[int]) -> list[int]:
    """``roots`` and every process below them."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _stat(int(d.name))) is not None:
            children.setdefault(st[0], []).append(int(d.name))
    out, todo = [], list(roots)
    while todo and len(out) < 100_000:
        pid = todo.pop()
        if pid not in out:
            out.append(pid)
            todo.extend(children.get(pid, ()))
    return out


def schedstat(pid: int) -> tuple[float, float]:
    """``(s on a CPU, s waiting on a run queue)`` of the main thread of ``pid`` (0, 0 when unknown)."""
    try:
        run_ns, wait_ns, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


def procs_running() -> int:
    """Runnable tasks on the machine now (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("procs_running "):
            return int(line.split()[1])
    return 0


def cpu_s(pids: list[int]) -> float:
    return sum(st[1] for pid in pids if (st := _stat(pid)) is not None)


def sample(cp_pid: int, agent_pid: int, label: str, t0: float) -> dict[str, Any]:
    """One memory and CPU sample of the control plane, the agent and the sandboxes (servers and children)."""
    sb = descendants([p for p in sandbox_pids(label) if p not in (cp_pid, agent_pid)])
    return {
        "t_s": round(time.monotonic() - t0, 1),
        "cp_rss_mb": round(rss_mb(cp_pid), 1),
        "agent_rss_mb": round(rss_mb(agent_pid), 1),
        "sandboxes_rss_mb": round(sum(rss_mb(p) for p in sb), 1),
        "sandbox_procs": len(sb),
        "cp_cpu_s": round(cpu_s([cp_pid]), 2),
        "agent_cpu_s": round(cpu_s([agent_pid]), 2),
        "sandboxes_cpu_s": round(cpu_s(sb), 2),
        "loadavg": os.getloadavg()[0],
    }


# ------------------------------------------------------------ the players
@dataclass
class Tally:
    """What the players recorded: per step ``(t since the stepping began, latency s)``, errors with their time."""

    steps: list[tuple[float, float]] = field(default_factory=list)
    slow: list[tuple[float, float, str]] = field(default_factory=list)  # steps over SLOW_S: (t, latency, sandbox)
    loop_lag: list[tuple[float, float]] = field(default_factory=list)  # this client's event loop: (t, lateness s)
    # once a second: (t, run-queue wait s of the agent's event-loop thread, of this client's, runnable tasks)
    sched: list[tuple[float, float, float, int]] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)
    resets: int = 0
    reconnects: int = 0
    sockets_open: int = 0
    sockets_peak: int = 0
    connect_s: float = 0.0  # opening every socket (and the first reset) before the stepping began
    t0: float = 0.0  # time.monotonic() when the stepping began


async def play(
    infos: list[dict],
    seconds: float,
    rate: float,
    *,
    step_timeout_s: float,
    seed: int,
    tally: Tally,
    on_start: Any = None,
    connect_timeout_s: float = 300.0,
) -> None:
    """One WebSocket per session, all held open; each steps at ~``rate``/s for ``seconds``.

    First every socket is opened and its session reset (``CONNECT_CONCURRENCY`` handshakes at a
    time); the stepping window starts once all are open (or ``connect_timeout_s`` passed), and
    ``on_start(t0)`` is called then. A socket that drops is reopened, at most ``MAX_RECONNECTS`` times.
    """
    from websockets.asyncio.client import connect

    loop_t0 = time.monotonic()
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    go = asyncio.Event()
    settled = [0]  # sessions whose first socket is open, or that gave up
    max_steps = int(seconds * rate * 3) + 10  # bound per session (the mean is seconds x rate)

    def now_s() -> float:
        return time.monotonic() - (tally.t0 or loop_t0)

    def settle() -> None:
        settled[0] += 1
        if settled[0] == len(infos) and not go.is_set():
            start()

    def start() -> None:
        tally.t0 = time.monotonic()
        tally.connect_s = tally.t0 - loop_t0
        go.set()
        if on_start is not None:
            on_start(tally.t0)

    async def session(i: int, info: dict) -> None:
        rng = random.Random(seed * 100_003 + i)
        dp = info["data_plane"]
        url = "ws" + dp["endpoint"].removeprefix("http") + f"/v1/node/sessions/{info['id']}/ws"
        header = {"Authorization": f"Bearer {dp['token']}"}
        seq, first = 0, True
        for attempt in range(MAX_RECONNECTS + 1):
            if go.is_set() and time.monotonic() >= tally.t0 + seconds:
                return
            try:
                async with gate:
                    ws = await connect(url, additional_headers=header, compression=None, open_timeout=step_timeout_s)
            except Exception as e:  # noqa: BLE001 - counted
                tally.errors.append((now_s(), f"connect: {type(e).__name__}: {e}"[:200]))
                if attempt == MAX_RECONNECTS and first:
                    settle()
                await asyncio.sleep(1.0)
                continue
            tally.sockets_open += 1
            tally.sockets_peak = max(tally.sockets_peak, tally.sockets_open)
            try:
                call = _caller(ws, step_timeout_s)
                if first:
                    await call({"op": "reset", "seed": rng.randrange(2**31)})
                    first = False
                    settle()
                    await asyncio.wait_for(go.wait(), connect_timeout_s + 60)
                    await asyncio.sleep(rng.uniform(0, 1 / rate))  # spread the first steps over one period
                else:
                    tally.reconnects += 1
                    seq = (await call({"op": "seq"}))["last_seq"]
                t_end = tally.t0 + seconds
                for _ in range(max_steps):
                    if time.monotonic() >= t_end:
                        return
                    sent = now_s()
                    seq += 1
                    t = time.perf_counter()
                    out = await call({"op": "step", "seq": seq, "action": rng.choice(ACTIONS)})
                    lat = time.perf_counter() - t
                    if "error" in out:
                        tally.errors.append((sent, f"step: {json.dumps(out)[:200]}"))
                    else:
                        tally.steps.append((sent, lat))
                        if lat > SLOW_S:
                            tally.slow.append((sent, lat, info.get("sandbox_id", "")))
                        if out["terminated"] or out["truncated"]:
                            reset = await call({"op": "reset", "seed": rng.randrange(2**31)})
                            tally.resets += 1
                            if "error" in reset:
                                tally.errors.append((sent, f"reset: {json.dumps(reset)[:200]}"))
                    think = rng.uniform(0.5, 1.5) / rate
                    await asyncio.sleep(max(0.0, min(think, t_end - time.monotonic())))
                return
            except Exception as e:  # noqa: BLE001 - a dropped socket or a timeout: counted, then reopened
                tally.errors.append((now_s(), f"socket: {type(e).__name__}: {e}"[:200]))
                if first:  # failed before its first reset answered
                    first = False
                    settle()
            finally:
                tally.sockets_open -= 1
                await ws.close()

    async def watchdog() -> None:  # the stepping starts even if some sockets never open
        try:
            await asyncio.wait_for(go.wait(), connect_timeout_s)
        except TimeoutError:
            start()
        for _ in range(int(seconds / LAG_TICK_S) + 1):  # this loop's lateness, while the sessions step
            t = time.monotonic()
            if t >= tally.t0 + seconds:
                return
            await asyncio.sleep(LAG_TICK_S)
            tally.loop_lag.append((t - tally.t0, time.monotonic() - t - LAG_TICK_S))

    await asyncio.gather(watchdog(), *(session(i, info) for i, info in enumerate(infos)))


def _caller(ws: Any, timeout_s: float) -> Any:
    """One call on ``ws``: send a message, wait at most ``timeout_s`` for its answer."""

    async def call(msg: dict) -> dict:
        await ws.send(json.dumps(msg))
        return json.loads(await asyncio.wait_for(ws.recv(), timeout_s))

    return call


# -------------------------------------------------------------- the run
def _open_all(url: str, token: str, n: int, timeout_s: float) -> list[dict]:
    """``n`` sessions through the control plane, ``OPENERS`` at a time; all or an error."""
    deadline = time.monotonic() + timeout_s

    def opener(k: int) -> list[dict]:
        out = []
        with Client(url, token) as c:
            for _ in range(k):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"opening {n} sessions took more than {timeout_s:.0f} s")
                out.append(c.create_session(ENV, KWARGS))
        return out

    shares = [n // OPENERS + (1 if i < n % OPENERS else 0) for i in range(OPENERS)]
    with ThreadPoolExecutor(OPENERS) as pool:
        return [s for part in pool.map(opener, shares) for s in part]


def _close_all(url: str, token: str, infos: list[dict]) -> int:
    """Close the sessions; the number that failed to close."""
    failed = 0
    with Client(url, token) as c:
        for s in infos:
            try:
                c.close_session(s["id"])
            except (ApiClientError, httpx.HTTPError):
                failed += 1
    return failed


def _wait_for_node(url: str, admin: str, node_id: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        resp = httpx.get(f"{url}/v1/nodes", headers={"Authorization": f"Bearer {admin}"}, timeout=10)
        if any(n["id"] == node_id and n["live"] for n in resp.json().get("nodes", [])):
            return
        time.sleep(0.2)
    raise RuntimeError(f"node {node_id} did not register within {timeout_s:.0f} s")


def pct_ms(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) * 1000 if xs else float("nan")


def hold(
    sessions: int,
    seconds: float,
    rate: float,
    *,
    per_sandbox: int = 64,
    sample_s: float = 30.0,
    step_timeout_s: float = 10.0,
    seed: int = 0,
    log: Any = print,
) -> dict[str, Any]:
    """Start the cluster, open and hold ``sessions`` sessions stepped for ``seconds`` at ``rate``; the results."""
    if sessions < 1 or seconds <= 0 or rate <= 0 or sample_s <= 0:
        raise ValueError("sessions, seconds, rate and sample must be positive")
    d = scratch_dir("hold")
    secret_file = d / "secret"
    secret_file.write_text(secrets.token_urlsafe(32))
    ttl = seconds + 3600  # session tokens outlive the run: every socket is held open throughout
    cp = ServerProc(d / "cp", extra=["--cluster-secret-file", str(secret_file), "--no-embedded-node",
                                     "--session-token-ttl-s", str(int(ttl))])  # fmt: skip
    (d / "cp").mkdir()
    n_sandboxes = math.ceil(sessions / per_sandbox)
    node = NodeProc(d, secret_file, node_id=f"hold{secrets.token_hex(3)}", max_sandboxes=n_sandboxes + 1,
                    max_sessions_per_sandbox=per_sandbox)  # fmt: skip
    tally = Tally()
    samples: list[dict[str, Any]] = []
    infos: list[dict] = []
    result: dict[str, Any] = {}
    token = ""
    try:
        token = create_token(cp.db_url, "bench")
        admin = create_token(cp.db_url, "admin", admin=True)
        cp.start()
        node.control_plane = cp.url
        node.start()
        _wait_for_node(cp.url, admin, node.node_id)
        if cp.proc is None or node.proc is None:
            raise RuntimeError("the control plane or the agent is not running")
        cp_pid, agent_pid = cp.proc.pid, node.proc.pid
        t_open = time.monotonic()
        infos = _open_all(cp.url, token, sessions, timeout_s=max(120.0, sessions * 1.0))
        open_s = time.monotonic() - t_open
        placed = {s["data_plane"]["node"] for s in infos}
        log(
            f"opened {len(infos)} sessions in {open_s:.1f} s on node(s) {sorted(placed)}; load {os.getloadavg()[0]:.2f}"
        )

        started, stop = threading.Event(), threading.Event()
        connect_timeout_s = max(60.0, sessions * 0.3)

        def sampler() -> None:
            if not started.wait(timeout=connect_timeout_s + 120):
                return
            t0 = tally.t0
            for k in range(math.ceil(seconds / sample_s)):  # bounded: one per period while the sockets are held
                if k and stop.wait(max(0.0, t0 + k * sample_s - time.monotonic())):
                    break
                s = sample(cp_pid, agent_pid, node.label, t0) | {"sockets_open": tally.sockets_open}
                samples.append(s)
                log(
                    f"  t={s['t_s']:6.1f}s RSS MB: control plane {s['cp_rss_mb']:.1f}, agent {s['agent_rss_mb']:.1f}, "
                    f"sandboxes {s['sandboxes_rss_mb']:.1f} ({s['sandbox_procs']} procs); sockets open "
                    f"{s['sockets_open']}; steps so far {len(tally.steps)}, errors {len(tally.errors)}; "
                    f"load {s['loadavg']:.2f}"
                )

        def scheduler() -> None:  # where the CPU went each second: who waited for a core
            if not started.wait(timeout=connect_timeout_s + 120):
                return
            last = (schedstat(agent_pid)[1], schedstat(os.getpid())[1])
            for k in range(1, math.ceil(seconds) + 1):
                if stop.wait(max(0.0, tally.t0 + k - time.monotonic())):
                    break
                now = (schedstat(agent_pid)[1], schedstat(os.getpid())[1])
                tally.sched.append((k - 1.0, now[0] - last[0], now[1] - last[1], procs_running()))
                last = now

        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        th2 = threading.Thread(target=scheduler, daemon=True)
        th2.start()
        asyncio.run(play(infos, seconds, rate, step_timeout_s=step_timeout_s, seed=seed, tally=tally,
                         on_start=lambda _t0: started.set(), connect_timeout_s=connect_timeout_s))  # fmt: skip
        elapsed = time.monotonic() - tally.t0
        stop.set()
        th.join(timeout=60)
        th2.join(timeout=10)
        after = sample(cp_pid, agent_pid, node.label, tally.t0) | {"sockets_open": tally.sockets_open}
        log(f"connected {sessions} sockets in {tally.connect_s:.1f} s; stepped {elapsed:.1f} s")
        result = summarise(
            tally, samples, sessions=sessions, rate=rate, seconds=seconds, elapsed=elapsed, open_s=open_s
        )
        result |= {
            "after_run": after,
            "per_sandbox": per_sandbox,
            "sandboxes_allowed": n_sandboxes + 1,
            "sample_s": sample_s,
        }
    finally:
        if infos and cp.proc is not None:
            result["close_failures"] = _close_all(cp.url, token, infos)
        node.cleanup()
        cp.cleanup()
        shutil.rmtree(d, ignore_errors=True)
    result["sandbox_procs_left"] = len(sandbox_pids(node.label))
    return result


def _slope(ts: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` over ``ts`` (s), in units per minute."""
    if len(ts) < 2:
        return float("nan")
    return float(np.polyfit(np.array(ts) / 60.0, np.array(ys), 1)[0])


def summarise(
    tally: Tally,
    samples: list[dict[str, Any]],
    *,
    sessions: int,
    rate: float,
    seconds: float,
    elapsed: float,
    open_s: float,
) -> dict[str, Any]:
    lat = [s[1] for s in tally.steps]
    after_1 = [s[1] for s in tally.steps if s[0] >= 60]
    minutes = []
    for m in range(math.ceil(seconds / 60)):
        ls = [s[1] for s in tally.steps if m * 60 <= s[0] < (m + 1) * 60]
        errs = sum(1 for e in tally.errors if m * 60 <= e[0] < (m + 1) * 60)
        span = min(60.0, elapsed - m * 60)
        minutes.append({"minute": m + 1, "steps": len(ls), "steps_per_s": len(ls) / span if span > 0 else 0.0,
                        "p50_ms": pct_ms(ls, 50), "p99_ms": pct_ms(ls, 99), "max_ms": pct_ms(ls, 100),
                        "errors": errs})  # fmt: skip
    windows = []  # 10-second windows: where a stall sits in time
    for w in range(math.ceil(seconds / 10)):
        ls = [s[1] for s in tally.steps if w * 10 <= s[0] < (w + 1) * 10]
        slow = [x for x in tally.slow if w * 10 <= x[0] < (w + 1) * 10]
        lag = [x[1] for x in tally.loop_lag if w * 10 <= x[0] < (w + 1) * 10]
        sch = [x for x in tally.sched if w * 10 <= x[0] < (w + 1) * 10]
        windows.append({"t_s": w * 10, "steps": len(ls), "p99_ms": round(pct_ms(ls, 99), 2),
                        "max_ms": round(pct_ms(ls, 100), 1), "slow_steps": len(slow),
                        "slow_sandboxes": len({x[2] for x in slow}),
                        "client_loop_lag_max_ms": round(max(lag, default=0.0) * 1000, 1),
                        "agent_runq_wait_ms": round(sum(x[1] for x in sch) * 1000, 1),
                        "client_runq_wait_ms": round(sum(x[2] for x in sch) * 1000, 1),
                        "runnable_max": max((x[3] for x in sch), default=0)})  # fmt: skip
    drift = {}
    for key in ("cp_rss_mb", "agent_rss_mb", "sandboxes_rss_mb"):
        ts, ys = [s["t_s"] for s in samples], [s[key] for s in samples]
        late = [(t, y) for t, y in zip(ts, ys, strict=True) if t >= 60]
        half = [(t, y) for t, y in zip(ts, ys, strict=True) if t >= seconds / 2]
        drift[key] = {
            "first": ys[0] if ys else float("nan"),
            "last": ys[-1] if ys else float("nan"),
            "max": max(ys, default=float("nan")),
            "slope_mb_per_min": _slope(ts, ys),
            "slope_after_1min_mb_per_min": _slope([t for t, _ in late], [y for _, y in late]),
            "slope_last_half_mb_per_min": _slope([t for t, _ in half], [y for _, y in half]),
        }
    cpu = {}
    if len(samples) >= 2 and elapsed > 0:
        span = samples[-1]["t_s"] - samples[0]["t_s"]
        for key in ("cp_cpu_s", "agent_cpu_s", "sandboxes_cpu_s"):
            used = samples[-1][key] - samples[0][key]
            cpu[key.replace("_cpu_s", "")] = {"cores": used / span if span else float("nan"),
                                               "ms_per_step": used / max(1, len(lat)) * 1000}  # fmt: skip
    return {
        "sessions": sessions,
        "rate_per_session": rate,
        "offered_steps_per_s": sessions * rate,
        "achieved_steps_per_s": len(lat) / elapsed if elapsed else float("nan"),
        "seconds": elapsed,
        "open_s": open_s,
        "connect_s": tally.connect_s,
        "steps": len(lat),
        "resets": tally.resets,
        "errors": len(tally.errors),
        "error_examples": [e[1] for e in tally.errors[:10]],
        "reconnects": tally.reconnects,
        "sockets_peak": tally.sockets_peak,
        "p50_ms": pct_ms(lat, 50),
        "p99_ms": pct_ms(lat, 99),
        "p999_ms": pct_ms(lat, 99.9),
        "max_ms": pct_ms(lat, 100),
        "p99_after_1min_ms": pct_ms(after_1, 99),
        "minutes": minutes,
        "windows_10s": windows,
        "slow_steps_by_sandbox": _by_sandbox(tally.slow),
        "client_loop_lag_p99_ms": pct_ms([x[1] for x in tally.loop_lag], 99),
        "client_loop_lag_max_ms": pct_ms([x[1] for x in tally.loop_lag], 100),
        "samples": samples,
        "rss_drift": drift,
        "cpu": cpu,
        "cores": os.cpu_count(),
    }


def _by_sandbox(slow: list[tuple[float, float, str]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for _t, _lat, sb in slow:
        out[sb] = out.get(sb, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def render(r: dict[str, Any]) -> str:
    lines = [
        f"{r['sessions']} sessions held {r['seconds']:.0f} s (opened in {r['open_s']:.1f} s, sockets connected in "
        f"{r['connect_s']:.1f} s), sockets open at "
        f"peak {r['sockets_peak']}; offered {r['offered_steps_per_s']:.0f} steps/s ({r['rate_per_session']}/s per "
        f"session), achieved {r['achieved_steps_per_s']:.1f} steps/s",
        "minute  steps  steps/s  P50 ms  P99 ms  max ms  errors",
    ]
    for m in r["minutes"]:
        lines.append(f"{m['minute']:6d} {m['steps']:6d} {m['steps_per_s']:8.1f} {m['p50_ms']:7.2f} "
                     f"{m['p99_ms']:7.2f} {m['max_ms']:7.1f} {m['errors']:7d}")  # fmt: skip
    lines.append("RSS MB (t s: control plane / agent / sandboxes):")
    lines.append("  " + "; ".join(f"{s['t_s']:.0f}: {s['cp_rss_mb']:.0f} / {s['agent_rss_mb']:.0f} / "
                                  f"{s['sandboxes_rss_mb']:.0f}" for s in r["samples"]))  # fmt: skip
    a = r.get("after_run")
    if a:
        lines.append(f"  after the run (sockets closed, sessions open): {a['cp_rss_mb']:.0f} / {a['agent_rss_mb']:.0f} / "
                     f"{a['sandboxes_rss_mb']:.0f}")  # fmt: skip
    for k, v in r["cpu"].items():
        lines.append(f"CPU {k}: {v['cores']:.2f} cores, {v['ms_per_step']:.3f} ms per step")
    dr = r["rss_drift"]
    drift = ", ".join(
        f"{name} {dr[k]['first']:.1f} -> {dr[k]['last']:.1f} MB ({dr[k]['slope_mb_per_min']:+.2f} MB/min; after "
        f"minute 1 {dr[k]['slope_after_1min_mb_per_min']:+.2f}, last half {dr[k]['slope_last_half_mb_per_min']:+.2f})"
        for name, k in (("control plane", "cp_rss_mb"), ("agent", "agent_rss_mb"), ("sandboxes", "sandboxes_rss_mb"))
    )
    ok = r["p99_ms"] <= 100 and r["errors"] == 0
    lines.append(
        f"overall: {r['steps']} steps, P50 {r['p50_ms']:.2f} ms, P99 {r['p99_ms']:.2f} ms, P99.9 {r['p999_ms']:.2f} "
        f"ms, max {r['max_ms']:.1f} ms, P99 after minute 1 {r['p99_after_1min_ms']:.2f} ms, errors {r['errors']} (reconnects {r['reconnects']}); RSS drift: {drift}; "
        f"target P99 <= 100 ms and 0 errors: {'met' if ok else 'MISSED'}"
    )
    bad = [w for w in r["windows_10s"] if w["p99_ms"] > 100]
    lines.append(
        f"stalls: {len(bad)} of {len(r['windows_10s'])} 10-s windows had a P99 over 100 ms; steps over "
        f"{SLOW_S * 1000:.0f} ms by sandbox: {r['slow_steps_by_sandbox']}; this client's event loop late by at most "
        f"{r['client_loop_lag_max_ms']:.0f} ms (P99 {r['client_loop_lag_p99_ms']:.1f} ms)"
    )
    calm = [w for w in r["windows_10s"] if w["p99_ms"] <= 100]
    for name, ws in (("stalled", bad), ("calm", calm)):
        if ws:
            lines.append(
                f"  {name} windows ({len(ws)}): mean run-queue wait per 10 s: agent event loop "
                f"{np.mean([w['agent_runq_wait_ms'] for w in ws]):.0f} ms, this client "
                f"{np.mean([w['client_runq_wait_ms'] for w in ws]):.0f} ms; runnable tasks at most "
                f"{np.mean([w['runnable_max'] for w in ws]):.1f} (mean of the windows' maxima)"
            )
    for e in r["error_examples"][:5]:
        lines.append(f"  error: {e}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=1024, help="Sessions held open and stepped.")
    p.add_argument("--minutes", type=float, default=10.0, help="How long they are stepped.")
    p.add_argument("--rate", type=float, default=0.5, help="Steps per second of one session (mean; 0.5: one per 2 s).")
    p.add_argument("--per-sandbox", type=int, default=64, help="Most sessions on one sandbox.")
    p.add_argument("--sample", type=float, default=30.0, help="Seconds between memory samples.")
    p.add_argument("--step-timeout", type=float, default=10.0, help="A step unanswered this long is an error.")
    p.add_argument("--json", default="", help="Write the results here.")
    args = p.parse_args()
    r = hold(args.sessions, args.minutes * 60, args.rate, per_sandbox=args.per_sandbox, sample_s=args.sample,
             step_timeout_s=args.step_timeout)  # fmt: skip
    r["when"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    print(render(r), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")


if __name__ == "__main__":
    main()
