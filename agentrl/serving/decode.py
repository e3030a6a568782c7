"""How ``rockroll serve-model`` turns an engine's tokens into one OpenAI choice: text, stop strings, chunks.

:func:`generate_choice` yields :class:`Piece` s of one choice. A request that streams, has stop
strings, or a text prompt is decoded in chunks of ``chunk`` tokens: each chunk is one engine request
whose prompt is the prompt plus the tokens so far (the hf engine's prefix cache holds their KV, so a
chunk starts decoding at once), which lets text flow out as it is made and generation end at a
stop string. Chunk ``k`` of a seeded request is seeded from ``(seed, k)``: the same request answers
the same, streamed or not. A non-streamed token-id prompt without stop strings (the rollout's
``/v1/completions`` call) is one engine request, exactly what the engine samples.

Text is decoded incrementally (vLLM's prefix/read offsets): each token gets the text it adds, a
token that ends inside a multi-byte character adds nothing until the character completes. A stop
string ends the choice where it begins (it is not part of the text); text that may be the start of
a stop string is held back until the next chunk decides.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from rockroll.agentrl.engines.base import GenerationRequest, LLMEngine, SamplingParams

__all__ = ["Piece", "Detokenizer", "generate_choice", "chunk_seed", "merge_choices"]

#: ``(context ids, new ids, n) -> for each new id, the n most likely (token id, logprob) there``
TopScorer = Callable[[list[int], list[int], int], Awaitable[list[list[tuple[int, float]]]]]


@dataclass
class Piece:
    """What a choice adds: tokens (ids, logprobs, their text, top alternatives) and the text released."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    token_text: list[str] = field(default_factory=list)
    top: list[list[tuple[int, float]]] | None = None
    text: str = ""
    finish_reason: str | None = None  # "stop" | "length" | "abort" on the last piece
    stop_reason: int | str | None = None  # the stop token id or stop string that ended it
    generated: int = 0  # tokens the engine generated for this piece (usage), stop-string tails included
    weight_version: int | None = None  # the oldest policy version behind the choice's tokens so far
    tokens_exact: bool = True  # False: an engine request behind it re-tokenised text


