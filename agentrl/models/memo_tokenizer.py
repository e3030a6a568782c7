"""A tokenizer wrapper that memoises prompt rendering, encoding and short decodes (:class:`MemoTokenizer`)."""

from __future__ import annotations

from typing import Any

__all__ = ["MemoTokenizer"]


class MemoTokenizer:
    """The engine's tokenizer with prompt rendering, encoding and (short) decoding memoised
    (bounded), everything else passed through.

    Prompts and responses repeat across episodes (the same observation, the same answer); a
    repeated one costs a dict lookup instead of a template render and an encode, or a decode.
    Templates that read the clock (``strftime_now``) are never memoised. A fast tokenizer encodes
    one text with its Rust backend's ``encode`` (the same ids; the ``encode_batch`` that
    ``PreTrainedTokenizerFast.encode`` calls wakes a thread pool, which costs milliseconds on a busy
    machine) unless truncation or padding is set on the backend.
    """

    SIZE = 8192
    MAX_TEXT = 4096

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer
        self._renders: dict[tuple[tuple[str, str], ...], str] = {}
        self._encodes: dict[str, list[int]] = {}
        self._decodes: dict[tuple[tuple[int, ...], bool], str] = {}
        self._clock = "strftime_now" in str(getattr(tokenizer, "chat_template", "") or "")
        self._backend = getattr(tokenizer, "backend_tokenizer", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tok, name)

    def apply_chat_template(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        if self._clock or kwargs != {"tokenize": False, "add_generation_prompt": True} or len(messages) > 3:
            return self._tok.apply_chat_template(messages, **kwargs)
        key = tuple((m["role"], m["content"]) for m in messages if len(m) == 2)
        if len(key) != len(messages):
            return self._tok.apply_chat_template(messages, **kwargs)
        text = self._renders.get(key)
        if text is None:
            text = self._tok.apply_chat_template(messages, **kwargs)
            if len(self._renders) >= self.SIZE:
                self._renders.clear()
            self._renders[key] = text
        return text

    def decode(self, token_ids: list[int], skip_special_tokens: bool = False, **kwargs: Any) -> str:
        if kwargs or len(token_ids) > 64:
            return self._tok.decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)
        key = (tuple(token_ids), skip_special_tokens)
        text = self._decodes.get(key)
        if text is None:
            text = self._tok.decode(token_ids, skip_special_tokens=skip_special_tokens)
            if len(self._decodes) >= self.SIZE:
                self._decodes.clear()
            self._decodes[key] = text
        return text

    def encode(self, text: str, add_special_tokens: bool = True, **kwargs: Any) -> list[int]:
        if add_special_tokens or kwargs:
            return self._tok.encode(text, add_special_tokens=add_special_tokens, **kwargs)
        ids = self._encodes.get(text)
        if ids is None:
            backend = self._backend
            if backend is not None and backend.truncation is None and backend.padding is None:
                ids = list(backend.encode(text, add_special_tokens=False).ids)
            else:
                ids = list(self._tok.encode(text, add_special_tokens=False))
            if len(text) > self.MAX_TEXT:
                return ids
            if len(self._encodes) >= self.SIZE:
                self._encodes.clear()
            self._encodes[text] = ids
        return list(ids)
