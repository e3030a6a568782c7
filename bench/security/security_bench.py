"""The ``security`` step of ``make bench``: attacks tried and refused, the two-owner fuzz, the stall bar.

    .venv/bin/python bench/security/security_bench.py [--examples 12] [--stateful-cases 2000] [--json bench/results/security.json]

1. **Attacks.** Runs ``tests/security`` (one file per attack class of the multi-tenant threat
   model; each test performs an attack on a real server and asserts the refusal) and counts, per
   class, attacks tried and refused (a passing test is a refused attack).
2. **Two-owner fuzz.** ``bench/security/owner_fuzz.py``: schemathesis with two owners' tokens, every case
   aimed at the other owner's resources; then its stateful part walks the spec's links with
   schemathesis's state machine, one owner creating and using resources while the other owner's
   token replays every request that names them; counts server errors and answers carrying the
   other owner's data.
3. **Stall.** ``bench/security/stall_bench.py``: ``/v1/health`` latency (P50, P99) while another owner runs
   200 concurrent long execs and reads FIFOs.

Each part runs in a subprocess; the combined figures go to ``--json`` and the last lines printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
PY = sys.executable


def _run(cmd: list[str], limit_s: int) -> tuple[int, str]:
    """Run ``cmd`` from the repository root; returns its exit status and output (124 on timeout)."""
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else str(e.stdout or "")
    return out.returncode, out.stdout + out.stderr


def _first_doc_line(path: Path) -> str:
    """The first paragraph of a test module's docstring, on one line: the attack class it covers."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text())) or path.stem
    return " ".join(doc.strip().split("\n\n")[0].split())


def attacks(limit_s: int) -> dict[str, Any]:
    """Run tests/security; per file: the class (docstring), tried, refused, and the failures' names."""
    xml = RESULTS / "security_tests.xml"
    rc, out = _run([PY, "-m", "pytest", "tests/security", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"], limit_s)
    classes: dict[str, dict[str, Any]] = {}
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            module = case.get("classname", "").split(".")[-1] or "?"
            row = classes.setdefault(module, {"tried": 0, "refused": 0, "failed": [], "skipped": 0})
            if case.find("skipped") is not None:
                row["skipped"] += 1
                continue
            row["tried"] += 1
            if case.find("failure") is None and case.find("error") is None:
                row["refused"] += 1
            else:
                row["failed"].append(case.get("name"))
    for module, row in classes.items():
        path = ROOT / "tests" / "security" / f"{module}.py"
        row["class"] = _first_doc_line(path) if path.exists() else module
    tried = sum(r["tried"] for r in classes.values())
    refused = sum(r["refused"] for r in classes.values())
    return {"rc": rc, "tried": tried, "refused": refused, "classes": classes, "tail": out[-2000:]}


def _json_of(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", type=int, default=12, help="owner_fuzz.py: cases per operation, mode and owner")
    p.add_argument("--stateful-cases", type=int, default=2000, help="owner_fuzz.py: stateful cases (0: none)")
    p.add_argument("--stateful-seconds", type=float, default=600, help="owner_fuzz.py: stateful part's time limit")
    p.add_argument("--json", default=str(RESULTS / "security.json"))
    p.add_argument("--skip", default="", help="comma-separated parts to skip: attacks,fuzz,stall")
    args = p.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    report: dict[str, Any] = {"started": time.time()}
    if "attacks" not in skip:
        report["attacks"] = attacks(1800)
        a = report["attacks"]
        for _module, row in sorted(a["classes"].items()):
            print(f"{row['class'][:70]:70s} tried {row['tried']:3d} refused {row['refused']:3d}")
        print(f"attacks: {a['refused']}/{a['tried']} refused")
    if "fuzz" not in skip:
        fuzz_json = RESULTS / "owner_fuzz.json"
        cmd = [PY, "bench/security/owner_fuzz.py", "--examples", str(args.examples), "--json", str(fuzz_json)]
        cmd += ["--stateful-cases", str(args.stateful_cases), "--stateful-seconds", str(args.stateful_seconds)]
        rc, out = _run(cmd, 1800 + int(args.stateful_seconds))
        report["fuzz"] = {"rc": rc, **_json_of(fuzz_json)}
        lines = out.strip().splitlines()
        print("\n".join(x for x in lines if x.startswith("stateful cases:")) or f"owner fuzz: exit {rc}")
        print(lines[-1] if lines else f"owner fuzz: exit {rc}")
    if "stall" not in skip and (ROOT / "bench" / "security" / "stall_bench.py").exists():
        stall_json = RESULTS / "stall.json"
        rc, out = _run([PY, "bench/security/stall_bench.py", "--json", str(stall_json)], 900)
        report["stall"] = {"rc": rc, **_json_of(stall_json)}
        print(out.strip().splitlines()[-1] if out.strip() else f"stall: exit {rc}")
    Path(args.json).write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
