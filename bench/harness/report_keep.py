"""The hand-written part of ``bench/REPORT.md``, which ``make bench`` keeps when it rewrites the report.

:mod:`bench.harness.report` generates the report's top part from ``bench/results``; sections written by hand
(benches that are not a step of ``make bench`` yet, analyses, second passes) go below :data:`MARKER`,
a line of its own. A rewrite replaces everything above the marker and keeps the marker and everything
after it as they were. A report written before the marker existed keeps every section from the first
``## `` heading that the generator does not write.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["MARKER", "hand_written", "join"]

MARKER = (
    "<!-- hand-written below: bench/harness/report.py keeps everything after this line when it rewrites the report -->"
)


def hand_written(old: str, generated_titles: Collection[str]) -> str:
    """The part of the report ``old`` to keep (from the marker line on; '' when there is none)."""
    lines = old.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == MARKER:
            return "\n".join(lines[i:]).rstrip("\n") + "\n"
    generated = set(generated_titles)
    for i, line in enumerate(lines):  # an older report without the marker
        if line.startswith("## ") and line[3:].strip() not in generated:
            return "\n".join([MARKER, "", *lines[i:]]).rstrip("\n") + "\n"
    return ""


def join(generated: str, kept: str) -> str:
    """The new report: the generated part, then the kept hand-written part (if any)."""
    text = generated.rstrip("\n") + "\n"
    return text + ("\n" + kept if kept else "")
