r"""The ``math`` reward: answer extraction and equivalence through ``math-verify``, plus a format component.

The gold answer is ``metadata["answer"]`` (text such as ``\frac{1}{2}``, ``0.5``, ``x^2+1``, or a
number). The response's answer is read by math-verify's extractors (LaTeX first, then plain
expressions; a ``\boxed{}`` is matched first), from the whole response or only from the part the
config names (``answer_from``), and compared symbolically and numerically
(``\frac{1}{2} == 0.5 == 1/2``, equal sets, intervals, matrices...).

Score: ``(1 - format_weight) * correct + format_weight * formatted``, where ``formatted`` says the
response put its answer in the asked-for form (``\boxed{}`` or ``<answer>...</answer>``). With
``require_format`` an unformatted answer counts as wrong.

math-verify's own timeouts use ``signal.alarm``, which works only in the main thread; the reward runs
in a pool thread, so they are off here and the reward pool's timeout (:mod:`rockroll.agentrl.rewards.pool`)
bounds a pathological expression instead (an infra failure of that sample).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from rockroll.agentrl.rewards.base import ConfigModel, Reward, RewardResult
from rockroll.agentrl.rewards.errors import RewardError
from rockroll.agentrl.rewards.simple import extract_answer, last_boxed

__all__ = ["MathReward", "MathConfig", "math_equal"]


class MathConfig(ConfigModel):
    answer_from: Literal["any", "boxed", "answer_tag"] = Field(
        "any", description="Where the answer is read: the whole response (boxed first), or only that part."
    )
    format: Literal["boxed", "answer_tag", "either"] = Field(
        "boxed", description="The form the answer must take for the format component."
    )
    format_weight: float = Field(0.1, ge=0, le=1, description="Share of the score given by the format component.")
    require_format: bool = Field(False, description="An answer not in the asked-for form counts as wrong.")
    float_rounding: int = Field(6, ge=0, le=15, description="Decimal places numbers are rounded to before comparing.")


def _verifier() -> Any:
    try:
        import math_verify
    except ImportError as e:  # an optional dependency (the ``rlvr`` extra)
        raise RewardError("the math reward needs math-verify: pip install 'rockroll[rlvr]'") from e
    return math_verify


def _parse(mv: Any, text: str) -> list[Any]:
    return list(mv.parse(text, parsing_timeout=None))


def _parse_gold(mv: Any, gold: object) -> list[Any]:
    text = str(gold).strip()
    for candidate in (f"${text}$", f"\\boxed{{{text}}}", text):
        parsed = _parse(mv, candidate)
        if parsed:
            return parsed
    return []


def math_equal(gold: object, answer_text: str, *, float_rounding: int = 6) -> bool:
    """Whether ``answer_text`` (a response or its answer part) holds an answer equal to ``gold``."""
    mv = _verifier()
    parsed_gold = _parse_gold(mv, gold)
    if not parsed_gold:
        raise RewardError(f"math-verify cannot read the gold answer {str(gold)[:80]!r}")
    parsed = _parse(mv, answer_text)
    if not parsed:
        return False
    return bool(mv.verify(parsed_gold, parsed, float_rounding=float_rounding, timeout_seconds=None))


class MathReward(Reward):
    """See the module docstring. Details: ``correct``, ``formatted``, ``extracted`` (math-verify's text)."""

    Config = MathConfig
    requires = ("answer",)
    config: MathConfig

    def __init__(self, config: ConfigModel | None = None) -> None:
        super().__init__(config)
        self._mv = _verifier()

    def _formatted(self, response: str) -> bool:
        boxed = last_boxed(response) is not None
        tagged = extract_answer(response, "answer_tag") is not None
        return {"boxed": boxed, "answer_tag": tagged, "either": boxed or tagged}[self.config.format]

    def __call__(self, prompt: str, response: str, metadata: Mapping[str, Any]) -> RewardResult:
        cfg = self.config
        formatted = self._formatted(response)
        part: str | None = response
        if cfg.answer_from == "boxed":
            boxed = last_boxed(response)
            part = None if boxed is None else f"\\boxed{{{boxed}}}"
        elif cfg.answer_from == "answer_tag":
            part = extract_answer(response, "answer_tag")
        parsed = _parse(self._mv, part) if part else []
        gold = _parse_gold(self._mv, metadata["answer"])
        if not gold:
            raise RewardError(f"math-verify cannot read the gold answer {str(metadata['answer'])[:80]!r}")
        correct = bool(parsed) and bool(
            self._mv.verify(gold, parsed, float_rounding=cfg.float_rounding, timeout_seconds=None)
        )
        if cfg.require_format and not formatted:
            correct = False
        score = (1 - cfg.format_weight) * correct + cfg.format_weight * formatted
        extracted = str(parsed[-1]) if parsed else None
        return RewardResult(score, {"correct": correct, "formatted": formatted, "extracted": extracted})
