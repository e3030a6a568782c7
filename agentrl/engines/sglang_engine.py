"""In-process SGLang engine (``sglang.Engine``), imported lazily; needs a CUDA machine.

SGLang batches concurrent ``async_generate`` calls itself. Prompts go in as ``input_ids``; with
``return_logprob=True`` the result's ``meta_info["output_token_logprobs"]`` holds
``(logprob, token_id, text)`` per generated token. SGLang returns logprobs *after* temperature
scaling unless ``SGLANG_RETURN_ORIGINAL_LOGPROB=1``; this module sets that variable (if unset)
before the engine starts, so logprobs are the model's raw distribution, as the contract says.

Weight updates use ``Engine.update_weights_from_tensor``. Not exercised in this repository's CI
(SGLang is not installed there); written against SGLang's public ``sglang.Engine`` API.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from rockroll.agentrl.engines.base import EngineError, GenerationRequest, GenerationResult, LLMEngine

__all__ = ["SGLangEngine"]

_FINISH = {"stop": "stop", "length": "length", "abort": "aborted"}


class SGLangEngine(LLMEngine):
    """SGLang's offline engine behind the rockroll engine interface.

    Args:
        model_path: a Hugging Face model id or local directory.
        tokenizer: a tokenizer object; None: loaded from ``model_path``.
        seed: ``random_seed`` of the engine.
        engine_kwargs: any other ``sglang.Engine`` server argument (``mem_fraction_static``, ``tp_size``...).
    """

    name = "sglang"

    def __init__(self, model_path: str | Path, *, tokenizer: Any = None, seed: int = 0, **engine_kwargs: Any) -> None:
        os.environ.setdefault("SGLANG_RETURN_ORIGINAL_LOGPROB", "1")
        try:
            import sglang
        except ImportError as e:
            raise EngineError("the sglang engine needs SGLang: pip install sglang (on a CUDA machine)") from e
        if tokenizer is None:
            from rockroll.agentrl.tiny import load_tokenizer

            tokenizer = load_tokenizer(model_path)
        self._engine = sglang.Engine(model_path=str(model_path), random_seed=seed, **engine_kwargs)
        self.tokenizer = tokenizer
        self.weight_version = 0
        eos = getattr(tokenizer, "eos_token_id", None)
        self.eos_token_id: int | None = int(eos) if eos is not None else None

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate one response; SGLang batches concurrent calls."""
        sp = request.params
        sampling: dict[str, Any] = {
            "max_new_tokens": sp.max_new_tokens,
            "temperature": sp.temperature,
            "top_p": sp.top_p,
            "top_k": sp.top_k if sp.top_k > 0 else -1,
            "stop_token_ids": list(sp.stop_token_ids),
            "skip_special_tokens": False,
        }
        if sp.seed is not None:
            sampling["sampling_seed"] = sp.seed  # SGLang >= 0.5
        version = self.weight_version
        try:
            out = await self._engine.async_generate(
                input_ids=list(request.prompt_ids), sampling_params=sampling, return_logprob=True
            )
        except Exception as e:  # noqa: BLE001 - engine failures are infra failures
            raise EngineError(f"sglang generation failed: {type(e).__name__}: {e}") from e
        meta = out.get("meta_info", {})
        triples = meta.get("output_token_logprobs") or []
        ids = [int(t[1]) for t in triples]
        logprobs = [float("nan") if t[0] is None else float(t[0]) for t in triples]
        if not ids and out.get("output_ids"):
            ids = [int(t) for t in out["output_ids"]]
            logprobs = [float("nan")] * len(ids)
        reason = meta.get("finish_reason") or {}
        finish = _FINISH.get(str(reason.get("type") if isinstance(reason, dict) else reason), "stop")
        stops = set(sp.stop_token_ids) | ({self.eos_token_id} if self.eos_token_id is not None else set())
        matched = reason.get("matched") if isinstance(reason, dict) else None
        if finish == "stop" and stops and (not ids or ids[-1] not in stops) and not isinstance(matched, str):
            ids.append(int(matched) if isinstance(matched, int) else int(self.eos_token_id or next(iter(stops))))
            logprobs.append(float("nan"))
        return GenerationResult(
            token_ids=ids,
            logprobs=logprobs,
            finish_reason=finish,  # type: ignore[arg-type]
            weight_version=version,
            logprobs_exact=not any(math.isnan(x) for x in logprobs),
        )

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Load ``state_dict`` into the SGLang workers and tag later results with ``version``."""
        self._engine.update_weights_from_tensor(named_tensors=list(state_dict.items()))
        self.weight_version = int(version)

    async def close(self) -> None:
        """Shut the SGLang engine down."""
        self._engine.shutdown()
