from stats import clamp, mean, median, mode, variance


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return True
    return False


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5
    assert raises(ValueError, mean, [])


def test_median():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert raises(ValueError, median, [])


def test_mode():
    assert mode([1, 2, 2, 3]) == 2
    assert mode([5, 4, 4, 5]) == 4


def test_variance():
    assert variance([2, 4, 4, 4, 5, 5, 7, 9]) == 4.0
    assert variance([3, 3]) == 0.0


def test_clamp():
    assert clamp(5, 0, 10) == 5
    assert clamp(-3, 0, 10) == 0
    assert clamp(12, 0, 10) == 10
