from search import binary_search, count_in_range, lower_bound


def test_binary_search_found():
    items = [1, 3, 5, 7, 9, 11]
    assert binary_search(items, 1) == 0
    assert binary_search(items, 7) == 3
    assert binary_search(items, 11) == 5


def test_binary_search_missing():
    assert binary_search([1, 3, 5], 4) == -1
    assert binary_search([], 4) == -1
    assert binary_search([2], 9) == -1


def test_lower_bound():
    items = [1, 2, 2, 2, 5]
    assert lower_bound(items, 2) == 1
    assert lower_bound(items, 3) == 4
    assert lower_bound(items, 0) == 0
    assert lower_bound(items, 6) == 5


def test_count_in_range():
    assert count_in_range([1, 2, 3, 4, 5, 6], 2, 5) == 3
    assert count_in_range([1, 1, 1], 1, 2) == 3
