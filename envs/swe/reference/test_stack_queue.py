from stack_queue import BoundedQueue, Stack


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return True
    return False


def test_stack_order():
    s = Stack()
    s.push(1)
    s.push(2)
    s.push(3)
    assert s.pop() == 3
    assert s.peek() == 2
    assert len(s) == 2


def test_stack_empty():
    s = Stack()
    assert raises(IndexError, s.pop)
    assert raises(IndexError, s.peek)
    assert len(s) == 0


def test_queue_order():
    q = BoundedQueue(3)
    q.enqueue("a")
    q.enqueue("b")
    assert q.dequeue() == "a"
    assert q.dequeue() == "b"
    assert len(q) == 0


def test_queue_capacity():
    q = BoundedQueue(2)
    q.enqueue(1)
    assert q.is_full() is False
    q.enqueue(2)
    assert q.is_full() is True
    assert raises(OverflowError, q.enqueue, 3)


def test_queue_errors():
    assert raises(ValueError, BoundedQueue, 0)
    assert raises(IndexError, BoundedQueue(1).dequeue)
