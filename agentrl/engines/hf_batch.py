"""The hf engine's batch path: a whole batch of fresh prompts decoded together in the caller's thread.

:meth:`HFEngine.generate_batch <rockroll.agentrl.engines.hf.HFEngine.generate_batch>` comes here
when a caller has every request of a round at once (a lock-step multi-turn rollout, plan mode).
The continuous-batching path costs Python per request (queue, admission, prefix-cache lookups,
slot bookkeeping, a hand-back to the event loop); here a round is one prefill forward over its
distinct prompts and one forward per decoding step over all rows, with nothing to schedule.

How: identical prompts are computed once (left-padded, one TorchScript forward of
:mod:`rockroll.agentrl.engines.fast_decoder`) and their rows copied for each request asking, then
every row samples on its own. A prompt's KV and next-token logits are kept for later rounds while
the weights stay the same (up to :data:`MEMO_PROMPTS` prompts): a group of episodes on one map
meets the same states turn after turn, so most prompts of a round were computed in an earlier one.
Sampling, seeds and logprobs are the slots path's: each request's private generator (its
``SamplingParams.seed``, or one from the engine's RNG) draws one uniform per token, and
``logprobs`` are the raw float32 log-softmax of the sampled tokens. Only whole prompts are reused,
no shared prefix: this path suits prompts that are the current state of a fully observed env or a
plan prompt; a conversation that grows turn by turn is better served by the slots path and its
prefix cache.

Only models on the slots path with a TorchScript forward take it (:func:`decode_batch` returns
None otherwise, and the engine queues the requests as usual). It holds the engine's weights lock,
so a weight update waits for the round and no round mixes weights.
"""

from __future__ import annotations

from typing import Any

from rockroll.agentrl.engines.base import GenerationResult

__all__ = ["decode_batch", "MEMO_PROMPTS"]

#: prompts whose KV and next-token logits are kept between rounds (for the weights they came from)
MEMO_PROMPTS = 4096


def decode_batch(engine: Any, rows: list[Any]) -> list[GenerationResult] | None:
    """Results of the requests behind ``rows`` (the engine's sampling rows, one per request: its
    request, seeded generator, stops and budget), or None when the engine's model has no batch path
    (see the module docstring)."""
    torch = engine._torch
    with torch.inference_mode(), engine._weights_lock:
        if engine._mode is None:
            engine._setup()
        fast = engine._fast
        if engine._mode != "slots" or fast is None:
            return None
        return _Round(engine, fast, rows, engine.weight_version).run()


