"""The ``random`` engine: random (valid or invalid) ``<answer>`` actions, for env tests and benchmarks.

It implements :class:`~rockroll.agentrl.engines.base.LLMEngine` without a model: each response is
``<answer>{action}</answer>`` with the action drawn uniformly from ``actions`` (or, with probability
``invalid_prob``, an answer no env accepts or no answer block at all), tokenised with the given
tokenizer (a built-in :class:`~rockroll.agentrl.models.char_tokenizer.CharTokenizer` when none), ended by the
tokenizer's EOS token, cut at ``max_new_tokens``. Logprobs are uniform over the vocabulary. A
configurable :class:`~rockroll.agentrl.faults.latency.Latency` per request lets it stand in for a model server.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np

from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, LLMEngine
from rockroll.agentrl.faults.latency import Latency

__all__ = ["RandomEngine", "DEFAULT_ACTIONS"]

DEFAULT_ACTIONS = ("Up", "Down", "Left", "Right")
_INVALID = ("<answer>Jump</answer>", "I am not sure what to do.", "<answer></answer>")


class RandomEngine(LLMEngine):
    """Random actions as text (see the module docstring).

    Args:
        tokenizer: a Hugging Face tokenizer (or anything with ``encode``/``decode``/``eos_token_id``),
            or a model directory to load one from; None: a :class:`CharTokenizer`.
        actions: the valid action names to pick from.
        invalid_prob: probability of an invalid answer.
        latency: delay per request (a :class:`Latency` or its fields as a dict).
        seed: seeds the engine's RNG (a request's ``params.seed`` overrides it for that request).
    """

    name = "random"

    def __init__(
        self,
        tokenizer: Any = None,
        *,
        actions: tuple[str, ...] | list[str] = DEFAULT_ACTIONS,
        invalid_prob: float = 0.0,
        latency: Latency | dict[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        if not actions:
            raise ValueError("actions must name at least one action, e.g. ('Up', 'Down')")
        if not 0.0 <= invalid_prob <= 1.0:
            raise ValueError(f"invalid_prob must be in [0, 1], got {invalid_prob}")
        if tokenizer is None:
            from rockroll.agentrl.models.char_tokenizer import CharTokenizer

            tokenizer = CharTokenizer()
        elif isinstance(tokenizer, str):  # a model directory (config files)
            from rockroll.agentrl.models.tiny import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        if isinstance(latency, dict):
            latency = Latency(**latency)
        self.tokenizer = tokenizer
        self.actions = tuple(actions)
        self.invalid_prob = float(invalid_prob)
        self.latency = latency or Latency()
        self.rng = np.random.default_rng(seed)
        self.weight_version = 0
        self.requests = 0
        vocab = getattr(tokenizer, "vocab_size", None) or len(tokenizer)
        self._logprob = -math.log(max(2, int(vocab)))

    def _text(self, rng: np.random.Generator) -> str:
        if rng.random() < self.invalid_prob:
            return str(rng.choice(_INVALID))
        return f"<answer>{rng.choice(self.actions)}</answer>"

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """One random response after a delay drawn from ``latency``."""
        self.requests += 1
        rng = self.rng if request.params.seed is None else np.random.default_rng(request.params.seed)
        delay = self.latency.sample(rng)
        version = self.weight_version
        if delay > 0:
            await asyncio.sleep(delay)
        ids = list(self.tokenizer.encode(self._text(rng), add_special_tokens=False))
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if eos is not None:
            ids.append(int(eos))
        limit = request.params.max_new_tokens
        finish = "stop"
        if len(ids) > limit:
            ids, finish = ids[:limit], "length"
        return GenerationResult(ids, [self._logprob] * len(ids), finish, version)

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """No weights: only the version tag changes."""
        self.weight_version = int(version)
