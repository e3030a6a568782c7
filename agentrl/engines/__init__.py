"""LLM engines behind one interface (see :mod:`rockroll.agentrl.engines.base`).

:func:`make_engine` builds one by kind; each engine module is imported only when asked for, so
``import rockroll.agentrl.engines`` stays light (no torch, transformers, vllm or sglang).
"""

from __future__ import annotations

from typing import Any

from rockroll.agentrl.engines.base import (
    EngineDeadError,
    EngineError,
    GenerationRequest,
    GenerationResult,
    LLMEngine,
    SamplingParams,
)
from rockroll.envs.registries import Registry

__all__ = [
    "ENGINE_KINDS",
    "EngineDeadError",
    "EngineError",
    "GenerationRequest",
    "GenerationResult",
    "LLMEngine",
    "SamplingParams",
    "make_engine",
]

#: engine kind -> "module:Class" (an :class:`LLMEngine` subclass), imported when :func:`make_engine` asks for it
ENGINE_KINDS: Registry[type[LLMEngine]] = Registry(
    "engine kind",
    entries={
        "hf": "rockroll.agentrl.engines.hf:HFEngine",
        "openai": "rockroll.agentrl.engines.openai_engine:OpenAIEngine",
        "vllm": "rockroll.agentrl.engines.vllm_engine:VLLMEngine",
        "sglang": "rockroll.agentrl.engines.sglang_engine:SGLangEngine",
        "random": "rockroll.agentrl.engines.random_engine:RandomEngine",
    },
)


def make_engine(kind: str, **kwargs: Any) -> LLMEngine:
    """Build the engine ``kind`` (one of :data:`ENGINE_KINDS`) with ``kwargs``.

    Examples: ``make_engine("hf", model_path="/tmp/tiny")``,
    ``make_engine("openai", base_url="http://127.0.0.1:8001", tokenizer="/tmp/tiny")``,
    ``make_engine("vllm", model_path="Qwen/Qwen2.5-0.5B-Instruct")``, ``make_engine("random")``.
    An unknown kind raises :class:`~rockroll.envs.registries.UnknownNameError` (a ``ValueError``).
    """
    return ENGINE_KINDS.get(kind)(**kwargs)
