"""The hf engine's prefix cache: a radix tree of token sequences with their KV (:class:`PrefixCache`).

Split from :mod:`rockroll.agentrl.engines.kv`, whose docstring tells the KV layout and how the cache
and the running batch's slots share it (its names are re-exported there). torch is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Prefix", "PrefixCache"]


class _Store:
    """Growable KV storage ``[layers, 2, heads, capacity, dim]`` of a chain of edges; ``fill`` tokens used."""

    __slots__ = ("data", "fill")

    def __init__(self, data: Any, fill: int) -> None:
        self.data = data
        self.fill = fill


class _Node:
    """An edge of the radix tree: its tokens, where their KV lies in a store, its children by first
    token; ``flat``: the KV of the whole sequence from the root to a point in this edge, in one
    tensor (made for short sequences reused often, so reuse is one copy, not one per edge)."""

    __slots__ = ("tokens", "store", "off", "children", "parent", "stamp", "flat")

    def __init__(self, tokens: tuple[int, ...], store: Any, off: int, parent: _Node | None, stamp: int) -> None:
        self.tokens = tokens
        self.store = store
        self.off = off
        self.children: dict[int, _Node] = {}
        self.parent = parent
        self.stamp = stamp
        self.flat: Any = None


class Prefix:
    """A match of :meth:`PrefixCache.match`: per edge a view of its KV and the tokens used of it
    (later inserts never change what the views show), and the edge where the match ends."""

    __slots__ = ("pieces", "node")

    def __init__(self, pieces: list[tuple[Any, int]], node: _Node | None) -> None:
        self.pieces = pieces
        self.node = node


def _common(edge: tuple[int, ...], ids: tuple[int, ...], start: int, n: int) -> int:
    """Length of the common prefix of ``edge[:n]`` and ``ids[start:start + n]`` (slices compared in C)."""
    if ids[start : start + n] == (edge if n == len(edge) else edge[:n]):
        return n
    lo, hi = 1, n - 1  # edge[0] == ids[start] (the child was found by it); the mismatch is below n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ids[start : start + mid] == edge[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixCache:
    """Token sequences and their KV, for prefix reuse (see the module docstring).

    A leaf that a new sequence continues grows in place (its store keeps spare room), so a
    conversation that goes on turn after turn stays one edge: its KV is one slice, never a
    concatenation of many small pieces.

    Args:
        torch: the torch module.
        max_bytes: KV budget; past it, least recently used leaves are evicted (down to 90%).
    """

    def __init__(self, torch: Any, max_bytes: int) -> None:
        self._torch = torch
        self.max_bytes = max_bytes
        self.root = _Node((), None, 0, None, 0)
        self.tokens = 0
        self.bytes_per_token = 0
        self.evicted_tokens = 0
        self._clock = 0

    def clear(self) -> None:
        """Forget everything (the weights changed)."""
        self.root = _Node((), None, 0, None, 0)
        self.tokens = 0

    FLAT_MAX = 128  # longest sequence kept flat

    def match(self, ids: Sequence[int], limit: int) -> tuple[int, Prefix]:
        """The longest cached prefix of ``ids[:limit]``: its length and where its KV is; marks the
        path as recently used."""
        self._clock += 1
        ids = ids if isinstance(ids, tuple) else tuple(ids)
        node, i, pieces, last = self.root, 0, [], None
        while i < limit:
            child = node.children.get(ids[i])
            if child is None:
                break
            k = _common(child.tokens, ids, i, min(len(child.tokens), limit - i))
            child.stamp = self._clock
            pieces.append((child.store.data[:, :, :, child.off : child.off + k], k))
            last = child
            i += k
            if k < len(child.tokens):
                break
            node = child
        return i, Prefix(pieces, last)

    @staticmethod
    def source(prefix: Prefix, n: int) -> Any:
        """The KV of the first ``n`` tokens of ``prefix`` as one tensor (a view) when it is one
        already (a single edge, or a flat copy), else None (use :meth:`copy_into`)."""
        node = prefix.node
        if node is not None and node.flat is not None and node.flat.shape[3] >= n:
            return node.flat[:, :, :, :n]
        if len(prefix.pieces) == 1 and prefix.pieces[0][1] >= n:
            return prefix.pieces[0][0][:, :, :, :n]
        return None

    def copy_into(self, prefix: Prefix, n: int, dst: Any) -> None:
        """Copy the KV of the first ``n`` tokens of ``prefix`` (from :meth:`match`) into ``dst``
        ``[layers, 2, heads, n, dim]``."""
        node = prefix.node
        if node is not None and node.flat is not None and node.flat.shape[3] >= n:
            dst[...] = node.flat[:, :, :, :n]
            return
        got = 0
        for kv, k in prefix.pieces:
            take = min(k, n - got)
            if take <= 0:
                break
            dst[:, :, :, got : got + take] = kv if take == k else kv[:, :, :, :take]
            got += take
        if node is not None and len(prefix.pieces) > 1 and n <= self.FLAT_MAX and got == n:
            if node.flat is not None:
                self.tokens -= node.flat.shape[3]
            node.flat = dst.clone()
            self.tokens += n

    def insert(self, ids: Sequence[int], kv_of: Callable[[int, int], Any]) -> None:
        """Cache ``ids``; ``kv_of(a, b)`` gives the KV of ``ids[a:b]`` (asked only for what is not cached yet)."""
        self._clock += 1
        ids = ids if isinstance(ids, tuple) else tuple(ids)
        node, i, n = self.root, 0, len(ids)
        while i < n:
            child = node.children.get(ids[i])
            if child is None:
                if node is not self.root and not node.children and node.off + len(node.tokens) == node.store.fill:
                    self._extend(node, ids, i, kv_of(i, n))
                else:
                    kv = kv_of(i, n)
                    if not self.bytes_per_token:
                        self.bytes_per_token = kv[:, :, :, :1].numel() * kv.element_size()
                    store = _Store(kv, n - i)  # no spare room: a leaf that grows moves once
                    node.children[ids[i]] = _Node(tuple(ids[i:]), store, 0, node, self._clock)
                self.tokens += n - i
                break
            k = _common(child.tokens, ids, i, min(len(child.tokens), n - i))
            child.stamp = self._clock
            if k < len(child.tokens):
                if i + k == n:
                    break  # ids end inside this edge: cached already
                self._split(child, k)
            i += k
            node = child
        if self.bytes_per_token and self.tokens * self.bytes_per_token > self.max_bytes:
            self._evict(int(0.9 * self.max_bytes / self.bytes_per_token))

    def _grow(self, kv: Any, n: int, need: int | None = None) -> Any:
        """A store tensor holding ``kv`` (its first ``n`` tokens) with room for ``need`` tokens and spare after."""
        need = n if need is None else need
        shape = list(kv.shape)
        shape[3] = need + max(8, need // 2)
        data = self._torch.empty(shape, dtype=kv.dtype, device=kv.device)
        data[:, :, :, :n] = kv[:, :, :, :n]
        return data

    def _extend(self, leaf: _Node, ids: Sequence[int], i: int, kv: Any) -> None:
        """Append ``ids[i:]`` (KV ``kv``) to ``leaf``'s edge, in place when its store has room
        (else the store moves to a bigger tensor; the edges sharing it follow)."""
        store, add = leaf.store, len(ids) - i
        end = store.fill
        if end + add > store.data.shape[3]:
            store.data = self._grow(store.data, end, end + add)
        store.data[:, :, :, end : end + add] = kv
        store.fill = end + add
        leaf.tokens = leaf.tokens + tuple(ids[i:])
        leaf.stamp = self._clock

    def _split(self, node: _Node, k: int) -> None:
        """Cut ``node``'s edge after ``k`` tokens: ``node`` keeps the head, a new child the tail."""
        tail = _Node(node.tokens[k:], node.store, node.off + k, node, node.stamp)
        tail.flat, node.flat = node.flat, None  # the flat sequence ends in the tail now (or covers it)
        tail.children = node.children
        for c in tail.children.values():
            c.parent = tail
        node.tokens, node.children = node.tokens[:k], {tail.tokens[0]: tail}

    def _evict(self, target: int) -> None:
        """Drop least recently used leaves until at most ``target`` tokens remain."""
        while self.tokens > target:
            leaves, stack = [], [self.root]
            while stack:
                nd = stack.pop()
                if nd.children:
                    stack.extend(nd.children.values())
                elif nd is not self.root:
                    leaves.append(nd)
            if not leaves:
                return
            leaves.sort(key=lambda nd: nd.stamp)
            for leaf in leaves:
                if self.tokens <= target:
                    break
                if leaf.parent is not None:
                    del leaf.parent.children[leaf.tokens[0]]
                freed = len(leaf.tokens) + (leaf.flat.shape[3] if leaf.flat is not None else 0)
                self.tokens -= freed
                self.evicted_tokens += freed
