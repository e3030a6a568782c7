"""A burst of Docker sandboxes: N created at once, each timed from request to healthy, then all removed.

    .venv/bin/python bench/sandboxes/docker_burst.py --sandboxes 64 [--warm] [--json bench/results/docker_burst.json]
    .venv/bin/python bench/sandboxes/docker_burst.py --sweep 1,16,64 [--json ...]   # cold and warm at each size: a table

Two ways a create is served (``--warm``): **cold**, the manager has no warm pool, every create
starts a container; **warm**, the manager's warm pool (:mod:`rockroll.sandbox.warm`) holds N idle
started sandboxes when the burst begins (filling it is timed and its CPU counted apart: that cost is
paid ahead, in the background), and every create is handed one, checked, while the pool refills.

The user path is the library's: one :class:`~rockroll.sandbox.manager.SandboxManager` with the
``docker`` backend (what ``rockroll serve --backend docker`` and ``rockroll node --backend docker``
run inside), and N threads that each call ``manager.create()`` at the same instant (a barrier).
``create()`` returns once the in-sandbox server answers ``health``: that is "healthy". The manager's
health monitor runs as in production (a probe of every sandbox each second).

Each sandbox's time is split where it goes (wall clock, from the request):

* ``docker create`` and ``docker start``: the two Docker API calls (timed around the SDK's
  low-level ``create_container`` and ``start``);
* ``server up``: until the in-sandbox server bound its socket (the socket file's mtime on the host,
  in the bind-mounted folder), i.e. the container's init and the server's Python start-up;
* ``probe lag``: from the socket's bind to the first ``health`` answer (the readiness poll's interval
  and its ``is_alive`` Docker calls, on a loaded daemon).

CPU per sandbox: the CPU seconds of dockerd, containerd, the shims (with runc), the containers and
this process over the burst, divided by N (the rest of the machine, other users' work, is left out
and printed apart).

Target (issue "scale out on Ray", Numbers; issue 36): all N healthy, P50 <= 1.5 s, P99 <= 3 s at 64,
one at a time <= 0.3 s. After the burst
every sandbox is deleted (``manager.close()``) and ``docker ps -a`` filtered by the manager's
label must list nothing. Every wait is bounded (``--timeout``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import numpy as np

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.managed import SandboxState
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.pool import WarmPoolConfig

TARGET_P50_S, TARGET_P99_S = 1.5, 3.0


def docker_leftovers(manager: str, timeout_s: float = 60.0) -> list[str]:
    """Ids of containers (any state) labelled with ``manager``, from ``docker ps -a``."""
    cmd = ["docker", "ps", "-a", "-q", "--filter", "label=rockroll.managed=1"]
    cmd += ["--filter", f"label=rockroll.manager={manager}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=timeout_s)
    return out.stdout.split()


def _procs() -> dict[int, tuple[int, str, float, float]]:
    """Every process: ``pid -> (ppid, comm, own CPU s, CPU s of its reaped children)``, from /proc."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        f = raw[raw.rindex(")") + 2 :].split()
        out[int(d.name)] = (int(f[1]), comm, (int(f[11]) + int(f[12])) / tick, (int(f[13]) + int(f[14])) / tick)
    return out


def cpu_by_group() -> dict[str, float]:
    """CPU seconds so far of dockerd, containerd, the shims (with runc, which they reap), the containers'
    processes (the shims' descendants), this process, and the whole machine (/proc/stat)."""
    procs = _procs()
    groups = {"dockerd": 0.0, "containerd": 0.0, "containerd-shims (+runc)": 0.0, "containers": 0.0, "this bench": 0.0}

    def under_shim(pid: int) -> bool:
        for _ in range(64):  # bounded walk up the tree
            ppid = procs.get(pid, (0, "", 0, 0))[0]
            if ppid <= 1:
                return False
            if procs.get(ppid, (0, ""))[1].startswith("containerd-shim"):
                return True
            pid = ppid
        return False

    for pid, (_ppid, comm, own, children) in procs.items():
        if comm == "dockerd":
            groups["dockerd"] += own
        elif comm == "containerd":
            groups["containerd"] += own
        elif comm.startswith("containerd-shim"):
            groups["containerd-shims (+runc)"] += own + children
        elif pid == os.getpid():
            groups["this bench"] += own
        elif under_shim(pid):
            groups["containers"] += own + children
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    groups["machine (busy)"] = (sum(int(x) for x in fields[:8]) - int(fields[3]) - int(fields[4])) / os.sysconf(
        "SC_CLK_TCK"
    )
    return groups


