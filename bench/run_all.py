"""Run every benchmark of the reliability and performance harness, then write ``bench/REPORT.md``.

    .venv/bin/python bench/run_all.py [--quick] [--only chaos,load] [--report-only]

(``make bench`` runs it in full, ``make bench-quick`` with small sizes.) Each step is one command,
run in a subprocess with a time limit; its output goes to ``bench/results/<step>.log`` (and
``<step>.json`` where the bench writes one), and ``bench/results/runs.json`` records the command,
exit status, start time and wall time of each. :mod:`bench.harness.report` turns the results into the
report with tables and plots. A step that fails is reported as failed; the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` and the packages importable
    sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
PY = sys.executable

#: name -> (what it measures, full arguments, quick arguments, time limit in seconds)
STEPS: dict[str, tuple[str, list[str], list[str], int]] = {
    "envs": (
        "in-process env steps/s and reset time",
        [PY, "bench/rollout/env_bench.py", "--seconds", "1", "--resets", "100"],
        [PY, "bench/rollout/env_bench.py", "--seconds", "0.2", "--resets", "10", "FrozenLake-v0", "Sokoban-v0"],
        600,
    ),
    "sandbox": (
        "Docker sandboxes: create, pool acquire, crash recovery, step latency, density",
        [PY, "bench/sandboxes/sandbox_bench.py", "--backend", "docker", "--max-concurrent", "24"],
        [
            PY,
            "bench/sandboxes/sandbox_bench.py",
            "--backend",
            "docker",
            "--creates",
            "3",
            "--acquires",
            "5",
            "--crashes",
            "2",
            "--steps",
            "200",
            "--max-concurrent",
            "4",
        ],
        900,
    ),  # fmt: skip
    "api": (
        "step latency and throughput through the control plane",
        [PY, "bench/dataplane/api_bench.py", "--seconds", "4", "--sessions", "1,16,64"],
        [PY, "bench/dataplane/api_bench.py", "--seconds", "1", "--sessions", "1,8"],
        900,
    ),
    "rollout": (
        "rollout throughput, lock-step vs async scheduling",
        [PY, "bench/rollout/rollout_bench.py"],
        [PY, "bench/rollout/rollout_bench.py", "--batches", "1", "--groups", "4"],
        900,
    ),
    "chaos": (
        "256-episode rollout on Docker sandboxes while 20% of them are faulted",
        [PY, "bench/sandboxes/chaos.py", "--json", "{json}"],
        [
            PY,
            "bench/sandboxes/chaos.py",
            "--groups",
            "4",
            "--group-size",
            "4",
            "--sandboxes",
            "4",
            "--sessions-per-sandbox",
            "2",
            "--wave-s",
            "1.5",
            "--max-waves",
            "4",
            "--gen-ms",
            "200",
            "--json",
            "{json}",
        ],
        900,
    ),  # fmt: skip
    "restart": (
        "SIGKILL of the control plane mid-rollout, then a restart",
        [PY, "bench/dataplane/cp_restart.py", "--json", "{json}"],
        [PY, "bench/dataplane/cp_restart.py", "--groups", "4", "--kill-after", "4", "--json", "{json}"],
        600,
    ),
    "fuzz": (
        "schemathesis over /openapi.json with auth (positive and negative cases per operation)",
        [
            "env",
            "ROCKROLL_FUZZ_EXAMPLES=30",
            PY,
            "-m",
            "pytest",
            "tests/api/test_fuzz.py",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
        ],
        [
            "env",
            "ROCKROLL_FUZZ_EXAMPLES=15",
            PY,
            "-m",
            "pytest",
            "tests/api/test_fuzz.py",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
        ],
        900,
    ),  # fmt: skip
    "escapes": (
        "escape attempts, body limits and input fuzzing (pytest)",
        [
            PY,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "tests/sandbox/test_escapes.py",
            "tests/reliability/test_escapes_more.py",
            "tests/reliability/test_body_limits.py",
            "tests/reliability/test_inputs_fuzz.py",
        ],
        [
            PY,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "tests/sandbox/test_escapes.py",
            "tests/reliability/test_escapes_more.py",
            "tests/reliability/test_body_limits.py",
            "tests/reliability/test_inputs_fuzz.py",
        ],
        600,
    ),  # fmt: skip
    "security": (
        "two owners on one server: attacks refused per class, two-owner fuzz, health under a stall attack",
        [PY, "bench/security/security_bench.py", "--json", "{json}"],
        [PY, "bench/security/security_bench.py", "--examples", "3", "--stateful-cases", "200", "--json", "{json}"],
        3000,
    ),
    "load": (
        "64, 128 and 256 concurrent sessions through the API",
        [PY, "bench/dataplane/load.py", "--sessions", "64,128,256", "--seconds", "60", "--json", "{json}"],
        [PY, "bench/dataplane/load.py", "--sessions", "8,16", "--seconds", "5", "--json", "{json}"],
        900,
    ),
}


def run_step(name: str, quick: bool) -> dict[str, object]:
    """Run one step (bounded by its time limit); returns its record for ``runs.json``."""
    what, full, short, limit = STEPS[name]
    cmd = [a.replace("{json}", str(RESULTS / f"{name}.json")) for a in (short if quick else full)]
    shown = " ".join(a.replace(PY, ".venv/bin/python").replace(str(ROOT) + "/", "") for a in cmd)
    print(f"==> {name}: {shown}", flush=True)
    started = time.time()
    t0 = time.monotonic()
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="160")
    with open(RESULTS / f"{name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # KeyboardInterrupt: the bench's cleanup (containers) runs
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
            rc = 124
    wall = time.monotonic() - t0
    print(f"    rc={rc} in {wall:.0f} s", flush=True)
    return {"name": name, "what": what, "command": shown, "rc": rc, "started": started, "wall_s": wall, "quick": quick}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (a few minutes in all)")
    p.add_argument("--only", default="", help=f"comma-separated subset of {','.join(STEPS)}")
    p.add_argument("--report-only", action="store_true", help="rebuild the report from bench/results")
    args = p.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    runs_file = RESULTS / "runs.json"
    runs: dict[str, object] = json.loads(runs_file.read_text()) if runs_file.exists() else {}
    if not args.report_only:
        names = [n for n in args.only.split(",") if n] or list(STEPS)
        unknown = set(names) - set(STEPS)
        if unknown:
            p.error(f"unknown steps {sorted(unknown)}; choose from {','.join(STEPS)}")
        from bench.harness.report import machine

        runs["machine"] = machine()
        for name in names:
            runs[name] = run_step(name, args.quick)
            runs_file.write_text(json.dumps(runs, indent=1))
    from bench.harness.report import write_report

    path = write_report(RESULTS, ROOT / "bench")
    print(f"report: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
