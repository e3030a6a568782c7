from intervals import contains, merge, overlaps, total_length


def test_merge_overlapping():
    assert merge([(1, 3), (2, 6), (8, 10)]) == [(1, 6), (8, 10)]


def test_merge_touching_and_unsorted():
    assert merge([(5, 7), (1, 5)]) == [(1, 7)]
    assert merge([(4, 5), (1, 2)]) == [(1, 2), (4, 5)]


def test_merge_nested_and_empty():
    assert merge([(1, 10), (2, 3)]) == [(1, 10)]
    assert merge([]) == []


def test_overlaps():
    assert overlaps((1, 3), (3, 5)) is True
    assert overlaps((1, 2), (3, 4)) is False
    assert overlaps((2, 8), (3, 4)) is True


def test_total_length():
    assert total_length([(1, 3), (2, 6)]) == 5
    assert total_length([(0, 1), (5, 9)]) == 5


def test_contains():
    assert contains([(1, 3), (6, 9)], 6) is True
    assert contains([(1, 3), (6, 9)], 4) is False
    assert contains([(1, 3)], 3) is True
