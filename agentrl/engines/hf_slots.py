"""The hf engine's main decoding path: continuous batching over a slot KV cache (:class:`SlotDecoding`).

Requests join the running batch between decode steps (admission: prompts grouped, their cached
prefix reused, the rest prefilled) and leave it when they finish; see the module docstring of
:mod:`rockroll.agentrl.engines.hf`. A mixin of :class:`~rockroll.agentrl.engines.hf.HFEngine`: it
uses the engine's model, device, prefix cache, rows and stats.
"""

from __future__ import annotations

from typing import Any

from rockroll.agentrl.engines.base import EngineError
from rockroll.agentrl.engines.hf_rows import Pending, PrefillGroup, Row
from rockroll.agentrl.engines.kv import Prefix, SlotBatch, buffer_cache

__all__ = ["SlotDecoding"]


class SlotDecoding:
    """Continuous batching over the slot cache (see the module docstring)."""

    def _slots_forward(self, ids: Any, pos: Any, allowed: Any, rows: tuple[int, int], start: int, write: int) -> Any:
        """Logits ``[B, vocab]`` of the last position of slot rows ``rows`` fed ``ids`` at ``pos``:
        their KV goes to columns ``[write, write + S)`` of the slot buffer, attention sees columns
        ``[start, write + S)`` where ``allowed`` (``[B, 1, S, K]`` booleans). Through the TorchScript
        decoder when the model has one (:mod:`rockroll.agentrl.engines.fast_decoder`), else transformers."""
        kv = self._sb.kv
        if self._fast is not None:
            self.stats["forward_calls"] += 1
            return self._fast(ids, pos, allowed, kv, rows, start, write)
        cache = buffer_cache(kv, rows, start, write)
        out = self._forward(input_ids=ids, attention_mask=self._mask(allowed), position_ids=pos, past_key_values=cache)
        return out.logits[:, -1, :]

    def _mask(self, allowed: Any) -> Any:
        """A 4D attention mask from booleans (True: attend): as is for sdpa, additive for eager."""
        if self._attention == "sdpa":
            return allowed
        dtype = self._slots_shape[3]
        zero = self._torch.zeros(allowed.shape, dtype=dtype, device=self.device)
        return zero.masked_fill(~allowed, self._torch.finfo(dtype).min)

    # ------------------------------------------------------------ slots path
    @property
    def _sb(self) -> SlotBatch:
        if self._slots is None:
            raise EngineError("the hf engine's slot batch is not set up")
        return self._slots

    def _serve_slots(self, batch: list[Pending], version: int, inflight: list[Pending]) -> None:
        """Serve until the running batch is empty; waiting requests are admitted at every step
        (unless a weight update waits)."""
        if self._slots is None or self._slots.live:
            layers, heads, dim, dtype = self._slots_shape
            self._slots = SlotBatch(self._torch, self.device, (layers, heads, dim), dtype)
        slots = self._slots
        self.stats["waves"] += 1
        waiting = batch
        while True:
            if waiting:
                inflight.extend(waiting)
                self.stats["requests"] += len(waiting)
                self._admit(waiting, version)
                self._flush_outbox()
            if not slots.live:
                break
            self._decode(version)
            self._flush_outbox()
            room = self.max_batch_size - slots.live
            waiting = self._take_new(room) if room > 0 and not self._update_waiting.is_set() else []

    def _admit(self, items: list[Pending], version: int) -> None:
        """Group identical prompts, look each up in the prefix cache; prompts missing one token go
        straight into slots (the next step computes it), the others are prefilled first."""
        pc = self.prefix_cache
        groups: dict[tuple[int, ...], list[Pending]] = {}
        for p in items:
            groups.setdefault(tuple(p.request.prompt_ids), []).append(p)
        direct: list[PrefillGroup] = []
        prefill: list[PrefillGroup] = []
        for key, ps in groups.items():
            cached, path = pc.match(key, len(key) - 1) if pc is not None else (0, Prefix([], None))
            self.stats["prompt_tokens"] += len(key) * len(ps)
            (direct if len(key) - cached == 1 else prefill).append((key, ps, cached, path))
        if prefill:
            prefill.sort(key=lambda g: len(g[0]) - g[2], reverse=True)
            bucket: list[PrefillGroup] = []
            for g in prefill:  # rows needing at most half the longest one's tokens get a forward of their own
                if bucket and 2 * (len(g[0]) - g[2]) <= len(bucket[0][0]) - bucket[0][2]:
                    self._prefill(bucket, version)
                    bucket = []
                bucket.append(g)
            self._prefill(bucket, version)
        if direct:
            slots = self._sb
            slots.reserve(sum(len(g[1]) for g in direct), max(g[2] for g in direct))
            end = slots.end
            placed: list[int] = []
            lengths: list[int] = []
            feeds: list[int] = []
            stacked: dict[int, tuple[list[int], list[Any]]] = {}  # length -> slots, their prefix KV
            for key, ps, cached, path in direct:
                src = pc.source(path, cached) if cached and pc is not None else None
                first = -1
                for p in ps:
                    slot = slots.alloc(self._new_row(p))
                    placed.append(slot)
                    lengths.append(cached)
                    feeds.append(key[-1])
                    if not cached or pc is None:
                        continue
                    if src is not None:  # one tensor already: copied below with the others of its length
                        bucket = stacked.setdefault(cached, ([], []))
                        bucket[0].append(slot)
                        bucket[1].append(src)
                    elif first < 0:
                        pc.copy_into(path, cached, slots.kv[:, :, slot, :, end - cached : end])
                        first = slot
                    else:  # the same prompt again: copy the copy
                        slots.copy_row(first, slot, cached)
                self.stats["prefill_tokens"] += len(ps)
            for n, (where, srcs) in stacked.items():
                idx = self._torch.tensor(where, device=self.device)
                slots.kv[:, :, idx, :, end - n : end] = self._torch.stack(srcs, dim=2)
            slots.place_many(placed, lengths, feeds)

    def _prefill(self, groups: list[PrefillGroup], version: int) -> None:
        """One forward over the groups' uncached tokens, computed in place in a block of fresh
        slots (each row computes the same number ``S`` of columns: rows that need fewer recompute
        cached ones rather than pad); then sample their first tokens. Duplicate requests get a
        copy of their prompt's row; finished ones free their slots."""
        torch = self._torch
        slots, pc = self._sb, self.prefix_cache
        width = max(len(k) - c for k, _ps, c, _path in groups)  # S: new columns per row
        used = [max(0, len(k) - width) for k, _ps, _c, _path in groups]  # cached tokens each row takes
        total = max(used) + width
        m = len(groups)
        firsts = [self._new_row(ps[0]) for _k, ps, _c, _path in groups]
        block = slots.take_block(firsts, total)  # slots [block, block + m), tokens ending at ``end``
        end = slots.end
        ids: list[list[int]] = []
        pos: list[list[int]] = []
        lengths: list[int] = []
        for i, ((key, _ps, _c, path), u) in enumerate(zip(groups, used, strict=True)):
            n, k = len(key), len(key) - u
            if u and pc is not None:
                pc.copy_into(path, u, slots.kv[:, :, block + i, :, end - n : end - k])
            ids.append([self.pad_token_id] * (width - k) + list(key[u:]))
            pos.append([0] * (width - k) + list(range(u, n)))
            lengths.append(n)
            self.stats["prefill_tokens"] += k
        rows_valid = slots.mark(range(block, block + m), lengths, total)  # [m, total] columns end - total ..
        q = torch.arange(width, device=self.device)
        causal = torch.arange(total, device=self.device)[None, :] <= (total - width + q)[:, None]
        allowed = rows_valid[:, None, None, :] & causal[None, None]
        allowed[:, :, q, total - width + q] = True  # padding queries attend to themselves: none is all masked
        logits = self._slots_forward(
            torch.tensor(ids, device=self.device),
            torch.tensor(pos, device=self.device),
            allowed,
            (block, block + m),
            end - total,
            end - width,
        ).float()
        rows: list[Row] = []
        src: list[int] = []
        first_at: list[int] = []
        kv_of = slots.tokens_of(list(range(block, block + m)), lengths) if pc is not None else []
        for i, (key, ps, _c, _path) in enumerate(groups):
            if pc is not None:  # later requests with this prompt (or extending it) find it at once
                pc.insert(key, kv_of[i])
            first_at.append(len(rows))
            rows.append(firsts[i])
            src.append(i)
            for p in ps[1:]:
                rows.append(self._new_row(p))
                src.append(i)
        if len(src) > m:
            logits = logits[torch.tensor(src, device=self.device)]
        keep, _ = self._advance(rows, logits, version)
        kept = set(keep)
        dups = [(src[j], rows[j]) for j in keep if rows[j] is not firsts[src[j]]]
        if dups:  # the same prompt asked for again: a copy of its row (while that row still holds it)
            slots.reserve(len(dups), total)
            for i, r in dups:
                slots.copy_row(firsts[i].slot, slots.alloc(r), total)
        for r, j in zip(firsts, first_at, strict=True):
            if j not in kept:
                slots.release(r.slot)
        if keep:
            slots.feed([rows[j].slot for j in keep], [rows[j].toks[-1] for j in keep], [lengths[src[j]] for j in keep])

    def _decode(self, version: int) -> None:
        """One decoding step of every slot: write column ``end``, sample, retire finished requests
        (their tokens go to the prefix cache)."""
        torch = self._torch
        slots, pc = self._sb, self.prefix_cache
        slots.reserve(0, 0, 1)
        hi, start, end = slots.hi, slots.start, slots.end
        slots.valid[:hi, end] = True
        logits = self._slots_forward(
            slots.next_tok[:hi, None],
            slots.pos[:hi, None],
            slots.valid[:hi, None, None, start : end + 1],
            (0, hi),
            start,
            end,
        )
        slots.end = end + 1
        slots.pos[:hi] += 1
        self.stats["steps"] += 1
        self.stats["step_rows"] += slots.live
        live = slots.live_slots()
        rows = [slots.rows[s] for s in live]
        idx = torch.tensor(live, device=self.device) if len(live) < hi else None  # free slots computed padding
        if idx is not None:
            logits = logits[idx]
        keep, chosen = self._advance(rows, logits.float(), version)
        if idx is None:
            slots.next_tok[:hi] = chosen
        else:
            slots.next_tok[idx] = chosen
        if len(keep) < len(rows):
            kept = set(keep)
            done = [r for j, r in enumerate(rows) if j not in kept]
            if (
                pc is not None
            ):  # their computed tokens (prompt, response but its last and a forced tail) go to the prefix cache
                seqs = [[*r.pending.request.prompt_ids, *r.fed()] for r in done]
                for seq, kv_of in zip(
                    seqs, slots.tokens_of([r.slot for r in done], [len(q) for q in seqs]), strict=True
                ):
                    pc.insert(seq, kv_of)
            for r in done:
                slots.release(r.slot)