def throttle_alive(backend: Any, every_s: float) -> None:
    """EXPERIMENT (not the shipped behaviour): answer ``is_alive`` from the last Docker answer for a handle
    checked less than ``every_s`` ago, as a readiness poll that asks the daemon at most once per ``every_s``
    would (a dead container is then noticed up to ``every_s`` later)."""
    original, last = backend.is_alive, {}

    def is_alive(handle: Any) -> bool:
        now, key = time.monotonic(), (handle.ref, handle.generation)
        seen = last.get(key)
        if seen is not None and now - seen[0] < every_s:
            return seen[1]
        alive = original(handle)
        last[key] = (now, alive)
        return alive

    backend.is_alive = is_alive


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else float("nan")


class _Clock:
    """Per-thread timestamps of one ``create()``: set by wrappers around the backend's Docker calls."""

    def __init__(self) -> None:
        self.local = threading.local()

    def mark(self, key: str) -> None:
        marks = getattr(self.local, "marks", None)
        if marks is not None:
            marks.setdefault(key, time.perf_counter())

    def wrap(self, obj: Any, name: str, before: str, after: str) -> Any:
        """Time ``obj.name`` (a class: every instance's, every thread's client); returns the original."""
        original = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.mark(before)
            try:
                return original(*args, **kwargs)
            finally:
                self.mark(after)

        setattr(obj, name, timed)
        return original

    def count(self, obj: Any, name: str, key: str) -> None:
        original = getattr(obj, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            marks = getattr(self.local, "marks", None)
            if marks is not None:
                marks[key] = marks.get(key, 0) + 1
            return original(*args, **kwargs)

        setattr(obj, name, counted)


OWN_GROUPS = ("dockerd", "containerd", "containerd-shims (+runc)", "containers", "this bench")


def _manager(n: int, state: str, name: str, spec: SandboxSpec, monitor_interval_s: float | None, warm: bool) -> Any:
    return SandboxManager(
        name=name, backend="docker", state_dir=state, db_url=f"sqlite:///{state}/burst.db", max_sandboxes=n,
        default_spec=spec, idle_ttl_s=None, monitor_interval_s=monitor_interval_s,
        warm_pool=WarmPoolConfig(size=n if warm else 0, max_total=max(1, n)),
    )  # fmt: skip


def _fill(m: Any, n: int, timeout_s: float) -> dict[str, Any]:
    """Wait until the warm pool holds ``n`` idle sandboxes; its time and CPU (paid ahead of any create)."""
    cpu0, t0 = cpu_by_group(), time.perf_counter()
    if not m.wait_until(lambda: m.warm.idle() >= n, timeout_s, interval_s=0.1):
        raise TimeoutError(f"the warm pool did not fill in {timeout_s:.0f} s: {m.warm.stats()}")
    cpu1 = cpu_by_group()
    own = sum(cpu1[k] - cpu0.get(k, 0.0) for k in OWN_GROUPS)
    return {"fill_s": time.perf_counter() - t0, "fill_cpu_s_per_sandbox": own / max(1, n)}


def _creates(m: Any, n: int, clock: _Clock, timeout_s: float) -> list[dict[str, Any]]:
    """``n`` threads call ``m.create()`` at the same instant; a row per create (its time, marks, or error)."""
    barrier = threading.Barrier(n, timeout=timeout_s)
    t_wall0 = time.time() - time.perf_counter()  # perf_counter -> wall clock

    def one(i: int) -> dict[str, Any]:
        clock.local.marks = marks = {}
        barrier.wait()
        t0 = time.perf_counter()
        try:
            sb = m.create()
        except Exception as e:  # noqa: BLE001 - a failed sandbox is a result
            return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300], "s": time.perf_counter() - t0}
        row = {"ok": True, "id": sb.id, "s": time.perf_counter() - t0}
        for key in ("create_begin", "create_end", "start_begin", "start_end"):
            if key in marks:
                row[key] = marks[key] - t0
        row["is_alive_calls"] = marks.get("is_alive_calls", 0)
        if "create_begin" in marks:  # cold: the server bound its socket then (the file's mtime on the host)
            try:
                row["socket_bound"] = os.stat(sb.handle.socket_path).st_mtime - t_wall0 - t0
            except (OSError, AttributeError):
                pass
        if sb.last_health is not None:
            row["server_uptime_at_ready"] = sb.last_health.uptime_s
        return row

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="burst") as pool:
        return list(pool.map(one, range(n), timeout=timeout_s + 60))


