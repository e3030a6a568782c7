"""What tool envs' turns did, as rates: the metrics a training step logs and an evaluation reports.

Counted over the turns of tool envs (``Turn.tools``, the env's per-step counts; text envs' turns have none):

* ``turns_with_call``: share of turns with at least one well-formed call;
* ``parse_ok_turns``: share of turns whose every attempted call parsed (a turn of text only counts as parsed);
* ``calls_per_turn``: well-formed calls per turn;
* per attempted call (well-formed or not; left out when no turn attempted one): ``parseable_call_rate``
  (parsed), ``unknown_tool_rate`` (named no declared tool), ``bad_arguments_rate`` (failed the tool's schema),
  ``tool_error_rate`` (the tool raised).
"""

from __future__ import annotations

from collections.abc import Iterable

from rockroll.agentrl.trajectory import Trajectory

__all__ = ["tool_metrics", "TOOL_METRICS", "TOOL_COUNTS"]

#: a tool env's per-turn counts (its step's ``info``, :mod:`rockroll.envs.tool_env`), kept in ``Turn.tools``
TOOL_COUNTS = ("tool_calls", "malformed_calls", "unknown_tools", "bad_arguments", "tool_errors")

#: the metric names, in the order reports show them
TOOL_METRICS = (
    "turns_with_call",
    "parse_ok_turns",
    "calls_per_turn",
    "parseable_call_rate",
    "unknown_tool_rate",
    "bad_arguments_rate",
    "tool_error_rate",
)


def tool_metrics(trajectories: Iterable[Trajectory]) -> dict[str, float]:
    """The rates of the module docstring (``{}`` when no turn was a tool env's)."""
    counts = [u.tools for t in trajectories for u in t.turns if u.tools is not None]
    if not counts:
        return {}
    n = len(counts)

    def total(key: str) -> int:
        return sum(c.get(key, 0) for c in counts)

    calls, malformed = total("tool_calls"), total("malformed_calls")
    out = {
        "turns_with_call": sum(c.get("tool_calls", 0) > 0 for c in counts) / n,
        "parse_ok_turns": sum(c.get("malformed_calls", 0) == 0 for c in counts) / n,
        "calls_per_turn": calls / n,
    }
    attempted = calls + malformed
    if attempted:
        out.update({
            "parseable_call_rate": calls / attempted,
            "unknown_tool_rate": total("unknown_tools") / attempted,
            "bad_arguments_rate": total("bad_arguments") / attempted,
            "tool_error_rate": total("tool_errors") / attempted,
        })  # fmt: skip
    return out
