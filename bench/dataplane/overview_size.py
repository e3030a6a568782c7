"""Size of ``/v1/overview`` and of the database after many job-log appends (issue 13 item 10).

    .venv/bin/python bench/dataplane/overview_size.py [--sandboxes 1000] [--jobs 100] [--appends 1000] [--line 200]

Runs the app in-process (TestClient, real SQLite in a scratch folder, process backend) with
``--sandboxes`` synthetic sandbox records (owned, READY) and ``--jobs`` running job records. Every job
gets ``--appends`` log lines of ``--line`` characters and a metrics report every 10 lines, through the
runner's update path (what a job worker's messages call), with the overview polled every 50 appends as
the page would. Prints and writes ``bench/results/overview_size.json``: overview bytes (default and
``limit=100``) and time per poll, database and WAL bytes after the appends and after the runner's
checkpoint, and the log bytes on disk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "results" / "overview_size.json"


def _sizes(data: Path) -> dict[str, int]:
    db = data / "rockroll.db"
    wal = data / "rockroll.db-wal"
    return {"db_bytes": db.stat().st_size, "wal_bytes": wal.stat().st_size if wal.exists() else 0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sandboxes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--appends", type=int, default=1000, help="log lines per job")
    p.add_argument("--line", type=int, default=200, help="characters per log line")
    args = p.parse_args()

    from fastapi.testclient import TestClient

    from rockroll.api.db import JobRecord, SandboxOwner
    from rockroll.api.server.app import create_app
    from rockroll.api.server.serve_proc import scratch_dir
    from rockroll.api.server.settings import Settings
    from rockroll.client.job_state import JobState
    from rockroll.sandbox.base import SandboxSpec
    from rockroll.sandbox.managed import ManagedSandbox, SandboxState

    data = scratch_dir("overview-bench")
    settings = Settings(
        database_url=f"sqlite:///{data}/rockroll.db", sandbox_state_dir=str(data / "sb"), backend="process",
        pool_size=0, max_sandboxes=4, dev_mode=True, dev_hosts=["testserver"],  # TestClient's Host
    )  # fmt: skip
    result: dict[str, object] = {"args": vars(args)}
    try:
        with TestClient(create_app(settings)) as c:
            rr = c.app.state.rr
            fakes = []
            for i in range(args.sandboxes):
                sb = ManagedSandbox(f"sb-bench-{i:05d}", SandboxSpec(), SimpleNamespace(name="process"), pool="user")
                sb.state = SandboxState.READY
                fakes.append(sb)
            real = rr.placement.list
            rr.placement.list = lambda: real() + fakes
            now = time.time()
            with rr.db.session() as s:
                s.add_all(SandboxOwner(sandbox_id=sb.id, owner="alice") for sb in fakes)
                for j in range(args.jobs):
                    s.add(JobRecord(
                        id=f"job-bench{j:05d}", owner="dev", kind="eval", config={"env": "FrozenLake-v0"},
                        state=JobState.RUNNING, progress=0.0, metrics={}, logs="", error="", created_at=now + j,
                    ))  # fmt: skip
            line = "x" * args.line
            polls: list[float] = []
            t0 = time.monotonic()
            for i in range(args.appends):
                for j in range(args.jobs):
                    job_id = f"job-bench{j:05d}"
                    rr.jobs._update(job_id, log=f"{i} {line}")
                    if i % 10 == 0:
                        rr.jobs._update(job_id, progress=i / args.appends, metrics={"step": i, "loss": 1 / (i + 1)})
                if i % 50 == 0:
                    t = time.perf_counter()
                    c.get("/v1/overview")
                    polls.append(time.perf_counter() - t)
            append_s = time.monotonic() - t0
            result["after_appends"] = _sizes(data)
            for j in range(args.jobs):
                rr.jobs._update(f"job-bench{j:05d}", state=JobState.SUCCEEDED)
            t = time.perf_counter()
            default = c.get("/v1/overview")
            polls.append(time.perf_counter() - t)
            widest = c.get("/v1/overview?limit=100")
            rr.jobs._checkpoint()
            result["after_checkpoint"] = _sizes(data)
            o = default.json()
            result.update(
                overview_bytes=len(default.content),
                overview_bytes_limit_100=len(widest.content),
                overview_poll_ms_p50=round(1000 * sorted(polls)[len(polls) // 2], 2),
                overview_counts={k: len(o[k]) for k in ("sandboxes", "sessions", "jobs", "restarts", "envs", "pools")},
                overview_totals=o["totals"],
                log_appends=args.appends * args.jobs,
                log_chars_appended=args.appends * args.jobs * (args.line + 6),
                append_seconds=round(append_s, 2),
                log_files_bytes=sum(f.stat().st_size for f in (data / "jobs" / ".logs").rglob("*") if f.is_file()),
            )
    finally:
        shutil.rmtree(data, ignore_errors=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
