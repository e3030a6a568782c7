"""Issue 48 at full size: the attacks on the six holes fixed, rerun at the sizes of the attack report.

    .venv/bin/python bench/security/holes_bench.py [--quick] [--parts 1,2,3,4,5] [--json bench/results/holes.json]

The attack tests (tests/security/test_owner_caps.py, test_node_auth_first.py, test_handover_timeout.py) are
scaled down; this reruns them against a real ``rockroll serve-api`` (process backend, its default settings
unless named here) and a real standalone ``rockroll serve-node``, and prints one table per part:

1. owner bob submits ``--configs`` eval jobs with ``--config-mib`` MiB of env kwargs each (all refused 413):
   the server's RSS (VmRSS) before, at its peak and after, its database bytes before/after, and the bytes
   of bob's ``GET /v1/jobs?limit=100``;
2. ``--bodies`` parallel ``--body-mib`` MiB unauthenticated bodies (no token, a bad one, another
   deployment's) to a standalone node agent's ``/v1/node/step``: the answers, the bytes that went out
   before each, the agent's RSS before/peak/after;
3. alice has one finished job with metric points; bob then runs ``--jobs`` one-episode FrozenLake policy
   evals (at most 8 active, the cap) within ``--jobs-budget-s``: alice's points before, after, and after a
   server restart; bob's jobs and metric histories kept (the server keeps 200 histories per owner;
   ``--kept-jobs`` lowers bob's kept-jobs cap through ``ROCKROLL_JOB_OWNER_CAPS``);
4. fair queue, on the 2-worker server (1 reserve worker, the default): bob's two long evals hold both
   workers, then alice submits a one-episode eval: seconds from her submit to its start and to its end;
5. a process sandbox (running an agent command) handed over (``ProcessBackend.release``) and adopted by
   nobody, ``adopt_timeout_s`` = ``--adopt-timeout-s``: seconds until its server and its process tree are gone.

Parts 1, 4, 3 share one server (in that order: part 1 measures a fresh one; part 3 restarts it). The
numbers go to ``--json`` with the machine, date and git revision. Every request loop is bounded in count
and time; all traffic stays on 127.0.0.1. About 5 minutes on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from rockroll.api.db import Database, JobRecord
from rockroll.api.db.models import JobMetricPoint
from rockroll.api.server.raw_http import post_stream
from rockroll.api.server.serve_proc import NodeProc, ServerProc, create_token, scratch_dir
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.node.tokens import SessionTokens
from rockroll.sandbox.process import ProcessBackend
from rockroll.sandbox.prune import prune

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))
from bench.security.holes_parts import (  # noqa: E402
    TERMINAL,
    MiB,
    Peak,
    alive,
    api,
    db_bytes,
    machine,
    rss_mib,
    submit,
    table,
    tree,
    wait_job,
    wait_until,
)

ENV = "FrozenLake-v0"
ACTIVE_CAP = 8  # max_active_jobs_per_owner's default
# bob's active jobs are counted among his newest 2 * ACTIVE_CAP: an older job may still run while newer ones ended


def _error_code(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return ""


# ------------------------------------------------------------------ part 1
def part_configs(srv: ServerProc, bob: str, n: int, mib: float) -> dict[str, Any]:
    """``n`` eval jobs with ``mib`` MiB of env kwargs each, one after another."""
    pid = srv.proc.pid  # type: ignore[union-attr]
    pad = "x" * int(mib * MiB)
    with api(srv, bob) as c:
        c.get("/v1/jobs")  # the routes warmed up before measuring
        time.sleep(1.0)
        rss0, db0 = rss_mib(pid), db_bytes(srv)
        statuses: Counter[str] = Counter()
        with Peak(pid) as peak:
            for _ in range(n):
                r = submit(c, {"env": ENV, "episodes": 1, "kwargs": {"pad": pad}})
                statuses[f"{r.status_code} {_error_code(r)}".strip()] += 1
        time.sleep(2.0)
        listing = c.get("/v1/jobs", params={"limit": 100})
        rss1, db1 = rss_mib(pid), db_bytes(srv)
    return {
        "jobs": n, "config_mib": mib, "answers": dict(statuses), "rss_mib_before": rss0, "rss_mib_peak": peak.mib,
        "rss_mib_after": rss1, "db_bytes_before": db0, "db_bytes_after": db1,
        "list_status": listing.status_code, "list_bytes": len(listing.content), "list_jobs": len(listing.json()["jobs"]),
    }  # fmt: skip


# ------------------------------------------------------------------ part 2
def part_node_bodies(n: int, mib: float) -> dict[str, Any]:
    """``n`` parallel unauthenticated ``mib`` MiB bodies to a standalone node agent's ``/v1/node/step``."""
    os.environ.pop("ROCKROLL_NODE_MAX_BODY_BYTES", None)  # the agent's default limit (32 MiB)
    d = scratch_dir("holes-node")
    secret = secrets.token_urlsafe(32)
    (d / "secret").write_text(secret)
    node = NodeProc(d, d / "secret", node_id=f"n{secrets.token_hex(4)}", max_sandboxes=2)
    total = int(mib * MiB)
    try:
        endpoint = node.start()

        def up() -> bool:
            try:
                return httpx.get(f"{endpoint}/v1/node/health", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        if wait_until(up, 60, 0.1) is None:
            raise RuntimeError("the node agent never answered its health route")
        pid = node.proc.pid  # type: ignore[union-attr]
        time.sleep(1.0)
        before = rss_mib(pid)
        foreign, _ = SessionTokens(secrets.token_urlsafe(32)).issue("se-00", "alice", node.node_id)
        kinds = ["", "Authorization: Bearer not-a-token\r\n", f"Authorization: Bearer {foreign}\r\n"]
        heads = [kinds[i % len(kinds)] for i in range(n)]
        t0 = time.monotonic()
        with Peak(pid) as peak, ThreadPoolExecutor(n) as pool:
            results = list(pool.map(lambda h: post_stream(endpoint, h, total, "/v1/node/step"), heads))
        answered_s = time.monotonic() - t0
        time.sleep(1.0)
        after = rss_mib(pid)
    finally:
        node.cleanup()
        shutil.rmtree(d, ignore_errors=True)
    lines = Counter(answer.split(b"\r\n", 1)[0].decode(errors="replace") or "(no answer)" for answer, _ in results)
    closed = sum(b"connection: close" in answer.lower() for answer, _ in results)
    return {
        "bodies": n, "body_mib": mib, "answers": dict(lines), "connection_close": closed,
        "max_bytes_sent": max(sent for _, sent in results), "all_answered_s": round(answered_s, 2),
        "rss_mib_before": before, "rss_mib_peak": peak.mib, "rss_mib_after": after,
    }  # fmt: skip


# ------------------------------------------------------------------ part 3
def _histories(srv: ServerProc) -> dict[str, dict[str, int]]:
    """Per owner: jobs kept, and jobs with metric points kept (read from the database)."""
    db = Database(srv.db_url)
    try:
        with db.session() as s:
            jobs = dict(s.execute(select(JobRecord.owner, func.count()).group_by(JobRecord.owner)).all())
            q = select(JobRecord.owner, func.count(func.distinct(JobMetricPoint.job_id)))
            q = q.select_from(JobMetricPoint).join(JobRecord, JobRecord.id == JobMetricPoint.job_id)
            hist = dict(s.execute(q.group_by(JobRecord.owner)).all())
    finally:
        db.close()
    return {owner: {"jobs": int(jobs.get(owner, 0)), "histories": int(hist.get(owner, 0))} for owner in jobs}


def _spread(xs: list[float]) -> dict[str, float]:
    """Median, 99th percentile and max of sorted ``xs`` (seconds)."""
    if not xs:
        return {}
    return {"p50": round(xs[len(xs) // 2], 2), "p99": round(xs[int(0.99 * (len(xs) - 1))], 2), "max": round(xs[-1], 2)}


def _run_many(c: httpx.Client, jobs: int, budget_s: float) -> dict[str, Any]:
    """Bob's ``jobs`` short jobs, at most :data:`ACTIVE_CAP` active, within ``budget_s`` (then the last ones end)."""
    t0 = time.monotonic()
    submitted, refused, first_refusal, listed_active = 0, Counter[str](), "", []
    for _ in range(jobs * 200):  # bounded; the budget ends it first
        if submitted >= jobs or time.monotonic() - t0 > budget_s:
            break
        newest = c.get("/v1/jobs", params={"limit": 2 * ACTIVE_CAP}).json()["jobs"]
        free = ACTIVE_CAP - sum(j["state"] not in TERMINAL for j in newest)
        for _ in range(min(free, jobs - submitted)):
            r = submit(c, {"env": ENV, "episodes": 1})
            if r.status_code == 201:
                submitted += 1
            else:
                refused[f"{r.status_code} {_error_code(r)}"] += 1
                first_refusal = first_refusal or r.json().get("error", {}).get("message", r.text)[:300]
                every = c.get("/v1/jobs", params={"limit": 1000}).json()["jobs"]  # what the refusal counted
                listed_active.append(sum(j["state"] not in TERMINAL for j in every))
                break
        time.sleep(0.1 if free <= 0 else 0.02)
    submit_s = time.monotonic() - t0

    def all_ended() -> bool:
        return all(j["state"] in TERMINAL for j in c.get("/v1/jobs", params={"limit": 2 * ACTIVE_CAP}).json()["jobs"])

    wait_until(all_ended, 180, 0.2)
    wall = time.monotonic() - t0
    return {
        "submitted": submitted, "refused": dict(refused), "first_refusal": first_refusal,
        "active_listed_after_refusals": dict(Counter(listed_active)),
        "submit_s": round(submit_s, 1), "wall_s": round(wall, 1),
    }  # fmt: skip


def part_histories(
    srv: ServerProc, alice: str, bob: str, jobs: int, budget_s: float, a_episodes: int
) -> dict[str, Any]:
    """Alice's one job with metric points; bob's ``jobs`` short jobs; alice's points, after a restart too."""
    with api(srv, alice) as a:
        a_id = submit(a, {"env": ENV, "episodes": a_episodes}).raise_for_status().json()["id"]
        a_job = wait_job(a, a_id, timeout_s=180)
        before = len(a.get(f"/v1/jobs/{a_id}/metrics").json()["points"])
    with api(srv, bob) as b:
        run = _run_many(b, jobs, budget_s)
        listed = [j for j in b.get("/v1/jobs", params={"limit": 1000}).json()["jobs"] if j["finished_at"]]
        states = Counter(j["state"] for j in listed)
        runs = sorted(j["finished_at"] - j["started_at"] for j in listed if j["started_at"])
        waits = sorted(j["started_at"] - j["created_at"] for j in listed if j["started_at"])
    with api(srv, alice) as a:
        after = len(a.get(f"/v1/jobs/{a_id}/metrics").json()["points"])
    kept = _histories(srv)
    t0 = time.monotonic()
    srv.stop()
    srv.start()
    restart_s = time.monotonic() - t0
    with api(srv, alice) as a:
        again = a.get(f"/v1/jobs/{a_id}/metrics")
        after_restart = len(again.json()["points"]) if again.status_code == 200 else f"HTTP {again.status_code}"
    return {
        "alice_job": a_id, "alice_state": a_job["state"], "alice_episodes": a_episodes, "alice_points_before": before,
        "alice_points_after": after, "alice_points_after_restart": after_restart, "bob_jobs_asked": jobs,
        "bob_budget_s": budget_s, **{f"bob_{k}": v for k, v in run.items()},
        "bob_jobs_per_s": round(run["submitted"] / max(run["wall_s"], 1e-9), 2), "bob_states_listed": dict(states),
        "bob_job_run_s": _spread(runs), "bob_job_queued_s": _spread(waits),
        "kept_per_owner": kept, "restart_s": round(restart_s, 1),
    }  # fmt: skip


# ------------------------------------------------------------------ part 4
def part_fair(srv: ServerProc, alice: str, bob: str, long_episodes: int) -> dict[str, Any]:
    """Bob's two long evals hold both shared workers; then alice's short one: how soon it starts and ends."""
    with api(srv, bob) as b, api(srv, alice) as a:
        longs = [submit(b, {"env": ENV, "episodes": long_episodes}).raise_for_status().json()["id"] for _ in range(2)]
        try:
            for job_id in longs:
                wait_job(b, job_id, ("running", *TERMINAL), timeout_s=120)
            time.sleep(1.0)  # both well into their episodes
            t_submit = time.time()
            short = submit(a, {"env": ENV, "episodes": 1}).raise_for_status().json()
            done = wait_job(a, short["id"], timeout_s=180, poll_s=0.05)
            b_states = [b.get(f"/v1/jobs/{i}").json()["state"] for i in longs]
        finally:
            for job_id in longs:
                b.post(f"/v1/jobs/{job_id}/cancel")
            for job_id in longs:
                wait_job(b, job_id, timeout_s=120)
    return {
        "workers": 2, "reserve": 1, "bob_long_episodes": long_episodes, "alice_state": done["state"],
        "alice_submit_to_start_s": round(done["started_at"] - t_submit, 2),
        "alice_submit_to_end_s": round(done["finished_at"] - t_submit, 2),
        "alice_run_s": round(done["finished_at"] - done["started_at"], 2), "bob_states_at_alice_end": b_states,
    }  # fmt: skip


# ------------------------------------------------------------------ part 5
def part_handover(adopt_timeout_s: float) -> dict[str, Any]:
    """A process sandbox running an agent command, handed over and adopted by nobody: seconds until it is gone."""
    state = tempfile.mkdtemp(prefix="rr-holes-", dir="/tmp")  # short: unix socket paths are 108 bytes at most
    backend = ProcessBackend(state_dir=state, adopt_timeout_s=adopt_timeout_s)
    sid, marker = f"sb-holes{secrets.token_hex(3)}", f"agent-{secrets.token_hex(8)}"
    labels = {"rockroll.manager": "holes-bench", "rockroll.sandbox": sid, "rockroll.generation": "0"}
    handle = backend.start(sid, SandboxSpec(), labels=labels)
    pid = int(handle.ref)

    def agent_command() -> None:
        try:
            backend.exec(handle, f"sleep 300; : {marker}", timeout_s=600)
        except SandboxError:  # the sandbox goes away under it: expected
            pass

    try:
        backend.wait_ready(handle, timeout_s=60)
        threading.Thread(target=agent_command, daemon=True).start()
        if wait_until(lambda: tree(marker), 30) is None:
            raise RuntimeError("the agent command did not start")
        procs = len(tree(f"rockroll.sandbox={sid}")) + len(tree(marker))
        backend.release(handle)  # handed over; nobody adopts it
        t0 = time.monotonic()
        server_gone = wait_until(lambda: not alive(pid), adopt_timeout_s + 60)
        tree_gone = wait_until(lambda: not tree(marker) and not tree(f"rockroll.sandbox={sid}"), 60)
        total = time.monotonic() - t0
    finally:
        backend.stop(handle)
        for p in tree(marker):
            try:
                os.kill(p, 9)
            except OSError:
                pass
        prune(state)
        shutil.rmtree(state, ignore_errors=True)
    return {
        "adopt_timeout_s": adopt_timeout_s, "isolation": handle.extra.get("isolation"), "processes_at_release": procs,
        "server_gone_s": None if server_gone is None else round(server_gone, 2),
        "tree_gone_s": None if tree_gone is None else round(total, 2),
    }  # fmt: skip


# ------------------------------------------------------------------ main
def _print(name: str, res: dict[str, Any]) -> None:
    table(name, [(k, v) for k, v in res.items()])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run of a minute or two)")
    p.add_argument("--parts", default="1,2,3,4,5", help="which parts to run (comma-separated)")
    p.add_argument("--configs", type=int, default=8, help="part 1: jobs with big configs")
    p.add_argument("--config-mib", type=float, default=14.0, help="part 1: MiB of env kwargs per job")
    p.add_argument("--bodies", type=int, default=8, help="part 2: parallel unauthenticated bodies")
    p.add_argument("--body-mib", type=float, default=30.0, help="part 2: MiB per body")
    p.add_argument("--jobs", type=int, default=230, help="part 3: bob's short jobs")
    p.add_argument("--jobs-budget-s", type=float, default=240.0, help="part 3: seconds bob may spend submitting")
    p.add_argument("--kept-jobs", type=int, default=0, help="part 3: bob's max_kept_jobs_per_owner (0: default)")
    p.add_argument("--a-episodes", type=int, default=50, help="part 3: episodes (metric points) of alice's job")
    p.add_argument("--long-episodes", type=int, default=100_000, help="part 4: episodes of bob's long jobs")
    p.add_argument("--adopt-timeout-s", type=float, default=10.0, help="part 5: the sandbox's adopt timeout")
    p.add_argument("--json", default="", help="write every number here (e.g. bench/results/holes.json)")
    args = p.parse_args()
    if args.quick:
        args.configs, args.config_mib, args.bodies, args.body_mib = 2, 2.0, 2, 4.0
        args.jobs, args.jobs_budget_s, args.a_episodes, args.adopt_timeout_s = 12, 60.0, 5, 3.0
    bounded = (
        1 <= args.configs <= 16 and 0 < args.config_mib <= 16 and 1 <= args.bodies <= 16 and 0 < args.body_mib <= 64
        and 1 <= args.jobs <= 2000 and 0 < args.jobs_budget_s <= 600 and 0 < args.adopt_timeout_s <= 120
    )  # fmt: skip
    if not bounded:
        p.error("keep it bounded: configs, bodies <= 16; MiB <= 16 / 64; jobs <= 2000; budget <= 600 s; adopt <= 120 s")
    parts = {int(x) for x in args.parts.split(",") if x.strip()}
    out: dict[str, Any] = {"command": "bench/security/holes_bench.py", "args": vars(args), "machine": machine()}
    t_start = time.monotonic()
    if parts & {1, 3, 4}:
        caps = {"bob": {"max_kept_jobs_per_owner": args.kept_jobs}} if args.kept_jobs else {}
        srv = ServerProc(scratch_dir("holes"), env={"ROCKROLL_JOB_OWNER_CAPS": json.dumps(caps)})
        tokens = {name: create_token(srv.db_url, name) for name in ("alice", "bob")}
        try:
            t0 = time.monotonic()
            srv.start()
            out["server_start_s"] = round(time.monotonic() - t0, 1)
            steps = (
                (1, "configs", lambda: part_configs(srv, tokens["bob"], args.configs, args.config_mib)),
                (4, "fair_queue", lambda: part_fair(srv, tokens["alice"], tokens["bob"], args.long_episodes)),
                (3, "histories", lambda: part_histories(
                    srv, tokens["alice"], tokens["bob"], args.jobs, args.jobs_budget_s, args.a_episodes)),
            )  # fmt: skip
            for n, name, run in steps:
                if n in parts:
                    t0 = time.monotonic()
                    out[name] = run() | {"part_s": round(time.monotonic() - t0, 1)}
                    _print(f"{n}. {name}", out[name])
        finally:
            srv.cleanup()
    for n, name, run in (
        (2, "node_bodies", lambda: part_node_bodies(args.bodies, args.body_mib)),
        (5, "handover", lambda: part_handover(args.adopt_timeout_s)),
    ):
        if n in parts:
            t0 = time.monotonic()
            out[name] = run() | {"part_s": round(time.monotonic() - t0, 1)}
            _print(f"{n}. {name}", out[name])
    out["wall_s"] = round(time.monotonic() - t_start, 1)
    out["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"\nwall time {out['wall_s']:.0f} s on {out['machine']['cpus']} cpus ({out['machine']['git_rev']})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
