"""Rewards of simple tasks: ``exact``, ``regex`` and ``countdown``, and the answer extraction they share.

An answer is read from the response the way the config says (:func:`extract_answer`): the last
``<answer>...</answer>``, the last ``\\boxed{...}``, the last non-empty line, or the whole text.
A response without the asked-for form scores 0 (the agent's failure, not infra).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Literal

from pydantic import Field

from rockroll.agentrl.rewards.base import ConfigModel, Reward, RewardResult

__all__ = ["ExactReward", "RegexReward", "CountdownReward", "extract_answer", "last_boxed", "Extract"]

Extract = Literal["answer_tag", "boxed", "last_line", "whole"]
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def last_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (nested braces kept), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


def extract_answer(text: str, how: Extract) -> str | None:
    """The answer part of ``text`` (see the module docstring); None when it lacks that form."""
    if how == "answer_tag":
        found = _ANSWER_TAG.findall(text)
        return found[-1].strip() if found else None
    if how == "boxed":
        boxed = last_boxed(text)
        return boxed.strip() if boxed is not None else None
    if how == "last_line":
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else None
    return text.strip()


class ExactConfig(ConfigModel):
    extract: Extract = Field("answer_tag", description="Where the answer is read from the response.")
    case_sensitive: bool = Field(False, description="Compare letters' case too.")
    collapse_spaces: bool = Field(True, description="Treat runs of whitespace as one space.")


class ExactReward(Reward):
    """1 when the extracted answer equals ``metadata["answer"]`` (one string or a list of accepted ones)."""

    Config = ExactConfig
    requires = ("answer",)
    config: ExactConfig

    def _norm(self, s: str) -> str:
        s = " ".join(s.split()) if self.config.collapse_spaces else s.strip()
        return s if self.config.case_sensitive else s.casefold()

    def __call__(self, prompt: str, response: str, metadata: Mapping[str, Any]) -> RewardResult:
        answer = extract_answer(response, self.config.extract)
        gold = metadata["answer"]
        accepted = [str(g) for g in gold] if isinstance(gold, (list, tuple)) else [str(gold)]
        ok = answer is not None and self._norm(answer) in {self._norm(g) for g in accepted}
        return RewardResult(float(ok), {"extracted": answer, "format": answer is not None})


class RegexConfig(ConfigModel):
    pattern: str | None = Field(None, description="Regular expression; None: each sample's metadata['pattern'].")
    extract: Extract = Field("whole", description="Part of the response matched against.")
    fullmatch: bool = Field(False, description="The whole part must match (else a search anywhere in it).")
    ignore_case: bool = Field(False, description="Match letters of either case.")


class RegexReward(Reward):
    """1 when the (extracted) response matches the pattern (config or ``metadata["pattern"]``)."""

    Config = RegexConfig
    config: RegexConfig

    def __init__(self, config: ConfigModel | None = None) -> None:
        super().__init__(config)
        self._flags = re.IGNORECASE if self.config.ignore_case else 0
        self._fixed = re.compile(self.config.pattern, self._flags) if self.config.pattern is not None else None

    def required_fields(self) -> tuple[str, ...]:
        return () if self._fixed is not None else ("pattern",)

    def __call__(self, prompt: str, response: str, metadata: Mapping[str, Any]) -> RewardResult:
        regex = self._fixed or re.compile(str(metadata["pattern"]), self._flags)
        text = extract_answer(response, self.config.extract)
        if text is None:
            return RewardResult(0.0, {"format": False})
        hit = regex.fullmatch(text) if self.config.fullmatch else regex.search(text)
        return RewardResult(float(hit is not None), {"format": True, "match": hit.group(0) if hit else None})


class CountdownConfig(ConfigModel):
    extract: Extract = Field("answer_tag", description="Where the equation is read from the response.")
    use_all: bool = Field(True, description="Every given number must be used exactly once (else at most once).")
    format_score: float = Field(0.0, ge=0, le=1, description="Score of a well-formed but wrong equation.")


_OPS = {ast.Add: Fraction.__add__, ast.Sub: Fraction.__sub__, ast.Mult: Fraction.__mul__, ast.Div: Fraction.__truediv__}


def _evaluate(node: ast.AST, used: list[int]) -> Fraction:
    """Exact value of an expression of integers, + - * / and parentheses; records the integers used."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, used)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left, used), _evaluate(node.right, used))
    raise ValueError(f"not allowed in a countdown equation: {ast.dump(node)[:60]}")


class CountdownReward(Reward):
    """1 when the equation reaches ``metadata["target"]`` with ``metadata["numbers"]``."""

    Config = CountdownConfig
    requires = ("numbers", "target")
    config: CountdownConfig

    def __call__(self, prompt: str, response: str, metadata: Mapping[str, Any]) -> RewardResult:
        text = extract_answer(response, self.config.extract)
        if text is None:
            return RewardResult(0.0, {"format": False})
        expr = text.split("=")[0].strip()
        used: list[int] = []
        try:
            value = _evaluate(ast.parse(expr, mode="eval"), used)
        except (SyntaxError, ValueError, ZeroDivisionError, RecursionError) as e:
            return RewardResult(0.0, {"format": False, "error": f"{type(e).__name__}: {e}"[:200]})
        have, spent = Counter(int(n) for n in metadata["numbers"]), Counter(used)
        fair = spent == have if self.config.use_all else not spent - have
        ok = fair and value == Fraction(metadata["target"])
        score = 1.0 if ok else self.config.format_score
        return RewardResult(score, {"format": True, "value": str(value), "numbers_ok": fair})
