"""The text side of SWE's file editor (``str_replace_editor`` of ``SWETools-v0``), as pure functions.

* :func:`numbered`: a file's text with line numbers (``cat -n`` style), optionally a range of lines;
* :func:`replace_once`: ``old_str`` replaced by ``new_str`` where it occurs exactly once (else an
  :class:`EditError` saying it was not found, or how many times it occurs);
* :func:`reference_edit`: the editor arguments that turn one file into another: a ``str_replace`` of the
  smallest unique span of lines that differs, or a ``create`` of the whole file when no span is unique.

Everything here works on text only; where the text comes from and goes to (the task's sandbox) is the
env's business (:mod:`rockroll.envs.swe.tool_env`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["EditError", "numbered", "replace_once", "snippet", "occurrences", "reference_edit", "SNIPPET_LINES"]

#: lines of context shown around an edit
SNIPPET_LINES = 3


class EditError(ValueError):
    """An edit the agent asked for cannot be made (no such file, ``old_str`` not unique, ...): its result says why."""


def occurrences(text: str, part: str, most: int = 2) -> int:
    """How many times ``part`` starts in ``text`` (overlaps counted), counting up to ``most``."""
    count, at = 0, text.find(part)
    while at != -1 and count < most:
        count += 1
        at = text.find(part, at + 1)
    return count


def numbered(text: str, view_range: Sequence[int] | None = None, *, first: int = 1) -> str:
    """``text`` with each line prefixed by its number; ``view_range`` ``[start, end]`` (1-based, inclusive,
    ``end == -1``: to the last line) keeps only those lines. ``first``: the number of ``text``'s first line."""
    lines = text.splitlines()
    start, end = 1, len(lines)
    if view_range is not None:
        start, end = int(view_range[0]), int(view_range[1])
        last = len(lines) if end == -1 else end
        if not 1 <= start <= max(len(lines), 1) or last < start or last > len(lines):
            raise EditError(
                f"view_range {list(view_range)} is outside the file's {len(lines)} lines: give [start, end] with "
                f"1 <= start <= end <= {len(lines)}, or end -1 for the last line"
            )
        end = last
    shown = lines[start - 1 : end]
    if not shown:
        return "(empty file)"
    return "\n".join(f"{n + first - 1:6}\t{line}" for n, line in enumerate(shown, start))


def replace_once(text: str, old_str: str, new_str: str, path: str) -> tuple[str, int]:
    """``text`` with its one occurrence of ``old_str`` replaced by ``new_str``, and the line (1-based) where
    the replacement starts; :class:`EditError` when ``old_str`` is empty, absent or occurs more than once."""
    if not old_str:
        raise EditError("old_str is empty: give the exact text to replace (copy it from a view of the file)")
    found = occurrences(text, old_str)
    if found == 0:
        raise EditError(
            f"old_str was not found in {path}; it must match the file exactly, whitespace and indentation "
            "included (view the file to copy it)"
        )
    if found > 1:
        raise EditError(f"old_str occurs more than once in {path}; add lines around it so that it is unique")
    at = text.find(old_str)
    return text[:at] + new_str + text[at + len(old_str) :], text.count("\n", 0, at) + 1


def snippet(text: str, line: int, new_str: str) -> str:
    """The edited region of ``text`` (the replacement starting at ``line``) with a few lines around, numbered."""
    lines = text.splitlines()
    start = max(1, line - SNIPPET_LINES)
    end = min(len(lines), line + new_str.count("\n") + SNIPPET_LINES)
    if not lines:
        return "(empty file)"
    return numbered("\n".join(lines[start - 1 : end]), first=start)


def reference_edit(before: str | None, after: str) -> dict[str, Any]:
    """Editor arguments (without ``path``) that turn ``before`` (None: no such file) into ``after``."""
    if before is None or before == after:
        return {"command": "create", "file_text": after}
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(a), len(b)) - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    lo, hi = prefix, len(a) - suffix  # a[lo:hi] becomes b[prefix:len(b) - suffix]
    while True:
        old = "".join(a[lo:hi])
        if old and occurrences(before, old) == 1:
            new = "".join(a[lo:prefix] + b[prefix : len(b) - suffix] + a[len(a) - suffix : hi])
            return {"command": "str_replace", "old_str": old, "new_str": new}
        if lo > 0:
            lo -= 1
        elif hi < len(a):
            hi += 1
        else:
            return {"command": "create", "file_text": after}
