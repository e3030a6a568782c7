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
        out += ["| attack class (tests/security) | tried | refused | not refused |", "| --- | ---: | ---: | --- |"]
        for module, row in sorted(attacks["classes"].items()):
            failed = ", ".join(row["failed"]) or "-"
            out.append(f"| {row['class']} (`{module}`) | {row['tried']} | {row['refused']} | {failed} |")
        out += ["", f"**{attacks['refused']} of {attacks['tried']} attacks refused.**", ""]
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
    stall = data.get("stall")
    if stall:
        shown = {k: v for k, v in stall.items() if not isinstance(v, (list, dict))}
        out += ["", "Stall attack: `" + json.dumps(shown) + "`"]
    return "\n".join(out)
