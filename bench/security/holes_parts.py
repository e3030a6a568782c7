"""Helpers of ``holes_bench.py``: process memory, job polling, process trees, the machine (its raw HTTP posts
are :func:`rockroll.api.server.raw_http.post_stream`, shared with tests/security).

Every loop here is bounded in count and time; all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import os
import platform
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from rockroll.api.server.serve_proc import ServerProc

__all__ = [
    "MiB",
    "TERMINAL",
    "rss_mib",
    "db_bytes",
    "Peak",
    "api",
    "submit",
    "wait_job",
    "wait_until",
    "alive",
    "tree",
    "machine",
    "table",
]

MiB = 1 << 20
TERMINAL = ("succeeded", "failed", "cancelled")


def rss_mib(pid: int) -> float:
    """``VmRSS`` of ``pid`` in MiB (/proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for pid {pid}")


def db_bytes(srv: ServerProc) -> int:
    """Bytes of the server's SQLite files (the database, its WAL and shared memory)."""
    return sum(p.stat().st_size for p in srv.data_dir.glob("rockroll.db*"))


class Peak:
    """The highest RSS of ``pid`` sampled every ``every_s`` while the ``with`` block runs (at most ``max_s``)."""

    def __init__(self, pid: int, every_s: float = 0.01, max_s: float = 300.0) -> None:
        self.pid, self.every_s, self.max_s = pid, every_s, max_s
        self.mib = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        end = time.monotonic() + self.max_s
        while not self._done.wait(self.every_s) and time.monotonic() < end:
            try:
                self.mib = max(self.mib, rss_mib(self.pid))
            except (OSError, RuntimeError):
                return

    def __enter__(self) -> Peak:
        self.mib = rss_mib(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        self.mib = max(self.mib, rss_mib(self.pid))


def api(srv: ServerProc, token: str, timeout_s: float = 120.0) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s)


def submit(c: httpx.Client, config: dict[str, Any], kind: str = "eval") -> httpx.Response:
    return c.post("/v1/jobs", json={"kind": kind, "config": config})


def wait_job(
    c: httpx.Client, job_id: str, states: tuple[str, ...] = TERMINAL, timeout_s: float = 120.0, poll_s: float = 0.1
) -> dict[str, Any]:
    """The job once its state is one of ``states``; RuntimeError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = c.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(poll_s)
    raise RuntimeError(f"job {job_id} not {states} within {timeout_s:.0f} s: {job['state']}")


def wait_until(pred: Any, timeout_s: float, poll_s: float = 0.05) -> float | None:
    """Seconds until ``pred()`` held (polled every ``poll_s``), None when it did not within ``timeout_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if pred():
            return time.monotonic() - t0
        time.sleep(poll_s)
    return None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def tree(marker: str) -> list[int]:
    """Live processes other than this one whose command line holds ``marker``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker.encode() in (proc / "cmdline").read_bytes() and alive(int(proc.name)):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def machine() -> dict[str, Any]:
    """The machine, the date and the tree's git revision (``-dirty`` with uncommitted changes)."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    rev = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_rev": rev + ("-dirty" if dirty else ""),
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "uid": os.geteuid(),
    }


def table(title: str, rows: list[tuple[str, Any]]) -> None:
    """Print ``rows`` (name, value) under ``title``."""
    print(f"\n{title}")
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
