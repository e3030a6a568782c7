"""The LLM engine interface: batched, async, token-in/token-out, with logprobs.

Engines: ``hf`` (transformers, CPU/CUDA), ``openai`` (any OpenAI-compatible server), ``vllm``
(a host process in vLLM's own venv), ``sglang`` (an SGLang server over HTTP), ``random`` (for env
testing). Env managers call :meth:`LLMEngine.generate` concurrently, one request per waiting
episode; an engine batches waiting requests itself, so 64 waiting env managers do not mean 64
separate forward passes.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Literal

from rockroll.envs.errors import RockrollError

__all__ = ["SamplingParams", "GenerationRequest", "GenerationResult", "LLMEngine", "EngineError", "EngineDeadError"]


class EngineError(RockrollError, RuntimeError):
    """Generation failed for a reason outside the request (server down, OOM, ...)."""


class EngineDeadError(EngineError):
    """The engine's process or server died (an infra failure); ``restart()`` brings it back."""


@dataclass
class SamplingParams:
    """How to sample one response."""

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    stop_token_ids: list[int] = field(default_factory=list)  # the tokenizer's EOS is always a stop
    seed: int | None = None
    #: the responses allowed (an :class:`~rockroll.agentrl.engines.choices.AnswerTrie`), None: any; only an
    #: engine whose ``supports_allowed`` is True honours it
    allowed: Any = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    params: SamplingParams = field(default_factory=SamplingParams)
    request_id: str = ""


@dataclass
class GenerationResult:
    """Generated tokens (stop token included when one ended the response) and their logprobs
    under the sampling distribution's underlying model (temperature 1, no top-p/top-k).

    ``tokens_exact`` is False when the engine could not get the sampled token ids and
    re-tokenised the text instead (the ids may differ from what the model sampled);
    ``logprobs_exact`` is False when some logprobs were not returned: those entries are NaN
    (never a made-up number), so a trainer must recompute them.
    """

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length", "aborted"]
    weight_version: int
    tokens_exact: bool = True
    logprobs_exact: bool = True


class LLMEngine(abc.ABC):
    """Base class of engines. ``tokenizer`` is a Hugging Face tokenizer with a chat template."""

    name: str = "base"
    tokenizer: Any
    #: whether generate() restricts responses to ``SamplingParams.allowed`` (rockroll.agentrl.engines.choices)
    supports_allowed: bool = False
    weight_version: int = 0

    @abc.abstractmethod
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate one response; concurrent calls are batched by the engine."""

    async def generate_batch(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        import asyncio

        return list(await asyncio.gather(*(self.generate(r) for r in requests)))

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Load new policy weights in place and tag later generations with ``version``."""
        raise NotImplementedError(f"the {self.name} engine cannot take weight updates")

    async def update_weights_async(self, state_dict: dict[str, Any], version: int) -> None:
        """:meth:`update_weights` from async code, without blocking the event loop (the default
        runs it in a worker thread; engines whose update is natively async override this)."""
        import asyncio

        await asyncio.get_running_loop().run_in_executor(None, self.update_weights, state_dict, version)

    async def close(self) -> None:
        """Release resources (threads, servers, device memory); engines that hold none keep this."""
        return None
