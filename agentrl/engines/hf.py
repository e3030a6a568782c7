"""The transformers engine: continuous batching with a KV cache on CPU or CUDA.

Concurrent :meth:`HFEngine.generate` calls put requests on a queue. A background thread collects
the waiting requests (up to ``max_batch_size``, after a short ``batch_wait_s`` window), left-pads
and prefills them, then decodes the batch one batched forward per step with a KV cache. A request
leaves the batch at a stop token or its ``max_new_tokens`` (its cache rows are dropped) and its
result goes back to its awaiting future at once. Requests arriving meanwhile are prefilled
together and merged into the running batch at the next step (the shorter cache is left-padded
with masked zeros; all-padding columns are trimmed), so nobody waits for the longest response.
Models whose cache is not a plain ``DynamicCache`` fall back to static waves.

What a result holds:

* ``token_ids``: sampled tokens; the stop token that ended the response is included.
* ``logprobs[i]``: ``log_softmax(logits)[token_ids[i]]`` of the model's raw float32 logits at
  that step, i.e. under temperature 1 without top-k/top-p, whatever the sampling settings were.
  This is what a trainer's forward pass over ``prompt + response`` computes (within float
  tolerance), so it serves as PPO's old logprobs.
* ``weight_version``: the version loaded while the request ran; no response mixes weights.

Sampling is seedable per request (``SamplingParams.seed``: a private ``torch.Generator`` draws one
uniform per token, so a seeded request samples the same tokens whatever else is in the batch, up
to float noise of the batched forward). Requests without a seed get one from the engine's own
seeded RNG. ``temperature=0`` is greedy (argmax).

:meth:`HFEngine.update_weights` pauses admission, lets the running batch drain, loads, resumes.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rockroll.agentrl.engines.base import EngineError, GenerationRequest, GenerationResult, LLMEngine, SamplingParams

__all__ = ["HFEngine"]


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    seed: int


@dataclass
class _Row:
    """One running request: its sampler and what it generated so far."""

    pending: _Pending
    gen: Any  # torch.Generator
    stops: set[int]
    toks: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)

    @property
    def params(self) -> SamplingParams:
        return self.pending.request.params


@dataclass
class _State:
    """The running batch: rows, their KV cache, attention mask [B, S], last positions [B, 1]."""

    rows: list[_Row]
    cache: Any
    mask: Any
    pos: Any


class HFEngine(LLMEngine):
    """Batched transformers engine (see the module docstring).

    Give either ``model_path`` (loaded with :func:`rockroll.agentrl.tiny.load_model_and_tokenizer`) or a
    loaded ``model`` and ``tokenizer``.
    """

    name = "hf"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: Any = None,
        tokenizer: Any = None,
        device: str = "cpu",
        dtype: str | None = None,
        max_batch_size: int = 64,
        batch_wait_s: float = 0.003,
        seed: int = 0,
        num_threads: int | None = None,
    ) -> None:
        import torch

        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if batch_wait_s < 0:
            raise ValueError(f"batch_wait_s must be >= 0, got {batch_wait_s}")
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        if model is None:
            if model_path is None:
                raise ValueError("HFEngine needs model_path, or model and tokenizer")
            from rockroll.agentrl.tiny import load_model_and_tokenizer

            model, tokenizer = load_model_and_tokenizer(model_path, device=device, dtype=dtype)
        elif tokenizer is None:
            raise ValueError("HFEngine(model=...) also needs tokenizer=...")
        self._torch = torch
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device) if model_path is not None else next(model.parameters()).device
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.weight_version = 0
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_token_id = int(pad if pad is not None else 0)
        self.eos_token_ids = self._eos_ids()
        self.vocab_size = int(model.get_input_embeddings().num_embeddings)
        self.stats: dict[str, int] = {"forward_calls": 0, "waves": 0, "requests": 0, "tokens": 0}
        self._rng = np.random.default_rng(seed)
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._weights_lock = threading.Lock()
        self._update_waiting = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._can_join: bool | None = None  # known after the first prefill

    # ------------------------------------------------------------------ API
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Queue ``request`` and wait for its result (batched with other waiting requests)."""
        if self._closed:
            raise EngineError("the hf engine is closed")
        if not request.prompt_ids or min(request.prompt_ids) < 0 or max(request.prompt_ids) >= self.vocab_size:
            raise ValueError(f"prompt_ids must be a non-empty list of ids in [0, {self.vocab_size})")
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        seed = request.params.seed
        if seed is None:
            seed = int(self._rng.integers(2**62))
        pending = _Pending(request, loop.create_future(), loop, int(seed))
        self._queue.put(pending)
        return await pending.future

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Load ``state_dict`` once the running batch drains; tag later results with ``version``.

        Blocks meanwhile. Keys must be parameter/buffer names of the model; a partial state dict
        updates only those tensors.
        """
        self._update_waiting.set()
        try:
            with self._weights_lock:
                result = self.model.load_state_dict(state_dict, strict=False)
                if result.unexpected_keys:
                    raise KeyError(f"state_dict has keys the model lacks: {result.unexpected_keys[:5]}")
                self.weight_version = int(version)
        finally:
            self._update_waiting.clear()

    async def close(self) -> None:
        """Stop the batching thread (waiting requests fail with :class:`EngineError`)."""
        self._closed = True
        self._queue.put(None)
        thread = self._thread
        if thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 30.0)

    # ------------------------------------------------------------- internals
    def _eos_ids(self) -> set[int]:
        """The tokenizer's EOS and the generation config's EOS ids (Qwen chat models have two)."""
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        ids = {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos]) if e is not None}
        return ids | ({int(self.tokenizer.eos_token_id)} if self.tokenizer.eos_token_id is not None else set())

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="hf-engine-batcher", daemon=True)
                self._thread.start()

    def _collect(self, first: _Pending) -> list[_Pending]:
        batch = [first]
        deadline = time.monotonic() + self.batch_wait_s
        while len(batch) < self.max_batch_size:
            timeout = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # keep the shutdown signal for the loop
                break
            batch.append(item)
        return batch

    def _take_new(self, capacity: int) -> list[_Pending]:
        """Requests already waiting (no waiting window), up to ``capacity``."""
        items: list[_Pending] = []
        while len(items) < capacity:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # keep the shutdown signal for the loop
                break
            items.append(item)
        return items

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch = self._collect(first)
            while self._update_waiting.is_set():
                time.sleep(0.001)
            inflight: list[_Pending] = []
            with self._weights_lock:
                try:
                    self._serve(batch, self.weight_version, inflight)
                except Exception as e:  # noqa: BLE001 - every waiter must hear about it
                    err = EngineError(f"hf generation failed: {type(e).__name__}: {e}")
                    err.__cause__ = e
                    for p in inflight:  # delivered ones are done already: no-op for them
                        _post(p.loop, _deliver_error, p.future, err)
        # fail whatever is still queued
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                _post(item.loop, _deliver_error, item.future, EngineError("the hf engine is closed"))

    def _serve(self, batch: list[_Pending], version: int, inflight: list[_Pending]) -> None:
        """Decode ``batch`` to the end, one batched forward per step. New requests join the running
        batch at step boundaries (continuous batching) unless a weight update is waiting or the
        model's cache cannot be merged; then they wait for the batch to drain."""
        state: _State | None = None
        waiting = batch
        self.stats["waves"] += 1
        while True:
            if waiting:
                inflight.extend(waiting)
                self.stats["requests"] += len(waiting)
                state = self._admit(state, waiting, version)
            if state is None:
                break
            state = self._step(state, version)
            room = self.max_batch_size - (len(state.rows) if state else 0)
            joinable = state is None or self._can_join
            waiting = self._take_new(room) if joinable and room > 0 and not self._update_waiting.is_set() else []

    def _forward(self, **kwargs: Any) -> Any:
        self.stats["forward_calls"] += 1
        return self.model(**kwargs, use_cache=True, logits_to_keep=1)

    def _admit(self, state: _State | None, items: list[_Pending], version: int) -> _State | None:
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
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        rows = [
            _Row(p, torch.Generator().manual_seed(p.seed), self.eos_token_ids | set(p.request.params.stop_token_ids))
            for p in items
        ]
        out = self._forward(input_ids=ids, attention_mask=mask, position_ids=pos)
        if self._can_join is None:
            layers = getattr(out.past_key_values, "layers", None)
            self._can_join = bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)
        new = _State(rows, out.past_key_values, mask, pos[:, -1:])
        new = self._keep(new, self._advance(rows, out.logits[:, -1, :].float(), version))
        if new is None or state is None:
            return new if new is not None else state
        return self._merge(state, new)

    def _step(self, state: _State, version: int) -> _State | None:
        """One decoding step of every running row."""
        torch = self._torch
        dev = self.device
        next_ids = torch.tensor([[r.toks[-1]] for r in state.rows], device=dev)
        mask = torch.cat([state.mask, torch.ones((len(state.rows), 1), dtype=state.mask.dtype, device=dev)], dim=1)
        pos = state.pos + 1
        out = self._forward(input_ids=next_ids, attention_mask=mask, position_ids=pos, past_key_values=state.cache)
        keep = self._advance(state.rows, out.logits[:, -1, :].float(), version)
        return self._keep(_State(state.rows, out.past_key_values, mask, pos), keep)

    def _advance(self, rows: list[_Row], logits: Any, version: int) -> list[int]:
        """Sample one token per row, deliver finished requests; return the rows that go on."""
        torch = self._torch
        chosen = self._sample(logits, [r.params for r in rows], [r.gen for r in rows])
        logp = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None])[:, 0]
        keep: list[int] = []
        for j, (r, tok, lp) in enumerate(zip(rows, chosen.tolist(), logp.tolist(), strict=True)):
            r.toks.append(tok)
            r.lps.append(lp)
            if tok in r.stops or len(r.toks) >= r.params.max_new_tokens:
                reason = "stop" if tok in r.stops else "length"
                res = GenerationResult(token_ids=r.toks, logprobs=r.lps, finish_reason=reason, weight_version=version)
                _post(r.pending.loop, _deliver, r.pending.future, res)
            else:
                keep.append(j)
        self.stats["tokens"] += len(rows)
        return keep

    def _keep(self, state: _State, keep: list[int]) -> _State | None:
        """Drop finished rows from the batch and the KV cache; trim all-padding columns."""
        if not keep:
            return None
        if len(keep) < len(state.rows):
            idx = self._torch.tensor(keep, device=self.device)
            state.cache.batch_select_indices(idx)
            state = _State([state.rows[j] for j in keep], state.cache, state.mask[idx], state.pos[idx])
        if self._can_join:
            first = int(state.mask.any(0).to(self._torch.int8).argmax())
            if first > 0:
                for layer in state.cache.layers:
                    layer.keys, layer.values = layer.keys[:, :, first:], layer.values[:, :, first:]
                state.mask = state.mask[:, first:]
        return state

    def _merge(self, a: _State, b: _State) -> _State:
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
        return _State(a.rows + b.rows, a.cache, mask, torch.cat([a.pos, b.pos], dim=0))

    def _sample(self, logits: Any, params: list[SamplingParams], gens: list[Any]) -> Any:
        """One token per row: argmax where temperature is 0, else inverse-CDF sampling from the
        temperature/top-k/top-p distribution with one uniform drawn from the row's generator."""
        torch = self._torch
        dev = logits.device
        greedy_tok = logits.argmax(dim=-1)
        temps = torch.tensor([sp.temperature for sp in params], device=dev, dtype=logits.dtype)
        if bool((temps == 0).all()):
            return greedy_tok
        scaled = logits / temps.clamp(min=1e-6)[:, None]
        top_k = [sp.top_k for sp in params]
        if any(k > 0 for k in top_k):
            vocab = scaled.shape[-1]
            ks = torch.tensor([min(k, vocab) if k > 0 else vocab for k in top_k], device=dev)
            kth = scaled.sort(dim=-1, descending=True).values.gather(1, (ks - 1)[:, None])
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        probs = torch.softmax(scaled, dim=-1)
        top_p = [sp.top_p for sp in params]
        if any(p < 1 for p in top_p):
            sp_, order = probs.sort(dim=-1, descending=True)
            cum = sp_.cumsum(-1)
            tp = torch.tensor(top_p, device=dev, dtype=probs.dtype)[:, None]
            sp_ = sp_.masked_fill(cum - sp_ >= tp, 0.0)  # keep the smallest prefix with mass >= top_p
            probs = torch.zeros_like(probs).scatter(1, order, sp_)
        cdf = probs.cumsum(-1)
        u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in gens]).to(dev, cdf.dtype)
        sampled = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0]
        sampled = sampled.clamp(max=logits.shape[-1] - 1)
        return torch.where(temps == 0, greedy_tok, sampled)


def _deliver(fut: asyncio.Future, result: GenerationResult) -> None:
    if not fut.done():
        fut.set_result(result)


def _deliver_error(fut: asyncio.Future, err: BaseException) -> None:
    if not fut.done():
        fut.set_exception(err)


def _post(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> None:
    """Hand a result to the requester's event loop; a loop that has closed meanwhile (its
    request was cancelled and its ``asyncio.run`` ended) has nobody left to tell."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass
