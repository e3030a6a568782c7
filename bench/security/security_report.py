"""The ``security`` section of ``bench/REPORT.md``, from ``bench/results/security.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _load(results: Path) -> dict[str, Any]:
    try:
        return json.loads((results / "security.json").read_text())
    except (OSError, ValueError):
        return {}


def security_section(results: Path) -> str:
    """Attacks per class, the two-owner fuzz and the stall figures as Markdown."""
    data = _load(results)
    if not data:
        return "_no bench/results/security.json yet_"
    out: list[str] = []
    attacks = data.get("attacks")
    if attacks:
        out += [
            "| attack class (tests/security) | tried | refused | not refused | skipped |",
            "| --- | ---: | ---: | --- | ---: |",
        ]
        for module, row in sorted(attacks["classes"].items()):
            failed = ", ".join(row["failed"]) or "-"
            out.append(
                f"| {row['class']} (`{module}`) | {row['tried']} | {row['refused']} | {failed} | {row.get('skipped', 0)} |"
            )
        skipped = sum(r.get("skipped", 0) for r in attacks["classes"].values())
        out += ["", f"**{attacks['refused']} of {attacks['tried']} attacks refused** ({skipped} skipped).", ""]
        out += [f"- skipped: {line}" for line in attacks.get("tail", "").splitlines() if line.startswith("SKIPPED")]
        out += [""] if skipped else []
    fuzz = data.get("fuzz")
    if fuzz and "cases" in fuzz:
        broken = {k: v for k, v in (fuzz.get("broken") or {}).items() if v}
        out += [
            "| two-owner fuzz cases | server errors | answers with the other owner's data | victims' resources broken |",
            "| ---: | ---: | ---: | --- |",
            f"| {fuzz['cases']} | {fuzz['server_errors']} | {fuzz['cross_owner']} | {broken or 'none'} |",
            "",
            f"answers by status: `{sorted(fuzz.get('statuses', {}).items())}`",
            "",
        ]
        out += [f"- {p}" for p in fuzz.get("problems", [])[:10]]
        out += _stateful_rows(fuzz.get("stateful"))
    stall = data.get("stall")
    if stall and "health_ms" in stall:
        out += ["", _stall_table(stall)]
    elif stall:
        shown = {k: v for k, v in stall.items() if not isinstance(v, (list, dict))}
        out += ["", "Stall attack: `" + json.dumps(shown) + "`"]
    return "\n".join(out)


def _stateful_rows(sf: dict[str, Any] | None) -> list[str]:
    """The stateful part of the two-owner fuzz (bench/security/owner_fuzz_stateful.py) as Markdown lines."""
    if not sf or "cases" not in sf:
        return []
    jobs = sf.get("foreign_jobs") or {}
    out = [
        "",
        "Stateful (`bench/security/owner_fuzz_stateful.py`: schemathesis's state machine over the spec's links, inferred "
        "plus env -> session and session -> sandbox; in each scenario one owner creates and uses resources and the "
        "other owner's token first replays every request that names them; victims' seeded resources are checked "
        "before this part, since creators may delete their own):",
        "",
        "| stateful requests | generated cases (creator) | attacker replays | scenarios | links | server errors "
        "| answers with the other owner's data | seconds |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {sf['cases']} | {sf['steps']} | {sf['replays']} | {sf['scenarios']} | {sf.get('links', '?')} "
        f"| {sf['server_errors']} | {sf['cross_owner']} | {sf.get('wall_s', '?')} |",
        "",
        f"attacker replays by status: `{sorted(sf.get('replay_statuses', {}).items())}`; creator steps by status: "
        f"`{sorted(sf.get('statuses', {}).items())}`; resources created: `{sf.get('created', {})}`; jobs queued "
        f"naming the other owner's env: `{jobs}`; stopped by: {sf.get('stopped_by', '?')} "
        f"(hypothesis restarts: {sf.get('restarts', 0)}, of them flaky: {sf.get('flaky_restarts', 0)}).",
        "",
    ]
    return out + [f"- {p}" for p in sf.get("problems", [])[:10]]


def _stall_table(stall: dict[str, Any]) -> str:
    """alice's latencies idle and while bob floods execs and FIFO reads (bench/security/stall_bench.py), and bob's answers."""
    args, ex, ff = stall.get("args", {}), stall.get("bob_exec", {}), stall.get("bob_fifo", {})
    rows = [
        ("alice `GET /v1/health`, idle", stall.get("baseline_health_ms")),
        ("alice `GET /v1/health`, under attack", stall["health_ms"]),
        ("alice `GET /v1/sandboxes`, idle", stall.get("baseline_sandboxes_ms")),
        ("alice `GET /v1/sandboxes`, under attack", stall.get("sandboxes_ms")),
        ("bob's 429 answers", stall.get("bob_refusal_ms")),
    ]
    out = [
        f"Stall attack (item 3), {args.get('seconds', '?')} s: bob sends {args.get('execs', '?')} concurrent "
        f"`sleep 20` execs and {args.get('fifo_readers', '?')} FIFO readers while alice polls.",
        "",
        "| latency (ms) | P50 | P99 | max | n |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    out += [f"| {name} | {r['p50']} | {r['p99']} | {r['max']} | {r['n']} |" for name, r in rows if r]
    machine = stall.get("machine", {})
    load = ", ".join(f"{x:.1f}" for x in machine.get("loadavg", []))
    verdict = "PASS" if stall.get("pass") else "FAIL"
    out += [
        "",
        f"bob's execs by answer: `{ex}`; FIFO reads by answer: `{ff}`; alice's errors: {len(stall.get('alice_errors', []))}.",
        f"Health P99 under attack {stall['health_ms']['p99']} ms against the bar of {stall.get('bar_p99_ms')} ms: "
        f"**{verdict}** ({machine.get('cpus', '?')} CPUs, load average {load} at the end).",
    ]
    return "\n".join(out)
