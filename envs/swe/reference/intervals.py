"""Merge and measure closed integer intervals given as ``(start, end)`` pairs."""


def merge(intervals):
    """Merge overlapping or touching intervals; return them sorted by start."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlaps(a, b):
    """Whether intervals ``a`` and ``b`` share at least one point."""
    return a[0] <= b[1] and b[0] <= a[1]


def total_length(intervals):
    """Total length covered by the intervals (overlaps counted once)."""
    return sum(end - start for start, end in merge(intervals))


def contains(intervals, point):
    """Whether ``point`` lies in one of the intervals."""
    for start, end in intervals:
        if start <= point <= end:
            return True
    return False