class _Round:
    """One batch: prefill the distinct prompts, then decode every row to its stop or its budget."""

    def __init__(self, engine: Any, fast: Any, rows: list[Any], version: int) -> None:
        self.e, self.fast, self.rows, self.version = engine, fast, rows, version
        self.torch = engine._torch
        self.dev = engine.device

    def run(self) -> list[GenerationResult]:
        torch, e = self.torch, self.e
        prompts = [tuple(r.pending.request.prompt_ids) for r in self.rows]
        distinct: dict[tuple[int, ...], int] = {}
        src = [distinct.setdefault(p, len(distinct)) for p in prompts]
        keys = list(distinct)
        e.stats["requests"] += len(self.rows)
        e.stats["prompt_tokens"] += sum(map(len, prompts))
        memo = e.batch_memo  # emptied by every weight update (HFEngine.update_weights)
        misses = [k for k in keys if k not in memo]
        if len(memo) + len(misses) > MEMO_PROMPTS:
            memo.clear()
            misses = keys
        self._prefill(misses, memo)
        logits = torch.stack([memo[k][1] for k in keys])
        index = torch.tensor(src, device=self.dev) if len(keys) < len(self.rows) else None
        # the first token of every row from the memo's logits: a row whose answer then has no choice left
        # (restricted answers: the rest is forced) ends here, and a round where all do needs no forward
        keep, chosen = self._advance(self.rows, (logits if index is None else logits[index]).float())
        if keep:
            self._decode(keys, index, memo, prompts, keep, chosen)
        return [
            GenerationResult(
                token_ids=r.toks,
                logprobs=r.lps,
                finish_reason="stop" if r.toks and r.toks[-1] in r.stops else "length",
                weight_version=self.version,
            )
            for r in self.rows
        ]

    def _decode(
        self, keys: list[tuple[int, ...]], index: Any, memo: dict[tuple[int, ...], tuple[Any, Any]],
        prompts: list[tuple[int, ...]], keep: list[int], chosen: Any,
    ) -> None:  # fmt: skip
        """Decode the rows in ``keep`` (their first tokens ``chosen``) to their stops or budgets: each step one
        forward over the rows still going, on the KV of their prompts (from ``memo``)."""
        torch, e = self.torch, self.e
        width = max(len(k) for k in keys)
        budget = max(r.max_new for r in self.rows)
        layers, heads, dim, dtype = e._slots_shape
        kv = torch.zeros((layers, 2, len(keys), heads, width + budget, dim), dtype=dtype, device=self.dev)
        valid = torch.zeros((len(keys), width + budget), dtype=torch.bool)
        by_length: dict[int, list[int]] = {}
        for i, k in enumerate(keys):
            by_length.setdefault(len(k), []).append(i)
            valid[i, width - len(k) : width] = True
        for n, rows in by_length.items():  # one copy per prompt length, not per prompt
            kv[:, :, torch.tensor(rows, device=self.dev), :, width - n : width] = torch.stack(
                [memo[keys[i]][0] for i in rows], dim=2
            )
        if index is not None:
            kv, valid = kv.index_select(2, index), valid[index]
        lengths = torch.tensor([len(p) for p in prompts], dtype=torch.long)
        live = list(range(len(self.rows)))  # rows still decoding, in kv/valid row order
        for step in range(1, budget):
            if len(keep) < len(live):
                sel = torch.tensor(keep, device=self.dev)
                kv, valid, chosen = kv.index_select(2, sel), valid[sel], chosen[sel]
                live = [live[j] for j in keep]
            col = width + step - 1
            valid[:, col] = True
            logits = self._forward(
                chosen[:, None].to(self.dev),
                (lengths[live] + step - 1)[:, None].to(self.dev),
                valid[:, None, None, : col + 1].to(self.dev),
                kv,
                col,
            )
            e.stats["steps"] += 1
            e.stats["step_rows"] += len(live)
            keep, chosen = self._advance([self.rows[i] for i in live], logits.float())
            if not keep:
                break

    def _prefill(self, keys: list[tuple[int, ...]], memo: dict[tuple[int, ...], tuple[Any, Any]]) -> None:
        """One forward over ``keys`` (left-padded); each prompt's KV and last logits go to ``memo``."""
        if not keys:
            return
        torch, e = self.torch, self.e
        width = max(len(k) for k in keys)
        layers, heads, dim, dtype = e._slots_shape
        kv = torch.zeros((layers, 2, len(keys), heads, width, dim), dtype=dtype, device=self.dev)
        ids = torch.full((len(keys), width), e.pad_token_id, dtype=torch.long)
        pos = torch.zeros((len(keys), width), dtype=torch.long)
        valid = torch.zeros((len(keys), width), dtype=torch.bool)
        for i, k in enumerate(keys):
            n = len(k)
            ids[i, width - n :] = torch.tensor(k)
            pos[i, width - n :] = torch.arange(n)
            valid[i, width - n :] = True
        e.stats["prefill_tokens"] += sum(map(len, keys))
        q = torch.arange(width)
        allowed = valid[:, None, None, :] & (q[None, :] <= q[:, None])[None, None]
        allowed[:, :, q, q] = True  # padding queries attend to themselves: no row is all masked
        logits = self._forward(ids, pos, allowed, kv, 0)
        for i, k in enumerate(keys):
            memo[k] = (kv[:, :, i, :, width - len(k) :].clone(), logits[i].clone())

    def _forward(self, ids: Any, pos: Any, allowed: Any, kv: Any, write: int) -> Any:
        self.e.stats["forward_calls"] += 1
        return self.fast(ids.to(self.dev), pos.to(self.dev), allowed.to(self.dev), kv, (0, kv.shape[2]), 0, write)

    def _advance(self, rows: list[Any], logits: Any) -> tuple[list[int], Any]:
        """Sample a token per row (the engine's sampler), record it and its logprob; the rows that go on."""
        torch = self.torch
        logits = self.e._restrict(logits, rows)
        chosen = self.e._sample(logits, [r.params for r in rows], rows)
        logp = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None])[:, 0]
        keep: list[int] = []
        for j, (r, tok, lp) in enumerate(zip(rows, chosen.tolist(), logp.tolist(), strict=True)):
            r.toks.append(tok)
            r.lps.append(lp)
            if tok not in r.stops and len(r.toks) < r.max_new and not r.finish_forced():
                keep.append(j)
        self.e.stats["tokens"] += len(rows)
        return keep, chosen
