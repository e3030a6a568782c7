"""Keeping ``/v1/overview`` small (issue 13 item 10): thinned metric histories, and lists cut to a byte budget.

The page polls the overview every second, so its size is a budget, not an outcome: :func:`fit` halves
the largest list (a job history before the job list) until the JSON is under the budget; ``totals``
in the answer still says how many items each list has.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["fit", "thin", "json_size"]

#: the lists :func:`fit` may cut, each a key of the overview
LISTS = ("sandboxes", "sessions", "envs", "restarts", "pools", "jobs")


def json_size(value: Any) -> int:
    """Bytes of ``value`` as the API sends it (compact JSON, UTF-8)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def thin(points: list[dict[str, Any]], max_points: int, max_metrics: int) -> list[dict[str, Any]]:
    """At most ``max_points`` reports (evenly spread, first and last kept), each with only the first
    ``max_metrics`` numeric metric names (those the page plots)."""
    names: list[str] = []
    for p in points:
        for k, v in p.get("metrics", {}).items():
            if k not in names and isinstance(v, (int, float)) and not isinstance(v, bool):
                names.append(k)
    names = names[:max_metrics]
    if len(points) > max_points:
        step = (len(points) - 1) / max(max_points - 1, 1)
        points = [points[round(i * step)] for i in range(max_points)]
    return [{"t": p["t"], "metrics": {k: p["metrics"][k] for k in names if k in p.get("metrics", {})}} for p in points]


def fit(overview: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``overview`` with its largest lists halved until its JSON is at most ``max_bytes`` (in place)."""
    for _ in range(64):
        if json_size(overview) <= max_bytes:
            break
        biggest = max(LISTS, key=lambda k: json_size(overview.get(k, [])))
        items = overview.get(biggest) or []
        if not items:
            break
        if biggest == "jobs" and any(j.get("history") for j in items):
            longest = max(items, key=lambda j: len(j.get("history") or []))
            history = longest["history"]
            longest["history"] = history[len(history) // 2 :] if len(history) > 1 else []
        else:
            overview[biggest] = items[: len(items) // 2]
    return overview
