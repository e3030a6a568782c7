from matrix import add, identity, matmul, trace, transpose


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return True
    return False


def test_identity():
    assert identity(2) == [[1, 0], [0, 1]]
    assert identity(3)[2] == [0, 0, 1]


def test_transpose():
    assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]


def test_add():
    assert add([[1, 2], [3, 4]], [[10, 20], [30, 40]]) == [[11, 22], [33, 44]]
    assert raises(ValueError, add, [[1, 2]], [[1], [2]])


def test_matmul():
    assert matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == [[19, 22], [43, 50]]
    assert matmul([[1, 2, 3]], [[1], [2], [3]]) == [[14]]
    assert raises(ValueError, matmul, [[1, 2]], [[1, 2]])


def test_matmul_identity():
    m = [[2, 3], [4, 5]]
    assert matmul(m, identity(2)) == m


def test_trace():
    assert trace([[1, 2], [3, 4]]) == 5
    assert trace(identity(4)) == 4