def chunk_seed(seed: int | None, k: int) -> int | None:
    """The seed of chunk ``k`` of a request seeded ``seed`` (chunk 0: ``seed`` itself)."""
    if seed is None or k == 0:
        return seed
    digest = hashlib.blake2b(f"{seed}:{k}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


class Decoder(Protocol):
    """What :class:`Detokenizer` needs of a Hugging Face tokenizer."""

    def decode(self, ids: list[int], *, skip_special_tokens: bool, clean_up_tokenization_spaces: bool) -> str: ...


class Detokenizer:
    """Incremental decoding: :meth:`add` returns the text each new token adds."""

    def __init__(self, tokenizer: Decoder) -> None:
        self.tok = tokenizer
        self.ids: list[int] = []
        self.prefix = 0
        self.read = 0

    def _decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def add(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return after[len(before) :]
        return ""

    def flush(self) -> str:
        """Text still held (a character the last tokens left incomplete)."""
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        self.prefix = self.read = len(self.ids)
        return after[len(before) :]


def _held(text: str, stops: list[str]) -> int:
    """How many trailing characters of ``text`` could begin a stop string."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best


class _Choice:
    """The tokens and text of one choice so far, and how much of them went out (see :func:`generate_choice`)."""

    def __init__(self, tokenizer: Decoder, stops: list[str], with_top: bool) -> None:
        self.detok = Detokenizer(tokenizer)
        self.stops, self.with_top = stops, with_top
        self.ids: list[int] = []
        self.lps: list[float] = []
        self.texts: list[str] = []
        self.tops: list[list[tuple[int, float]]] = []
        self.starts: list[int] = []  # offset of each token's text in ``full``
        self.full = ""
        self.sent_tokens = self.sent_chars = 0

    def add(self, token_ids: list[int], logprobs: list[float]) -> None:
        """Tokens the engine made, with the text each adds."""
        for t, lp in zip(token_ids, logprobs, strict=True):
            self.ids.append(int(t))
            self.lps.append(float(lp))
            self.starts.append(len(self.full))
            piece = self.detok.add(t)
            self.texts.append(piece)
            self.full += piece

    def flush(self) -> None:
        """The text the last tokens still held (the choice ends)."""
        tail = self.detok.flush()
        if self.texts:
            self.texts[-1] += tail
        self.full += tail

    def stop_at(self) -> tuple[int, str] | None:
        """Where the first stop string in the text not sent yet begins, and which one it is."""
        found = [(i, s) for s in self.stops if (i := self.full.find(s, self.sent_chars)) >= 0]
        if not found:
            return None
        cut = min(i for i, _s in found)
        return cut, next(s for i, s in found if i == cut)

    def release(self, finish: str | None, stop_reason: int | str | None, generated: int) -> Piece:
        """The piece that goes out now: up to a stop string, everything at the end, else what cannot begin one."""
        stop = self.stop_at()
        if stop is not None:  # a stop string: the choice ends where it begins
            upto_chars, stop_reason = stop
            finish = "stop"
            upto_tokens = sum(1 for s0 in self.starts if s0 < upto_chars)
        elif finish is not None:
            upto_chars, upto_tokens = len(self.full), len(self.ids)
        else:
            upto_chars = len(self.full) - _held(self.full, self.stops)
            upto_tokens = sum(1 for i, s0 in enumerate(self.starts) if s0 + len(self.texts[i]) <= upto_chars)
        sent, upto_tokens = self.sent_tokens, max(upto_tokens, self.sent_tokens)
        out = Piece(
            token_ids=self.ids[sent:upto_tokens],
            logprobs=self.lps[sent:upto_tokens],
            token_text=self.texts[sent:upto_tokens],
            top=self.tops[sent:upto_tokens] if self.with_top else None,
            text=self.full[self.sent_chars : upto_chars],
            finish_reason=finish,
            stop_reason=stop_reason,
            generated=generated,
        )
        if out.token_text and finish == "stop" and isinstance(stop_reason, str):  # the last token's text, cut
            end = upto_chars - self.starts[upto_tokens - 1]
            out.token_text[-1] = out.token_text[-1][: max(end, 0)]
        self.sent_tokens, self.sent_chars = upto_tokens, max(upto_chars, self.sent_chars)
        return out


async def generate_choice(
    engine: LLMEngine,
    prompt_ids: list[int],
    params: SamplingParams,
    *,
    stops: list[str],
    chunk: int | None,
    top_n: int = 0,
    scorer: TopScorer | None = None,
) -> AsyncIterator[Piece]:
    """The pieces of one choice (see the module docstring); ``chunk=None``: one engine request."""
    choice = _Choice(engine.tokenizer, stops, with_top=bool(top_n and scorer is not None))
    remaining = params.max_new_tokens
    k = 0
    finish: str | None = None
    stop_reason: int | str | None = None
    version: int | None = None
    exact = True
    while finish is None:
        n = remaining if chunk is None else min(chunk, remaining)
        sp = SamplingParams(
            max_new_tokens=n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
            stop_token_ids=list(params.stop_token_ids),
            seed=chunk_seed(params.seed, k),
        )
        context = prompt_ids + choice.ids
        res = await engine.generate(GenerationRequest(context, sp))
        k += 1
        remaining -= len(res.token_ids)
        version = res.weight_version if version is None else min(version, res.weight_version)
        exact = exact and res.tokens_exact
        if top_n and scorer is not None and res.token_ids:
            choice.tops += await scorer(context, list(res.token_ids), top_n)
        choice.add(list(res.token_ids), list(res.logprobs))
        if res.finish_reason == "stop":
            finish, stop_reason = "stop", choice.ids[-1] if choice.ids else None
        elif res.finish_reason == "aborted":
            finish = "abort"
        elif remaining <= 0 or not res.token_ids:
            finish = "length"
        if finish is not None:
            choice.flush()
        out = choice.release(finish, stop_reason, len(res.token_ids))
        out.weight_version, out.tokens_exact = version, exact
        finish = out.finish_reason
        if out.token_ids or out.text or finish is not None or out.generated:
            yield out
        await asyncio.sleep(0)


async def merge_choices(iters: list[AsyncIterator[Piece]]) -> AsyncIterator[tuple[int, Piece]]:
    """Pieces of several choices as they come: ``(choice index, piece)``."""
    queue: asyncio.Queue[tuple[int, Piece | BaseException | None]] = asyncio.Queue()

    async def pump(i: int, it: AsyncIterator[Piece]) -> None:
        try:
            async for piece in it:
                await queue.put((i, piece))
            await queue.put((i, None))
        except Exception as e:  # noqa: BLE001 - handed to the consumer
            await queue.put((i, e))

    tasks = [asyncio.create_task(pump(i, it)) for i, it in enumerate(iters)]
    left = len(tasks)
    try:
        while left:
            i, item = await queue.get()
            if item is None:
                left -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield i, item
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
