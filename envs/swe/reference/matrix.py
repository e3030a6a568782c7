"""Matrices as lists of rows."""


def identity(n):
    """The ``n`` x ``n`` identity matrix."""
    return [[1 if i == j else 0 for j in range(n)] for i in range(n)]


def transpose(m):
    """Rows become columns."""
    return [[m[i][j] for i in range(len(m))] for j in range(len(m[0]))]


def add(a, b):
    """Element-wise sum of two matrices of the same shape."""
    if len(a) != len(b) or len(a[0]) != len(b[0]):
        raise ValueError("shape mismatch")
    return [[a[i][j] + b[i][j] for j in range(len(a[0]))] for i in range(len(a))]


def matmul(a, b):
    """Matrix product ``a @ b``."""
    if len(a[0]) != len(b):
        raise ValueError("shape mismatch")
    rows, inner, cols = len(a), len(b), len(b[0])
    out = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        for j in range(cols):
            total = 0
            for k in range(inner):
                total += a[i][k] * b[k][j]
            out[i][j] = total
    return out


def trace(m):
    """Sum of the diagonal of a square matrix."""
    return sum(m[i][i] for i in range(len(m)))
