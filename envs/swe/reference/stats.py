"""Descriptive statistics of lists of numbers."""


def mean(values):
    """Arithmetic mean; raises ValueError on an empty list."""
    if not values:
        raise ValueError("mean of empty data")
    return sum(values) / len(values)


def median(values):
    """Middle value (mean of the two middle values for an even count)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of empty data")
    mid = n // 2
    if n % 2 == 1:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def mode(values):
    """Most common value; the smallest one on a tie."""
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)


def variance(values):
    """Population variance."""
    m = mean(values)
    return sum((v - m) ** 2 for v in values) / len(values)


def clamp(value, low, high):
    """``value`` limited to ``[low, high]``."""
    if value < low:
        return low
    if value > high:
        return high
    return value
