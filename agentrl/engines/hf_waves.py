"""The hf engine's fallback decoding path: static waves (:class:`WaveDecoding`), for models the slot
cache does not support. A wave's rows decode together; new requests join at a step by merging a
fresh wave into the running one. A mixin of :class:`~rockroll.agentrl.engines.hf.HFEngine`.
"""

from __future__ import annotations

from typing import Any

from rockroll.agentrl.engines.hf_rows import Pending, WaveState

__all__ = ["WaveDecoding"]


class WaveDecoding:
    """Static waves (see the module docstring)."""

    # ------------------------------------------------------------ fallback: static waves
    def _serve_waves(self, batch: list[Pending], version: int, inflight: list[Pending]) -> None:
        """Decode ``batch`` to the end, one batched forward per step. New requests join the running
        batch at step boundaries unless a weight update is waiting or the model's cache cannot be
        merged; then they wait for the batch to drain."""
        state: WaveState | None = None
        waiting = batch
        self.stats["waves"] += 1
        while True:
            if waiting:
                inflight.extend(waiting)
                self.stats["requests"] += len(waiting)
                state = self._wave_admit(state, waiting, version)
                self._flush_outbox()
            if state is None:
                break
            state = self._wave_step(state, version)
            self._flush_outbox()
            room = self.max_batch_size - (len(state.rows) if state else 0)
            joinable = state is None or self._can_join
            waiting = self._take_new(room) if joinable and room > 0 and not self._update_waiting.is_set() else []

    def _wave_admit(self, state: WaveState | None, items: list[Pending], version: int) -> WaveState | None:
        """Prefill ``items`` (left-padded), sample their first token, merge them into ``state``."""
        torch = self._torch
        dev = self.device
        n = len(items)
        width = max(len(p.request.prompt_ids) for p in items)
        ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(items):
            k = len(p.request.prompt_ids)
            ids[i, width - k :] = torch.tensor(list(p.request.prompt_ids), dtype=torch.long)
            mask[i, width - k :] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        self.stats["prompt_tokens"] += int(mask.sum())
        self.stats["prefill_tokens"] += int(mask.sum())
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        rows = [self._new_row(p) for p in items]
        out = self._forward(input_ids=ids, attention_mask=mask, position_ids=pos)
        new = WaveState(rows, out.past_key_values, mask, pos[:, -1:])
        new = self._wave_keep(new, self._advance(rows, out.logits[:, -1, :].float(), version)[0])
        if new is None or state is None:
            return new if new is not None else state
        return self._wave_merge(state, new)

    def _wave_step(self, state: WaveState, version: int) -> WaveState | None:
        """One decoding step of every running row."""
        torch = self._torch
        dev = self.device
        next_ids = torch.tensor([[r.toks[-1]] for r in state.rows], device=dev)
        mask = torch.cat([state.mask, torch.ones((len(state.rows), 1), dtype=state.mask.dtype, device=dev)], dim=1)
        pos = state.pos + 1
        out = self._forward(input_ids=next_ids, attention_mask=mask, position_ids=pos, past_key_values=state.cache)
        keep, _ = self._advance(state.rows, out.logits[:, -1, :].float(), version)
        return self._wave_keep(WaveState(state.rows, out.past_key_values, mask, pos), keep)

    def _wave_keep(self, state: WaveState, keep: list[int]) -> WaveState | None:
        """Drop finished rows from the batch and the KV cache; trim all-padding columns."""
        if not keep:
            return None
        if len(keep) < len(state.rows):
            idx = self._torch.tensor(keep, device=self.device)
            state.cache.batch_select_indices(idx)
            state = WaveState([state.rows[j] for j in keep], state.cache, state.mask[idx], state.pos[idx])
        if self._can_join:
            first = int(state.mask.any(0).to(self._torch.int8).argmax())
            if first > 0:
                for layer in state.cache.layers:
                    layer.keys, layer.values = layer.keys[:, :, first:], layer.values[:, :, first:]
                state.mask = state.mask[:, first:]
        return state

    def _wave_merge(self, a: WaveState, b: WaveState) -> WaveState:
        """One batch from two: left-pad the shorter cache (masked zeros), stack along the batch."""
        torch = self._torch
        F = torch.nn.functional
        width = max(a.mask.shape[1], b.mask.shape[1])

        def pad_kv(t: Any) -> Any:
            return F.pad(t, (0, 0, width - t.shape[2], 0))

        for la, lb in zip(a.cache.layers, b.cache.layers, strict=True):
            la.keys = torch.cat([pad_kv(la.keys), pad_kv(lb.keys)], dim=0)
            la.values = torch.cat([pad_kv(la.values), pad_kv(lb.values)], dim=0)
        mask = torch.cat([F.pad(m, (width - m.shape[1], 0)) for m in (a.mask, b.mask)], dim=0)
        return WaveState(a.rows + b.rows, a.cache, mask, torch.cat([a.pos, b.pos], dim=0))
