"""Searching sorted lists."""


def binary_search(items, target):
    """Index of ``target`` in the sorted list ``items``, or -1."""
    lo, hi = 0, len(items) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1


def lower_bound(items, target):
    """First index whose item is >= ``target`` (``len(items)`` if none)."""
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def count_in_range(items, low, high):
    """How many items of the sorted list lie in ``[low, high)``."""
    return lower_bound(items, high) - lower_bound(items, low)
