"""A LIFO stack and a bounded FIFO queue."""


class Stack:
    """Last in, first out."""

    def __init__(self):
        self._items = []

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if not self._items:
            raise IndexError("pop from empty stack")
        return self._items.pop()

    def peek(self):
        if not self._items:
            raise IndexError("peek at empty stack")
        return self._items[-1]

    def __len__(self):
        return len(self._items)


class BoundedQueue:
    """First in, first out, holding at most ``capacity`` items."""

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._items = []

    def is_full(self):
        return len(self._items) >= self.capacity

    def enqueue(self, item):
        if self.is_full():
            raise OverflowError("queue is full")
        self._items.append(item)

    def dequeue(self):
        if not self._items:
            raise IndexError("dequeue from empty queue")
        return self._items.pop(0)

    def __len__(self):
        return len(self._items)
