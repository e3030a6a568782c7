"""KV storage of the hf engine: the running batch's slots and the prefix cache.

Both hold keys and values as one tensor per block of tokens, laid out
``[layers, 2 (keys, values), ..., kv_heads, tokens, head_dim]``; torch is passed in (this module
imports no heavy dependency).

* :class:`SlotBatch`: the requests being decoded. One preallocated buffer
  ``[layers, 2, slots, kv_heads, columns, head_dim]``; a request owns a slot (a row) and its tokens
  fill the columns ``[col0, end)``, so every row ends at the shared column ``end`` (rows are
  left-padded, ``valid`` masks the padding). A decoding step writes column ``end`` of every slot in
  place and the model attends over views of the buffer: nothing is concatenated, re-selected or
  merged per step. A finished request frees its slot for the next one; the buffer is re-laid out
  (live rows packed into the lowest slots, columns no live row uses dropped, room added) only when it runs out
  of columns or rows, or when free slots pile up.
* :class:`PrefixCache`: a radix tree of token sequences the engine computed before (prompt plus
  response of finished requests), each edge holding its tokens' KV (a leaf that the next turn
  continues grows in place). A new prompt takes the KV of its longest cached prefix and only its
  remaining tokens are computed. Least recently used leaves are evicted past a byte budget;
  :meth:`PrefixCache.clear` drops everything (new weights).

KV computed while decoding equals KV computed by a prefill up to float rounding (different
kernels and batch shapes), so a reused prefix changes logprobs only within float tolerance.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Prefix", "PrefixCache", "SlotBatch", "buffer_cache"]


# ----------------------------------------------------------------------------- prefix cache
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

    @property
    def kv(self) -> Any:
        return self.store.data[:, :, :, self.off : self.off + len(self.tokens)]


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


# ----------------------------------------------------------------------------- slots
class SlotBatch:
    """The running requests' KV in one buffer (see the module docstring).

    ``rows[s]`` is the request in slot ``s`` (None: free); ``pos[s]`` the position id of the token it
    feeds next, ``next_tok[s]`` that token; ``col0[s]`` the first column of its tokens. Slots
    ``[0, hi)`` take part in a decoding step (free ones compute padding); columns ``[start, end)``
    hold every live row's tokens.
    """

    def __init__(self, torch: Any, device: Any, shape: tuple[int, int, int], dtype: Any, margin: int = 64) -> None:
        self._torch = torch
        self.device = device
        self.layers, self.heads, self.dim = shape
        self.dtype = dtype
        self.margin = margin
        self.kv: Any = torch.zeros((self.layers, 2, 0, self.heads, 0, self.dim), dtype=dtype, device=device)
        self.valid: Any = torch.zeros((0, 0), dtype=torch.bool, device=device)
        self.pos: Any = torch.zeros(0, dtype=torch.long, device=device)
        self.next_tok: Any = torch.zeros(0, dtype=torch.long, device=device)
        self.rows: list[Any] = []
        self.col0: list[int] = []
        self.start = self.end = self.hi = self.live = 0
        self._free: list[int] = []
        self.relayouts = self.packs = 0
        self._cols: Any = None

    @property
    def capacity(self) -> tuple[int, int]:
        return int(self.kv.shape[2]), int(self.kv.shape[4])

    def _columns(self) -> Any:
        """``arange(columns)`` (kept until the buffer changes size)."""
        cols = self.valid.shape[1]
        if self._cols is None or self._cols.shape[0] != cols:
            self._cols = self._torch.arange(cols, device=self.device)
        return self._cols

    def live_slots(self) -> list[int]:
        return [s for s in range(self.hi) if self.rows[s] is not None]

    def reserve(self, rows: int, left: int, right: int = 1) -> None:
        """Make room for ``rows`` more requests whose tokens reach ``left`` columns back from ``end``,
        and for ``right`` more columns after it (re-lays the buffer out when needed)."""
        cap_rows, cap_cols = self.capacity
        if self.hi > 2 * (self.live + rows) + 8:  # free slots piled up: pack the live ones
            self._pack()
        spare = len(self._free) + cap_rows - self.hi
        if spare < rows or self.end < left or self.end + right > cap_cols:
            self._relayout(rows, left, right)

    def _pack(self) -> None:
        """Move the live rows into the lowest slots (in place), so a step computes no free slot."""
        torch = self._torch
        self.packs += 1
        live = self.live_slots()
        n = len(live)
        dst = [s for s in range(n) if self.rows[s] is None]
        src = [s for s in live if s >= n]
        if dst:
            a, b = torch.tensor(dst, device=self.device), torch.tensor(src, device=self.device)
            lo = min(self.col0[s] for s in src)
            self.kv[:, :, a, :, lo : self.end] = self.kv[:, :, b, :, lo : self.end]
            self.valid[a] = self.valid[b]
            self.pos[a] = self.pos[b]
            self.next_tok[a] = self.next_tok[b]
            for d, s in zip(dst, src, strict=True):
                self.rows[d], self.rows[s] = self.rows[s], None
                self.rows[d].slot = d
                self.col0[d] = self.col0[s]
        self.hi, self._free = n, []

    def _relayout(self, rows: int, left: int, right: int) -> None:
        torch = self._torch
        self.relayouts += 1
        live = self.live_slots()
        cap_rows, cap_cols = self.capacity
        if not live and rows <= cap_rows and left + right <= cap_cols:
            # nothing to keep: move ``end`` (stale columns are masked by ``valid``), keep the buffer
            end = max(left, min(self.end, cap_cols - right))
            self.rows, self.col0 = [None] * cap_rows, [0] * cap_rows
            self.start, self.end, self.hi, self._free = end, end, 0, []
            return
        lo = min((self.col0[s] for s in live), default=self.end)
        width = self.end - lo
        end = max(width, left + max(self.margin, left // 2))  # room to the left for the longer prompts to come
        cols = end + max(right, self.margin, width // 2)
        need_rows = max(len(live) + rows, 8)
        if need_rows > cap_rows:
            need_rows = max(need_rows, min(2 * cap_rows, need_rows + 64))
        cap_rows = max(need_rows, cap_rows if cap_rows <= 2 * need_rows else need_rows)
        kv = torch.zeros((self.layers, 2, cap_rows, self.heads, cols, self.dim), dtype=self.dtype, device=self.device)
        valid = torch.zeros((cap_rows, cols), dtype=torch.bool, device=self.device)
        pos = torch.zeros(cap_rows, dtype=torch.long, device=self.device)
        next_tok = torch.zeros(cap_rows, dtype=torch.long, device=self.device)
        n = len(live)
        if n:
            idx = torch.tensor(live, device=self.device)
            if width:
                kv[:, :, :n, :, end - width : end] = self.kv[:, :, idx, :, lo : self.end]
                valid[:n, end - width : end] = self.valid[idx, lo : self.end]
            pos[:n] = self.pos[idx]
            next_tok[:n] = self.next_tok[idx]
        shift = end - self.end
        self.rows = [self.rows[s] for s in live] + [None] * (cap_rows - n)
        self.col0 = [self.col0[s] + shift for s in live] + [0] * (cap_rows - n)
        for s, row in enumerate(self.rows[:n]):
            row.slot = s
        self.kv, self.valid, self.pos, self.next_tok = kv, valid, pos, next_tok
        self.start, self.end, self.hi, self._free = end - width, end, n, []

    def alloc(self, row: Any) -> int:
        """A free slot for ``row`` (call :meth:`reserve` first)."""
        slot = heapq.heappop(self._free) if self._free else self.hi
        if slot == self.hi:
            self.hi += 1
        self.rows[slot] = row
        row.slot = slot
        self.live += 1
        return slot

    def place_many(self, slots: list[int], lengths: list[int], next_tok: list[int]) -> None:
        """Make each of ``slots`` hold ``lengths[j]`` tokens ending at ``end`` (the caller writes their
        KV into ``kv[:, :, slot, :, end - length : end]``) and feed ``next_tok[j]`` at position
        ``lengths[j]`` next."""
        torch = self._torch
        idx = torch.tensor(slots, device=self.device)
        n = torch.tensor(lengths, device=self.device)
        cols = self._columns()
        self.valid[idx] = (cols[None, :] >= (self.end - n)[:, None]) & (cols[None, :] < self.end)
        self.pos[idx] = n
        self.next_tok[idx] = torch.tensor(next_tok, device=self.device)
        for s, length in zip(slots, lengths, strict=True):
            self.col0[s] = self.end - length
        self.start = min(self.start, self.end - max(lengths))

    def take_block(self, rows: list[Any], left: int) -> int:
        """Consecutive new slots ``[b, b + len(rows))`` for ``rows`` (their tokens will reach ``left``
        columns back from ``end``); returns ``b``. Their columns are set by :meth:`mark`."""
        m = len(rows)
        cap_rows, cap_cols = self.capacity
        if self.hi > 2 * (self.live + m) + 8 or (self.hi + m > cap_rows and self.live + m <= cap_rows):
            self._pack()  # in place: free slots below ``hi`` are taken back
        if self.hi + m > cap_rows or self.end < left or self.end + 1 > cap_cols:
            self._relayout(m, left, 1)
        block = self.hi
        for s, row in enumerate(rows, start=block):
            self.rows[s] = row
            row.slot = s
        self.hi += m
        self.live += m
        return block

    def mark(self, slots: range, lengths: list[int], width: int) -> Any:
        """Slots ``slots`` hold ``lengths[j]`` tokens ending at ``end``; returns their ``valid`` over the
        last ``width`` columns (a view)."""
        torch = self._torch
        n = torch.tensor(lengths, device=self.device)
        cols = self._columns()
        rows = slice(slots.start, slots.stop)
        self.valid[rows] = (cols[None, :] >= (self.end - n)[:, None]) & (cols[None, :] < self.end)
        for s, length in zip(slots, lengths, strict=True):
            self.col0[s] = self.end - length
        self.start = min(self.start, self.end - max(lengths))
        return self.valid[rows, self.end - width : self.end]

    def copy_row(self, src: int, dst: int, width: int) -> None:
        """Slot ``dst`` gets a copy of slot ``src``'s last ``width`` columns (KV and mask)."""
        a = self.end - width
        self.kv[:, :, dst, :, a : self.end] = self.kv[:, :, src, :, a : self.end]
        self.valid[dst] = self.valid[src]
        self.col0[dst] = self.col0[src]

    def feed(self, slots: list[int], next_tok: list[int], pos: list[int]) -> None:
        """Slots ``slots`` feed ``next_tok[j]`` at position ``pos[j]`` in the next step."""
        idx = self._torch.tensor(slots, device=self.device)
        self.pos[idx] = self._torch.tensor(pos, device=self.device)
        self.next_tok[idx] = self._torch.tensor(next_tok, device=self.device)

    def release(self, slot: int) -> None:
        self.rows[slot] = None
        self.live -= 1
        heapq.heappush(self._free, slot)

    def tokens_of(self, slots: list[int], lengths: list[int]) -> list[Callable[[int, int], Any]]:
        """``kv_of(a, b)`` for :meth:`PrefixCache.insert`, per slot: a copy of the KV of ``[a, b)`` of
        the slot's last ``lengths[j]`` tokens (only what the cache lacks gets copied)."""
        kv = self.kv
        return [
            (lambda a, b, s=s, base=self.end - n: kv[:, :, s, :, base + a : base + b].clone())
            for s, n in zip(slots, lengths, strict=True)
        ]


