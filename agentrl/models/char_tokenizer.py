"""A trivial character tokenizer with a ChatML chat template, for runs without a real model.

One token per Unicode code point plus a few special tokens (``<|im_start|>``, ``<|im_end|>``,
``<|endoftext|>``, ``<|pad|>``). It offers the subset of the Hugging Face tokenizer interface that
rollout code uses (``encode``, ``decode``, ``apply_chat_template``, ``eos_token_id``...), and its
encode/decode round-trips every string exactly, so it is a convenient stand-in for tests and
benchmarks with the random engine.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["CharTokenizer", "SPECIAL_TOKENS"]

SPECIAL_TOKENS = ("<|pad|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>")
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")


class CharTokenizer:
    """Character-level tokenizer (see the module docstring).

    Token ids: ``0..len(SPECIAL_TOKENS)-1`` are the special tokens, then ``ord(c) + offset``.
    ``eos_token`` is ``<|im_end|>`` (the end of an assistant turn), as in Qwen's chat models.
    """

    name_or_path = "char"

    def __init__(self) -> None:
        self._special_ids = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
        self.offset = len(SPECIAL_TOKENS)
        self.pad_token, self.eos_token = "<|pad|>", "<|im_end|>"
        self.pad_token_id = self._special_ids[self.pad_token]
        self.eos_token_id = self._special_ids[self.eos_token]
        self.all_special_ids = list(self._special_ids.values())

    @property
    def vocab_size(self) -> int:
        """Special tokens plus the Basic Multilingual Plane (used for uniform logprobs)."""
        return self.offset + 0x10000

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``; special-token strings map onto their special ids."""
        ids: list[int] = []
        for part in _SPECIAL_RE.split(text):
            if part in self._special_ids:
                ids.append(self._special_ids[part])
            else:
                ids.extend(ord(c) + self.offset for c in part)
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (special tokens dropped when ``skip_special_tokens``)."""
        out = []
        for i in ids:
            i = int(i)
            if i < self.offset:
                if not skip_special_tokens:
                    out.append(SPECIAL_TOKENS[i])
            else:
                out.append(chr(i - self.offset))
        return "".join(out)

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        tokenize: bool = True,
        add_generation_prompt: bool = False,
        **_: Any,
    ) -> str | list[int]:
        """ChatML: ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message."""
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        return self.encode(text) if tokenize else text
