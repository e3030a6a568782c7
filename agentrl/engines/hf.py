"""The transformers engine: continuous batching with a slot KV buffer and prefix reuse, on CPU or CUDA.

Concurrent :meth:`HFEngine.generate` calls put requests on a queue. A background thread collects
the waiting requests (up to ``max_batch_size``, after a short ``batch_wait_s`` window when idle)
and decodes them together, one batched forward per step; requests arriving meanwhile join the
running batch at the next step, and a request leaves it at a stop token or its
``max_new_tokens``, its result going back to its awaiting future at once.

How a request is computed (models whose layers all keep a plain ``DynamicCache`` and attend
with ``sdpa`` or ``eager``, e.g. Qwen2/Llama-style models; see :mod:`rockroll.agentrl.engines.kv`):

* **Slots.** The running requests' KV live in one preallocated buffer, one slot (row) per request;
  a decoding step writes one column in place. Nothing is concatenated, re-selected or merged per
  step, so a step costs the same whatever the context length, up to attention itself.
* **Prefix reuse.** Finished requests leave their tokens' KV (prompt and response) in a radix
  tree (``prefix_cache_mb``). A new prompt that extends a cached sequence (the next turn of a
  full-history conversation) or shares a leading part with one (a system prompt, the same
  observation again) takes that KV and only its remaining tokens are computed. A prompt missing
  only its last token joins the next decoding step directly, with no forward of its own; the
  others are prefilled together (grouped by how many tokens they need).
* **Duplicates.** Identical prompts arriving together are prefilled once and sampled
  independently.
* **Forward.** Qwen2/Llama models run through a TorchScript forward
  (:mod:`rockroll.agentrl.engines.fast_decoder`) that takes the GIL once per step instead of at each
  of ~100 operations, so the model computes while the rollout's event loop runs Python; other
  models through transformers, with a ``Cache`` over the slot buffer.

Other models fall back to static waves: each wave is left-padded, prefilled and decoded to the end
with a ``DynamicCache``, without prefix reuse (:attr:`HFEngine.mode` says which path runs).

What a result holds (the same on both paths):

* ``token_ids``: sampled tokens; the stop token that ended the response is included.
* ``logprobs[i]``: ``log_softmax(logits)[token_ids[i]]`` of the model's raw float32 logits at
  that step, i.e. under temperature 1 without top-k/top-p, whatever the sampling settings were.
  This is what a trainer's forward pass over ``prompt + response`` computes (within float
  tolerance: a reused prefix was computed by other kernels), so it serves as PPO's old logprobs.
* ``weight_version``: the version loaded while the request ran; no response mixes weights.

Sampling is seedable per request (``SamplingParams.seed``: a private ``torch.Generator`` draws one
uniform per token, so a seeded request samples the same tokens whatever else is in the batch, up
to float noise of the batched forward). Requests without a seed get one from the engine's own
seeded RNG. ``temperature=0`` is greedy (argmax).

:meth:`HFEngine.update_weights` pauses admission, lets the running batch drain, loads, drops the
prefix cache (its KV belongs to the old weights), resumes. The batching thread runs under
``torch.inference_mode``.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rockroll.agentrl.engines.base import EngineError, GenerationRequest, GenerationResult, LLMEngine
from rockroll.agentrl.engines.fast_decoder import FastDecoder
from rockroll.agentrl.engines.fast_decoder import plan as plan_fast_decoder
from rockroll.agentrl.engines.hf_batch import decode_batch
from rockroll.agentrl.engines.hf_rows import Pending, Row, deliver_error, deliver_many, post
from rockroll.agentrl.engines.hf_sampling import TokenSampling
from rockroll.agentrl.engines.hf_slots import SlotDecoding
from rockroll.agentrl.engines.hf_waves import WaveDecoding
from rockroll.agentrl.engines.kv import PrefixCache, SlotBatch

__all__ = ["HFEngine"]

#: :attr:`HFEngine.stats` keys: forward passes, waves, requests, generated tokens; prompt tokens asked for,
#: prompt tokens computed (the rest came from the prefix cache or a duplicate in the same admission);
#: prefix-cache drops; decoding steps (slots path) and the rows they computed; requests dropped because
#: their caller stopped waiting (cancelled); rows decoding after the last step
_STATS = (
    "forward_calls",
    "waves",
    "requests",
    "tokens",
    "prompt_tokens",
    "prefill_tokens",
    "cache_drops",
    "steps",
    "step_rows",
    "cancelled",
    "running",
)


def _check_options(max_batch_size: int, batch_wait_s: float, prefix_cache_mb: float) -> None:
    """Reject :class:`HFEngine` batching options out of range."""
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
    if batch_wait_s < 0:
        raise ValueError(f"batch_wait_s must be >= 0, got {batch_wait_s}")
    if prefix_cache_mb < 0:
        raise ValueError(f"prefix_cache_mb must be >= 0 (0: off), got {prefix_cache_mb}")


def _load(model_path: str | Path | None, model: Any, tokenizer: Any, device: str, dtype: str | None) -> tuple[Any, Any]:
    """The engine's model and tokenizer: those given, or loaded from ``model_path``."""
    if model is None:
        if model_path is None:
            raise ValueError("HFEngine needs model_path, or model and tokenizer")
        from rockroll.agentrl.models.tiny import load_model_and_tokenizer

        return load_model_and_tokenizer(model_path, device=device, dtype=dtype)
    if tokenizer is None:
        raise ValueError("HFEngine(model=...) also needs tokenizer=...")
    return model, tokenizer