def _phases(ok: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    def phase(key_a: str | None, key_b: str) -> list[float]:
        return [r[key_b] - (r[key_a] if key_a else 0.0) for r in ok if key_b in r and (key_a is None or key_a in r)]

    phases = {
        "queue before docker create": phase(None, "create_begin"),
        "docker create": phase("create_begin", "create_end"),
        "docker start": phase("start_begin", "start_end"),
        "server up (start -> socket bound)": phase("start_end", "socket_bound"),
        "probe lag (socket bound -> healthy)": [r["s"] - r["socket_bound"] for r in ok if "socket_bound" in r],
    }
    return {k: {"p50": _pct(v, 50), "p99": _pct(v, 99), "max": max(v, default=float("nan"))} for k, v in phases.items()}


def burst(
    n: int,
    *,
    warm: bool = False,
    state_dir: str | None = None,
    timeout_s: float = 120.0,
    spec: SandboxSpec | None = None,
    monitor_interval_s: float | None = 1.0,
    alive_every_s: float = 0.0,
) -> dict[str, Any]:
    """Create ``n`` Docker sandboxes at once (cold, or each from a full warm pool), time each to healthy,
    delete them all; the measurements. A sandbox that fails is counted in ``failed`` with its error.
    ``alive_every_s`` > 0 runs the :func:`throttle_alive` experiment."""
    own_dir = state_dir is None
    state = state_dir or tempfile.mkdtemp(prefix="rrburst-", dir="/tmp")  # short: unix socket paths
    name = f"burst{uuid.uuid4().hex[:6]}"
    spec = spec or SandboxSpec(startup_timeout_s=timeout_s)
    try:
        m = _manager(n, state, name, spec, monitor_interval_s, warm)
    except BaseException:  # no daemon, no image...: leave no folder behind
        if own_dir:
            shutil.rmtree(state, ignore_errors=True)
        raise
    clock = _Clock()
    api = docker.APIClient  # the SDK's low-level calls of DockerBackend.start, on every thread's client
    originals = [
        ("create_container", clock.wrap(api, "create_container", "create_begin", "create_end")),
        ("start", clock.wrap(api, "start", "start_begin", "start_end")),
    ]
    clock.count(m.backend, "is_alive", "is_alive_calls")  # the calls that reach the daemon
    if alive_every_s > 0:
        throttle_alive(m.backend, alive_every_s)
    try:
        filled = _fill(m, n, timeout_s * 4) if warm else {}
        load0, cpu0, t_start = os.getloadavg(), cpu_by_group(), time.perf_counter()
        rows = _creates(m, n, clock, timeout_s)
        t_all = time.perf_counter() - t_start
        load1, cpu1 = os.getloadavg(), cpu_by_group()
        healthy = sum(1 for sb in m.list() if sb.state == SandboxState.READY)
        warm_stats = m.warm.stats()
    finally:
        for attr, original in originals:
            setattr(api, attr, original)
        t_rm = time.perf_counter()
        m.close(stop_sandboxes=True)
        remove_s = time.perf_counter() - t_rm
    left = docker_leftovers(name)
    dirs_left = [p.name for p in (Path(state) / name).glob("*")] if (Path(state) / name).exists() else []
    if own_dir:
        shutil.rmtree(state, ignore_errors=True)
    ok = [r for r in rows if r["ok"]]
    cpu = {k: cpu1[k] - cpu0.get(k, 0.0) for k in cpu1}
    cpu["rest of the machine"] = cpu["machine (busy)"] - sum(v for k, v in cpu.items() if k != "machine (busy)")
    times = [r["s"] for r in ok]
    return {
        "manager": name, "sandboxes": n, "mode": "warm" if warm else "cold", "healthy": len(ok),
        "ready_at_end": healthy, "failed": [r["error"] for r in rows if not r["ok"]],
        "p50_s": _pct(times, 50), "p99_s": _pct(times, 99), "max_s": max(times, default=float("nan")),
        "min_s": min(times, default=float("nan")), "all_healthy_s": t_all, "remove_s": remove_s,
        "leftover_containers": left, "leftover_socket_dirs": dirs_left, "phases_s": _phases(ok),
        "is_alive_calls_p50": _pct([r["is_alive_calls"] for r in ok], 50),
        "server_uptime_at_ready_p50_s": _pct(
            [r["server_uptime_at_ready"] for r in ok if "server_uptime_at_ready" in r], 50
        ),
        "cpu_s": cpu, "cpu_s_per_sandbox": sum(cpu[k] for k in OWN_GROUPS) / max(1, n), "warm_pool": warm_stats,
        **filled, "alive_every_s": alive_every_s, "times_s": sorted(times), "loadavg_before": list(load0),
        "loadavg_after": list(load1), "targets": {"p50_s": TARGET_P50_S, "p99_s": TARGET_P99_S},
    }  # fmt: skip


def report(r: dict[str, Any]) -> str:
    """The result as a few printed lines."""
    met = r["healthy"] == r["sandboxes"] and r["p50_s"] <= TARGET_P50_S and r["p99_s"] <= TARGET_P99_S
    lines = [
        f"{r['sandboxes']} Docker sandboxes at once ({r['mode']}): {r['healthy']}/{r['sandboxes']} healthy, "
        f"P50 {r['p50_s']:.3f} s, P99 {r['p99_s']:.3f} s, max {r['max_s']:.3f} s (min {r['min_s']:.3f} s); "
        f"all healthy after {r['all_healthy_s']:.2f} s; target P50 <= {TARGET_P50_S} s, P99 <= {TARGET_P99_S} s: "
        f"{'met' if met else 'MISSED'}; CPU {r['cpu_s_per_sandbox']:.3f} s per sandbox",
    ]
    if r["mode"] == "warm":
        lines.append(
            f"  the warm pool filled in {r['fill_s']:.1f} s beforehand ({r['fill_cpu_s_per_sandbox']:.2f} CPU-s per "
            f"sandbox, paid ahead); pool after the burst: {r['warm_pool']}"
        )
    else:
        lines.append("where the time goes (P50 / P99 / max, s):")
        for k, v in r["phases_s"].items():
            lines.append(f"  {k:<38} {v['p50']:6.2f} / {v['p99']:6.2f} / {v['max']:6.2f}")
        lines.append(
            f"  Docker is_alive calls (inspect) per sandbox while starting P50 {r['is_alive_calls_p50']:.0f}; server "
            f"uptime at its first health answer P50 {r['server_uptime_at_ready_p50_s']:.2f} s"
        )
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in r["cpu_s"].items())
    lines.append(f"CPU seconds during the burst ({os.cpu_count()} cores, {r['all_healthy_s']:.2f} s): {cpu}")
    if r["alive_every_s"]:
        lines.append(f"EXPERIMENT: readiness polls asked Docker is_alive at most every {r['alive_every_s']} s")
    lines.append(
        f"removed all in {r['remove_s']:.2f} s; left: {len(r['leftover_containers'])} containers, "
        f"{len(r['leftover_socket_dirs'])} socket folders; load {r['loadavg_before'][0]:.2f} -> "
        f"{r['loadavg_after'][0]:.2f}"
    )
    lines.extend(f"  failed: {err}" for err in r["failed"][:5])
    return "\n".join(lines)