_BUFFER_CACHE: Any = None


def buffer_cache(kv: Any, rows: tuple[int, int], start: int, write: int) -> Any:
    """A transformers ``Cache`` over ``kv`` ``[layers, 2, R, heads, C, dim]``: each layer's new keys and
    values are written to columns ``[write, write + q)`` of rows ``[rows[0], rows[1])``, and attention
    sees columns ``[start, write + q)`` of those rows (views: nothing is copied)."""
    global _BUFFER_CACHE
    if _BUFFER_CACHE is None:
        from transformers.cache_utils import Cache

        class BufferCache(Cache):
            def __init__(self, kv: Any, rows: tuple[int, int], start: int, write: int) -> None:
                super().__init__(layers=[])
                self.kv, self.rows, self.start, self.write = kv, slice(*rows), start, write

            def update(self, key_states: Any, value_states: Any, layer_idx: int, *args: Any, **kwargs: Any) -> Any:
                buf, rows = self.kv[layer_idx], self.rows
                stop = self.write + key_states.shape[-2]
                buf[0, rows, :, self.write : stop] = key_states
                buf[1, rows, :, self.write : stop] = value_states
                return buf[0, rows, :, self.start : stop], buf[1, rows, :, self.start : stop]

            def get_seq_length(self, layer_idx: int = 0) -> int:
                return self.write - self.start

        _BUFFER_CACHE = BufferCache
    return _BUFFER_CACHE(kv, rows, start, write)
