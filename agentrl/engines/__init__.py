"""LLM engines behind one interface (see :mod:`agentrl.engines.base`)."""

from agentrl.engines.base import EngineError, GenerationRequest, GenerationResult, LLMEngine, SamplingParams

__all__ = ["EngineError", "GenerationRequest", "GenerationResult", "LLMEngine", "SamplingParams"]