class HFEngine(SlotDecoding, WaveDecoding, TokenSampling, LLMEngine):
    """Batched transformers engine (see the module docstring).

    Give either ``model_path`` (loaded with :func:`rockroll.agentrl.models.tiny.load_model_and_tokenizer`) or a
    loaded ``model`` and ``tokenizer``. ``prefix_cache_mb`` is the KV budget of the prefix cache
    (0: no prefix reuse). ``fast_decoder``: run supported models (Qwen2, Llama) through the
    TorchScript forward of :mod:`rockroll.agentrl.engines.fast_decoder` (False: always transformers).
    ``batch_path``: :meth:`generate_batch` decodes a whole batch as one round
    (:mod:`rockroll.agentrl.engines.hf_batch`) where the model allows (False: it queues the requests).
    """

    name = "hf"
    supports_allowed = True

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
        prefix_cache_mb: float = 256.0,
        fast_decoder: bool = True,
        batch_path: bool = True,
    ) -> None:
        import torch

        _check_options(max_batch_size, batch_wait_s, prefix_cache_mb)
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        model, tokenizer = _load(model_path, model, tokenizer, device, dtype)
        self._torch = torch
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device) if model_path is not None else next(model.parameters()).device
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.prefix_cache_mb = prefix_cache_mb
        self.weight_version = 0
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_token_id = int(pad if pad is not None else 0)
        self.eos_token_ids = self._eos_ids()
        self.vocab_size = int(model.get_input_embeddings().num_embeddings)
        #: counters (see ``_STATS``)
        self.stats: dict[str, int] = dict.fromkeys(_STATS, 0)
        self.prefix_cache: PrefixCache | None = None
        self.fast_decoder = fast_decoder
        self.batch_path = batch_path
        #: the batch path's prompts kept between rounds: prompt ids -> (KV, next-token logits)
        self.batch_memo: dict[tuple[int, ...], tuple[Any, Any]] = {}
        self._fast: FastDecoder | None = None
        self._slots: SlotBatch | None = None
        self._mode: str | None = None  # "slots" or "waves": known at the first request
        self._can_join: bool | None = None  # fallback path: whether waves may merge
        self._outbox: list[tuple[asyncio.AbstractEventLoop, asyncio.Future, GenerationResult]] = []
        self._rng = np.random.default_rng(seed)
        self._queue: queue.Queue[Pending | None] = queue.Queue()
        self._weights_lock = threading.Lock()
        self._update_waiting = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    # ------------------------------------------------------------------ API
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Queue ``request`` and wait for its result (batched with other waiting requests)."""
        if self._closed:
            raise EngineError("the hf engine is closed")
        self._check_prompt(request.prompt_ids)
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        seed = request.params.seed
        if seed is None:
            seed = int(self._rng.integers(2**62))
        pending = Pending(request, loop.create_future(), loop, int(seed))
        self._queue.put(pending)
        return await pending.future

    async def generate_batch(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Results of ``requests``, in order. With ``batch_path`` (the default) a model with a
        TorchScript forward decodes them as one round in a worker thread
        (:mod:`rockroll.agentrl.engines.hf_batch`: no per-request scheduling, no prefix cache);
        otherwise they are queued like concurrent :meth:`generate` calls. Same seeds, same tokens."""
        if self._closed:
            raise EngineError("the hf engine is closed")
        for r in requests:
            self._check_prompt(r.prompt_ids)
        seeded = [
            r
            if r.params.seed is not None
            else replace(r, params=replace(r.params, seed=int(self._rng.integers(2**62))))
            for r in requests
        ]
        if not seeded:
            return []
        if self.batch_path:
            try:
                rows = [self._new_row(Pending(r, None, None, int(r.params.seed))) for r in seeded]  # type: ignore[arg-type]
                out = await asyncio.to_thread(decode_batch, self, rows)
            except Exception as e:  # noqa: BLE001 - the caller hears an engine error, as from the queue
                raise EngineError(f"hf generation failed: {type(e).__name__}: {e}") from e
            if out is not None:
                return out
        return await super().generate_batch(seeded)

    def _check_prompt(self, ids: list[int]) -> None:
        if not ids or min(ids) < 0 or max(ids) >= self.vocab_size:
            raise ValueError(f"prompt_ids must be a non-empty list of ids in [0, {self.vocab_size})")

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Load ``state_dict`` once the running batch drains; tag later results with ``version``.

        Blocks meanwhile. Keys must be parameter/buffer names of the model; a partial state dict
        updates only those tensors. The prefix cache and the batch path's prompt memo are dropped
        (their KV came from the old weights), also when ``version`` is the one already loaded.
        """
        self._update_waiting.set()
        try:
            with self._weights_lock:  # the batching thread is idle: its prefix cache can go
                if self.prefix_cache is not None:
                    self.stats["cache_drops"] += self.prefix_cache.tokens > 0
                    self.prefix_cache.clear()
                self.batch_memo.clear()  # the batch path's prompts too, whatever the new version number
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

    @property
    def mode(self) -> str | None:
        """``slots`` or ``waves`` (see the module docstring); None until the first request."""
        return self._mode

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

    def _collect(self, first: Pending) -> list[Pending]:
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
            if not self._abandoned(item):
                batch.append(item)
        return batch

    def _take_new(self, capacity: int) -> list[Pending]:
        """Requests already waiting (no waiting window), up to ``capacity``."""
        items: list[Pending] = []
        while len(items) < capacity:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # keep the shutdown signal for the loop
                break
            if not self._abandoned(item):
                items.append(item)
        return items

    def _abandoned(self, p: Pending) -> bool:
        """Whether nobody waits for ``p`` any more (its caller was cancelled: a client that left)."""
        if p.future is not None and p.future.cancelled():
            self.stats["cancelled"] += 1
            return True
        return False

    def _loop(self) -> None:
        with self._torch.inference_mode():
            self._run()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                break
            if self._abandoned(first):
                continue
            batch = self._collect(first)
            while self._update_waiting.is_set():
                time.sleep(0.001)
            inflight: list[Pending] = []
            with self._weights_lock:
                try:
                    if self._mode is None:
                        self._setup()
                    if self._mode == "slots":
                        self._serve_slots(batch, self.weight_version, inflight)
                    else:
                        self._serve_waves(batch, self.weight_version, inflight)
                except Exception as e:  # noqa: BLE001 - every waiter must hear about it
                    self._flush_outbox()  # results already made go first
                    err = EngineError(f"hf generation failed: {type(e).__name__}: {e}")
                    err.__cause__ = e
                    for p in inflight:  # delivered ones are done already: no-op for them
                        post(p.loop, deliver_error, p.future, err)
                    self._slots = None  # rebuilt clean by the next wave
        # fail whatever is still queued
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                post(item.loop, deliver_error, item.future, EngineError("the hf engine is closed"))

    def _setup(self) -> None:
        """Pick the path from the model's cache layers and attention (one forward of one token)."""
        torch = self._torch
        out = self.model(input_ids=torch.tensor([[self.pad_token_id]], device=self.device), use_cache=True)
        layers = getattr(out.past_key_values, "layers", None) or []
        plain = bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)
        shapes = (
            {(tuple(layer.keys.shape[1::2]), tuple(layer.values.shape[1::2])) for layer in layers} if plain else set()
        )
        attention = getattr(self.model.config, "_attn_implementation", None)
        self._can_join = plain
        if plain and len(shapes) == 1 and attention in ("sdpa", "eager"):
            (heads, dim), _ = shapes.pop()
            self._slots_shape = (len(layers), int(heads), int(dim), layers[0].keys.dtype)
            self._attention = attention
            self._mode = "slots"
            self._fast = plan_fast_decoder(self.model) if self.fast_decoder else None
            if self.prefix_cache_mb > 0:
                self.prefix_cache = PrefixCache(torch, int(self.prefix_cache_mb * 2**20))
        else:
            self._mode = "waves"

    def _forward(self, **kwargs: Any) -> Any:
        self.stats["forward_calls"] += 1
        return self.model(**kwargs, use_cache=True, logits_to_keep=1)

    def _new_row(self, p: Pending) -> Row:
        params = p.request.params
        stops = self.eos_token_ids | set(params.stop_token_ids)
        return Row(p, self._torch.Generator().manual_seed(p.seed), stops, params.max_new_tokens)

    def _flush_outbox(self) -> None:
        """Hand the queued results to their event loops: one wake-up per loop, not per result."""
        if not self._outbox:
            return
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, GenerationResult]]] = {}
        for loop, fut, res in self._outbox:
            by_loop.setdefault(loop, []).append((fut, res))
        self._outbox = []
        for loop, items in by_loop.items():
            post(loop, deliver_many, items)
