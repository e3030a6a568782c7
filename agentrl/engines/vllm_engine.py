"""In-process vLLM engine (``vllm.AsyncLLMEngine``), imported lazily; needs a CUDA machine.

vLLM batches concurrent requests itself (continuous batching). Each :meth:`VLLMEngine.generate`
submits the prompt as token ids (``{"prompt_token_ids": ...}``) with
``SamplingParams(logprobs=0)``, which returns the logprob of each sampled token. vLLM V1 returns
*raw* logprobs by default (``logprobs_mode="raw_logprobs"``: the model's distribution before
temperature/top-k/top-p), which is this package's contract; vLLM V0 returned processed ones.
vLLM includes the EOS that stopped a response in ``token_ids``.

Weight updates go through ``collective_rpc`` to every worker (``model.load_weights``); that call is
asynchronous in vLLM V1, so use ``await engine.update_weights_async(...)`` from async code.

Not exercised in this repository's CI (vLLM is not installed there); written against vLLM's
public API (``vllm.AsyncEngineArgs``, ``vllm.AsyncLLMEngine``, ``vllm.SamplingParams``).
"""

from __future__ import annotations

import asyncio
import inspect
import math
import uuid
from pathlib import Path
from typing import Any

from rockroll.agentrl.engines.base import EngineError, GenerationRequest, GenerationResult, LLMEngine

__all__ = ["VLLMEngine"]

_FINISH = {"stop": "stop", "length": "length", "abort": "aborted"}


def _load_weights_on_worker(worker: Any, weights: list[tuple[str, Any]]) -> bool:
    """Runs inside each vLLM worker: load ``weights`` into its model."""
    worker.model_runner.model.load_weights(weights=weights)
    return True


class VLLMEngine(LLMEngine):
    """vLLM's async engine behind the rockroll engine interface.

    Args:
        model_path: a Hugging Face model id or local directory.
        tokenizer: a tokenizer object; None: loaded from ``model_path`` (see
            :func:`rockroll.agentrl.tiny.load_tokenizer`).
        seed, dtype, gpu_memory_utilization, max_model_len, enforce_eager: passed to
            ``vllm.AsyncEngineArgs``; ``engine_kwargs``: any other ``AsyncEngineArgs`` field.
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str | Path,
        *,
        tokenizer: Any = None,
        seed: int = 0,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        enforce_eager: bool = False,
        **engine_kwargs: Any,
    ) -> None:
        try:
            import vllm
        except ImportError as e:
            raise EngineError("the vllm engine needs vLLM: pip install vllm (on a CUDA machine)") from e
        if tokenizer is None:
            from rockroll.agentrl.tiny import load_tokenizer

            tokenizer = load_tokenizer(model_path)
        args = vllm.AsyncEngineArgs(
            model=str(model_path),
            seed=seed,
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enforce_eager=enforce_eager,
            **engine_kwargs,
        )
        self._vllm = vllm
        self._engine = vllm.AsyncLLMEngine.from_engine_args(args)
        self.tokenizer = tokenizer
        self.weight_version = 0
        eos = getattr(tokenizer, "eos_token_id", None)
        self.eos_token_id: int | None = int(eos) if eos is not None else None

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate one response; vLLM batches concurrent calls."""
        sp = request.params
        params = self._vllm.SamplingParams(
            n=1,
            max_tokens=sp.max_new_tokens,
            temperature=sp.temperature,
            top_p=sp.top_p,
            top_k=sp.top_k if sp.top_k > 0 else -1,
            seed=sp.seed,
            stop_token_ids=list(sp.stop_token_ids),
            logprobs=0,
            skip_special_tokens=False,
        )
        version = self.weight_version
        final = None
        try:
            async for out in self._engine.generate(
                {"prompt_token_ids": list(request.prompt_ids)}, params, request.request_id or uuid.uuid4().hex
            ):
                final = out
        except Exception as e:  # noqa: BLE001 - engine failures are infra failures
            raise EngineError(f"vllm generation failed: {type(e).__name__}: {e}") from e
        if final is None or not final.outputs:
            raise EngineError("vllm returned no output")
        comp = final.outputs[0]
        ids = [int(t) for t in comp.token_ids]
        logprobs: list[float] = []
        for pos, tok in enumerate(ids):
            entry = comp.logprobs[pos] if comp.logprobs and pos < len(comp.logprobs) else None
            logprobs.append(float(entry[tok].logprob) if entry and tok in entry else float("nan"))
        finish = _FINISH.get(str(comp.finish_reason), "stop")
        stops = set(sp.stop_token_ids) | ({self.eos_token_id} if self.eos_token_id is not None else set())
        if finish == "stop" and stops and (not ids or ids[-1] not in stops) and comp.stop_reason is None:
            ids.append(int(self.eos_token_id if self.eos_token_id is not None else next(iter(stops))))
            logprobs.append(float("nan"))
        return GenerationResult(
            token_ids=ids,
            logprobs=logprobs,
            finish_reason=finish,  # type: ignore[arg-type]
            weight_version=version,
            logprobs_exact=not any(math.isnan(x) for x in logprobs),
        )

    async def update_weights_async(self, state_dict: dict[str, Any], version: int) -> None:
        """Push ``state_dict`` to every vLLM worker and tag later results with ``version``."""
        weights = [(k, v.detach().cpu()) for k, v in state_dict.items()]
        result = self._engine.collective_rpc(_load_weights_on_worker, args=(weights,))
        if inspect.isawaitable(result):
            await result
        self.weight_version = int(version)

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Synchronous variant for code outside an event loop (async code: ``update_weights_async``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.update_weights_async(state_dict, version))
            return
        raise EngineError("VLLMEngine.update_weights was called inside an event loop: await update_weights_async()")

    async def close(self) -> None:
        """Shut the vLLM engine down."""
        shutdown = getattr(self._engine, "shutdown", None)
        if shutdown is not None:
            result = shutdown()
            if inspect.isawaitable(result):
                await result
