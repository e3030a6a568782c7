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
  :meth:`PrefixCache.clear` drops everything (new weights). It lives in
  :mod:`rockroll.agentrl.engines.prefix_cache`.

KV computed while decoding equals KV computed by a prefill up to float rounding (different
kernels and batch shapes), so a reused prefix changes logprobs only within float tolerance.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from rockroll.agentrl.engines.prefix_cache import Prefix, PrefixCache

__all__ = ["Prefix", "PrefixCache", "SlotBatch", "buffer_cache"]


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
