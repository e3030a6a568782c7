"""How :class:`~rockroll.agentrl.serving.service.ModelService` records an agent episode's calls: a request
whose key is an episode's reserves room under the episode's cap first (429 past it), and each of its choices is
recorded when it finishes (:mod:`rockroll.agentrl.serving.recording`), streamed or not."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from rockroll.agentrl.serving.decode import Piece
from rockroll.agentrl.serving.protocol import OpenAIError
from rockroll.agentrl.serving.recording import CallCapReached, CallRecord, CallRecorder

__all__ = ["RecordingService", "join_piece"]


def join_piece(w: Piece, p: Piece) -> None:
    """Add piece ``p`` of a choice to ``w``, the choice so far."""
    w.token_ids += p.token_ids
    w.logprobs += p.logprobs
    w.token_text += p.token_text
    w.top = None if p.top is None else (w.top or []) + p.top
    w.text += p.text
    w.generated += p.generated
    w.finish_reason, w.stop_reason = p.finish_reason, p.stop_reason
    w.weight_version = p.weight_version if w.weight_version is None else w.weight_version
    w.tokens_exact = w.tokens_exact and p.tokens_exact


class RecordingService:
    """The recording half of the model service (``engine``, ``recorder`` and ``collect`` come from it)."""

    engine: Any
    recorder: CallRecorder | None

    @staticmethod
    async def collect(iters: list[AsyncIterator[Piece]]) -> list[Piece]:
        raise NotImplementedError

    def reserve(self, episode: str | None, n: int) -> int | None:
        """Room for ``n`` recorded calls of ``episode`` (None: the request is not an episode's)."""
        if episode is None or self.recorder is None:
            return None
        try:
            return self.recorder.reserve(episode, n)
        except CallCapReached as e:
            raise OpenAIError(429, str(e), code="call_cap_reached", kind="rate_limit_error") from e
        except KeyError as e:
            raise OpenAIError(401, "this episode has ended: its key no longer works", code="invalid_api_key") from e

    def record(
        self, episode: str | None, first: int | None, route: str, prompts: list[list[int]], whole: list[Piece | None],
        started: float,
    ) -> None:  # fmt: skip
        """Store the choices of a request (``whole[i]`` None: choice ``i`` did not finish: nothing recorded)."""
        if episode is None or first is None or self.recorder is None:
            return
        ended = time.time()
        recs = [
            CallRecord(
                index=first + i,
                route=route,  # type: ignore[arg-type]
                prompt_ids=list(prompts[i]),
                response_ids=list(p.token_ids),
                logprobs=list(p.logprobs),
                weight_version=int(self.engine.weight_version if p.weight_version is None else p.weight_version),
                finish_reason=str(p.finish_reason),
                started=started,
                ended=ended,
                tokens_exact=p.tokens_exact,
            )  # fmt: skip
            for i, p in enumerate(whole)
            if p is not None
        ]
        self.recorder.record(episode, recs, len(whole))

    async def collect_recorded(
        self, iters: list[AsyncIterator[Piece]], episode: str | None, first: int | None, route: str,
        prompts: list[list[int]], started: float,
    ) -> list[Piece]:  # fmt: skip
        """:meth:`collect`, the choices recorded (a failure records none and frees their reservation)."""
        try:
            whole = await self.collect(iters)
        except BaseException:
            self.record(episode, first, route, prompts, [None] * len(iters), started)
            raise
        self.record(episode, first, route, prompts, list(whole), started)
        return whole

    async def recorded(
        self, pieces: AsyncIterator[tuple[int, Piece]], episode: str | None, first: int | None, route: str,
        prompts: list[list[int]], started: float,
    ) -> AsyncIterator[tuple[int, Piece]]:  # fmt: skip
        """The pieces of a stream as they come, the finished choices recorded when it ends (a stream cut short
        records the choices that finished)."""
        whole = [Piece() for _ in prompts]
        try:
            async for i, p in pieces:
                join_piece(whole[i], p)
                yield i, p
        finally:
            self.record(episode, first, route, prompts, [w if w.finish_reason else None for w in whole], started)