def table(runs: list[dict[str, Any]]) -> str:
    """A markdown table of runs: size, mode, P50/P99 to healthy, CPU per sandbox, load."""
    out = [
        "| sandboxes | warm pool | healthy | P50 s | P99 s | max s | CPU-s / sandbox | fill s (CPU-s / sb) | load before -> after |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in runs:
        fill = f"{r['fill_s']:.1f} ({r['fill_cpu_s_per_sandbox']:.2f})" if r["mode"] == "warm" else "-"
        out.append(
            f"| {r['sandboxes']} | {'full' if r['mode'] == 'warm' else 'none (cold)'} | {r['healthy']}/{r['sandboxes']} "
            f"| {r['p50_s']:.3f} | {r['p99_s']:.3f} | {r['max_s']:.3f} | {r['cpu_s_per_sandbox']:.3f} | {fill} "
            f"| {r['loadavg_before'][0]:.1f} -> {r['loadavg_after'][0]:.1f} |"
        )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sandboxes", type=int, default=64, help="Sandboxes created at once.")
    p.add_argument("--warm", action="store_true", help="Create them from a full warm pool (default: cold).")
    p.add_argument("--sweep", default="", help="Comma-separated sizes: each cold, then warm; prints a table.")
    p.add_argument("--timeout", type=float, default=120.0, help="Longest wait for one sandbox (s).")
    p.add_argument(
        "--alive-every",
        type=float,
        default=0.0,
        help="Experiment: readiness polls ask Docker is_alive at most this often (s).",
    )
    p.add_argument("--json", default="", help="Append this run's measurements to this file's runs.")
    args = p.parse_args()
    sizes = [int(x) for x in args.sweep.split(",") if x.strip()] or [args.sandboxes]
    if min(sizes) < 1:
        raise SystemExit("sizes must be at least 1")
    modes = (False, True) if args.sweep else (args.warm,)
    runs = []
    for n in sizes:
        for warm in modes:
            r = burst(n, warm=warm, timeout_s=args.timeout, alive_every_s=args.alive_every)
            print(report(r), flush=True)
            runs.append(r)
    if len(runs) > 1:
        print(table(runs), flush=True)
    if args.json:  # each run is appended to the file's "runs"
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        old = json.loads(path.read_text()).get("runs", []) if path.exists() else []
        for r in runs:
            r["when"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        path.write_text(json.dumps({"runs": old + runs}, indent=1) + "\n")
    left = [c for r in runs for c in r["leftover_containers"]]
    if left:
        raise SystemExit(f"containers left behind: {left}")


if __name__ == "__main__":
    main()
