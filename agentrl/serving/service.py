"""The model server's request handling (:class:`ModelService`): check a request, generate its
choices on the engine, and build OpenAI's answer (a body, or the server-sent events of a stream).

:mod:`rockroll.agentrl.serving.app` wires it to FastAPI routes; what the requests may ask for is
described there.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from rockroll.agentrl.engines.base import EngineError, LLMEngine
from rockroll.agentrl.serving.decode import Piece, TopScorer, generate_choice, merge_choices
from rockroll.agentrl.serving.episode import EpisodeDefaults
from rockroll.agentrl.serving.protocol import ChatCompletionRequest, CompletionRequest, OpenAIError, sse
from rockroll.agentrl.serving.recording import CallRecorder
from rockroll.agentrl.serving.service_recording import RecordingService, join_piece
from rockroll.agentrl.serving.tool_calls import (
    DEFAULT_PARSER,
    ToolPlan,
    ToolStream,
    chat_messages,
    openai_tool_calls,
    plan_tools,
    split_turn,
    tool_call_deltas,
)
from rockroll.agentrl.tools import get_parser, render_chat

__all__ = ["Answer", "ModelService", "MAX_PROMPTS"]

MAX_PROMPTS = 64

#: what a handler answers: a JSON body, or the server-sent events of a stream
Answer = dict[str, Any] | AsyncIterator[str]


def _top_scorer(engine: LLMEngine) -> TopScorer | None:
    """Top-n logprobs of each new token, by one forward of the engine's model (None: no local model)."""
    model = getattr(engine, "model", None)
    if model is None or not callable(model) or not hasattr(model, "parameters"):
        return None
    import torch

    lock = threading.Lock()

    def score(context: list[int], new: list[int], n: int) -> list[list[tuple[int, float]]]:
        with lock, torch.inference_mode():
            device = next(model.parameters()).device
            ids = torch.tensor([context + new], device=device)
            logits = model(input_ids=ids, use_cache=False).logits[0, len(context) - 1 : len(context) + len(new) - 1]
            values, index = torch.log_softmax(logits.float(), dim=-1).topk(min(n, logits.shape[-1]), dim=-1)
        return [list(zip(i.tolist(), v.tolist(), strict=True)) for i, v in zip(index, values, strict=True)]

    async def scorer(context: list[int], new: list[int], n: int) -> list[list[tuple[int, float]]]:
        return await asyncio.to_thread(score, context, new, n)

    return scorer


class ModelService(RecordingService):
    """Serves ``engine`` under the model id ``model_name`` (see the module docstring).

    ``max_model_len``: the model's context (prompt + answer; None: unchecked); ``chunk_tokens``:
    tokens per engine request of a chunked choice (see :mod:`rockroll.agentrl.serving.decode`);
    ``episode``: the trained turn's settings applied by default (:mod:`rockroll.agentrl.serving.episode`);
    ``tool_call_parser``: the style the model writes tool calls in (:mod:`rockroll.agentrl.serving.tool_calls`);
    ``recorder``: where the calls of agent episodes are recorded (:mod:`rockroll.agentrl.serving.recording`):
    a request that names an episode (its key's) is recorded there, choice by choice.
    """

    def __init__(
        self,
        engine: LLMEngine,
        model_name: str = "rockroll-model",
        default_max_tokens: int = 16,
        max_model_len: int | None = None,
        chunk_tokens: int = 8,
        episode: EpisodeDefaults | None = None,
        tool_call_parser: str = DEFAULT_PARSER,
        recorder: CallRecorder | None = None,
    ) -> None:
        self.engine = engine
        self.recorder = recorder
        self.episode = episode
        self.parser = get_parser(tool_call_parser)
        self.model_name = model_name
        self.default_max_tokens = default_max_tokens
        self.max_model_len = max_model_len
        self.chunk_tokens = chunk_tokens
        self.tok = engine.tokenizer
        self.vocab = len(self.tok)
        self.scorer = _top_scorer(engine)
        self.card = {
            "id": model_name, "object": "model", "created": 0, "owned_by": "rockroll", "max_model_len": max_model_len,
        }  # fmt: skip

    # ------------------------------------------------------------------ checks
    def check_model(self, name: str) -> None:
        if name and name != self.model_name:
            raise OpenAIError(
                404,
                f"The model `{name}` does not exist. This server serves `{self.model_name}` (see /v1/models).",
                param="model",
                code="model_not_found",
            )

    def token_str(self, i: int, as_ids: bool = False) -> str:
        return f"token_id:{i}" if as_ids else self.tok.decode([i], skip_special_tokens=False)

    def prompt_batch(self, prompt: Any) -> tuple[list[list[int]], bool]:
        """Token ids of each prompt, and whether any was text."""
        items = prompt if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)) else [prompt]
        if len(items) > MAX_PROMPTS:
            raise OpenAIError(400, f"at most {MAX_PROMPTS} prompts per request", param="prompt")
        out, text = [], False
        for p in items:
            ids = self.tok.encode(p, add_special_tokens=False) if isinstance(p, str) else list(p)
            text = text or isinstance(p, str)
            if not ids:
                raise OpenAIError(400, "prompt is empty", param="prompt")
            if max(ids) >= self.vocab or min(ids) < 0:
                raise OpenAIError(400, f"prompt token ids must be in [0, {self.vocab})", param="prompt")
            out.append(ids)
        return out, text

    def budget(self, prompt_len: int, asked: int | None, default: int | None) -> int:
        """The answer's token budget: ``asked``, else ``default``, else the rest of the context."""
        limit = self.max_model_len
        if limit is not None and prompt_len >= limit:
            raise OpenAIError(
                400,
                f"the prompt has {prompt_len} tokens; this model's context is {limit} tokens",
                param="messages",
                code="context_length_exceeded",
            )
        room = None if limit is None else limit - prompt_len
        n = asked or default or room or 16
        if room is not None and n > room:
            raise OpenAIError(
                400,
                f"this model's context is {limit} tokens: the prompt has {prompt_len}, "
                f"so max_tokens must be at most {room} (got {n})",
                param="max_tokens",
                code="context_length_exceeded",
            )
        return n

    # ------------------------------------------------------------------ generation
    def choices_of(
        self, req: Any, prompts: list[list[int]], max_tokens: list[int], chunked: bool, top_n: int
    ) -> list[AsyncIterator[Piece]]:
        if self.episode is not None and isinstance(req, ChatCompletionRequest):  # the trained turn's sampling
            if req.temperature is None:
                req.temperature = self.episode.temperature
            if req.top_p is None:
                req.top_p = self.episode.top_p
        if top_n and self.scorer is None:
            raise OpenAIError(400, "top logprobs need an engine with a local model (hf)", param="top_logprobs")
        iters = []
        for ids, mt in zip(prompts, max_tokens, strict=True):
            for j in range(req.n):
                seed = None if req.seed is None else req.seed + j
                params = req.sampling(mt, seed)
                chunk = self.chunk_tokens if chunked or req.stream or req.stops else None
                iters.append(
                    generate_choice(
                        self.engine, ids, params, stops=req.stops, chunk=chunk, top_n=top_n, scorer=self.scorer
                    )
                )
        return iters

    @staticmethod
    async def collect(iters: list[AsyncIterator[Piece]]) -> list[Piece]:
        """Each choice's pieces joined into one."""
        whole = [Piece() for _ in iters]
        try:
            async for i, p in merge_choices(iters):
                join_piece(whole[i], p)
        except EngineError as e:
            raise OpenAIError(500, f"generation failed: {e}", code="engine_error") from e
        except ValueError as e:
            raise OpenAIError(400, str(e)) from e
        return whole

    @staticmethod
    def usage(prompts: list[list[int]], generated: int) -> dict[str, int]:
        p = sum(len(x) for x in prompts)
        return {"prompt_tokens": p, "completion_tokens": generated, "total_tokens": p + generated}

    # ------------------------------------------------------------------ /v1/completions
    def completion_logprobs(self, p: Piece, req: CompletionRequest, offset: int) -> dict[str, Any]:
        offsets = []
        for t in p.token_text:
            offsets.append(offset)
            offset += len(t)
        as_ids = req.return_tokens_as_token_ids
        tops = None
        if req.logprobs:
            tops = [
                {**{self.token_str(i, as_ids): lp for i, lp in top}, self.token_str(t, as_ids): lp0}
                for t, lp0, top in zip(p.token_ids, p.logprobs, p.top or [], strict=True)
            ]
        elif req.logprobs == 0:
            tops = [{self.token_str(t, as_ids): lp} for t, lp in zip(p.token_ids, p.logprobs, strict=True)]
        return {
            "tokens": [self.token_str(t, as_ids) for t in p.token_ids],
            "token_logprobs": list(p.logprobs),
            "top_logprobs": tops,
            "text_offset": offsets,
        }

    async def completion(self, req: CompletionRequest, episode: str | None = None) -> Answer:
        """``/v1/completions``; ``episode``: the agent episode the request's key belongs to (recorded)."""
        self.check_model(req.model)
        prompts, text_prompt = self.prompt_batch(req.prompt)
        default = (self.episode and self.episode.max_tokens) or self.default_max_tokens
        max_tokens = [self.budget(len(ids), req.max_tokens, default) for ids in prompts]
        iters = self.choices_of(req, prompts, max_tokens, text_prompt, req.logprobs or 0)
        first, started = self.reserve(episode, len(iters)), time.time()
        per_choice = [prompts[i // req.n] for i in range(len(iters))]
        rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        head = {"id": rid, "object": "text_completion", "created": created, "model": self.model_name}
        echo = [self.tok.decode(ids) if req.echo else "" for ids in prompts]

        def choice(i: int, p: Piece, text: str, offset: int) -> dict[str, Any]:
            c: dict[str, Any] = {
                "index": i,
                "text": text,
                "logprobs": None if req.logprobs is None else self.completion_logprobs(p, req, offset),
                "finish_reason": p.finish_reason,
                "stop_reason": p.stop_reason,
            }
            if req.return_token_ids:
                c["token_ids"] = list(p.token_ids)
                c["prompt_token_ids"] = prompts[i // req.n]
            return c

        if not req.stream:
            whole = await self.collect_recorded(iters, episode, first, "completion", per_choice, started)
            out = [choice(i, p, echo[i // req.n] + p.text, len(echo[i // req.n])) for i, p in enumerate(whole)]
            return {**head, "choices": out, "usage": self.usage(prompts, sum(p.generated for p in whole))}

        async def events() -> AsyncIterator[str]:
            sent = [len(echo[i // req.n]) for i in range(len(iters))]
            begun = [False] * len(iters)
            generated = 0
            async for i, p in self.recorded(merge_choices(iters), episode, first, "completion", per_choice, started):
                prefix = "" if begun[i] else echo[i // req.n]
                begun[i] = True
                generated += p.generated
                yield sse({**head, "choices": [choice(i, p, prefix + p.text, sent[i])]})
                sent[i] += len(p.text)
            if req.include_usage:
                yield sse({**head, "choices": [], "usage": self.usage(prompts, generated)})

        return events()

    # ------------------------------------------------------------------ /v1/chat/completions
    def chat_logprobs(self, p: Piece) -> dict[str, Any]:
        def entry(i: int, lp: float) -> dict[str, Any]:
            s = self.token_str(i)
            return {"token": s, "logprob": lp, "bytes": list(s.encode())}

        return {
            "content": [
                {**entry(t, lp), "top_logprobs": [entry(i, v) for i, v in (top or [])]}
                for t, lp, top in zip(p.token_ids, p.logprobs, p.top or [None] * len(p.token_ids), strict=True)
            ]
        }

    def chat_prompt(self, req: ChatCompletionRequest) -> tuple[list[int], ToolPlan]:
        """The conversation (and its tools) through the chat template, as token ids, and how tools are treated
        (a forced call's opening is prefilled after the generation prompt)."""
        messages = chat_messages(req.messages)
        if self.episode is not None:
            messages = self.episode.messages(messages)
            if not messages:
                raise OpenAIError(
                    400,
                    "this model was trained without a system message (its rockroll_episode.json): "
                    "send the observation as a user message",
                    param="messages",
                )
        plan = plan_tools(req, self.parser)
        try:
            text_prompt = render_chat(self.tok, messages, plan.tools, style=self.parser.name)
        except Exception as e:  # noqa: BLE001 - templates raise what they like on odd conversations
            raise OpenAIError(400, f"the chat template refused the messages: {e}", param="messages") from e
        return self.tok.encode(text_prompt + plan.prefill, add_special_tokens=False), plan

    def chat_message(self, text: str, plan: ToolPlan, prefix: str, index: int) -> dict[str, Any]:
        """The assistant message of an answer: its calls as ``tool_calls`` when the plan parses them."""
        if not plan.parse:
            return {"role": "assistant", "content": text}
        split = split_turn(self.parser, plan.prefill + text, prefix=prefix, index=index, parallel=plan.parallel)
        if not split.calls:
            return {"role": "assistant", "content": split.content}
        return {"role": "assistant", "content": split.content, "tool_calls": openai_tool_calls(split.calls)}

    async def chat_completion(self, req: ChatCompletionRequest, episode: str | None = None) -> Answer:
        """``/v1/chat/completions``; ``episode``: the agent episode the request's key belongs to (recorded)."""
        self.check_model(req.model)
        ids, plan = self.chat_prompt(req)
        default = self.episode.max_tokens if self.episode is not None else None
        max_tokens = self.budget(len(ids), req.max_completion_tokens or req.max_tokens, default)
        top_n = (req.top_logprobs or 0) if req.logprobs else 0
        iters = self.choices_of(req, [ids], [max_tokens], True, top_n)
        first, started = self.reserve(episode, len(iters)), time.time()
        per_choice = [ids] * len(iters)
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        head = {"id": rid, "created": created, "model": self.model_name, "system_fingerprint": None}
        prefix = f"call_{rid[-12:]}"

        def choice(i: int, p: Piece, c: dict[str, Any], finish: str | None) -> dict[str, Any]:
            c = {"index": i, **c, "finish_reason": finish}
            if req.return_token_ids:
                c["token_ids"] = list(p.token_ids)
                c["prompt_token_ids"] = ids
            return c

        if not req.stream:
            whole = await self.collect_recorded(iters, episode, first, "chat", per_choice, started)
            out = []
            for i, p in enumerate(whole):
                message = self.chat_message(p.text, plan, prefix, i)
                logprobs = self.chat_logprobs(p) if req.logprobs else None
                finish = "tool_calls" if message.get("tool_calls") else p.finish_reason
                out.append(choice(i, p, {"message": message, "logprobs": logprobs}, finish))
            usage = self.usage([ids], sum(p.generated for p in whole))
            return {**head, "object": "chat.completion", "choices": out, "usage": usage}

        async def events() -> AsyncIterator[str]:
            chunk_head = {**head, "object": "chat.completion.chunk"}
            streams = [ToolStream(self.parser, prefix=prefix, index=i, plan=plan) for i in range(len(iters))]
            for i in range(len(iters)):
                opening = {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None}
                yield sse({**chunk_head, "choices": [{**opening, "finish_reason": None}]})
            generated = 0
            async for i, p in self.recorded(merge_choices(iters), episode, first, "chat", per_choice, started):
                generated += p.generated
                text, calls = streams[i].feed(p.text), ()
                if p.finish_reason:
                    tail, calls = streams[i].finish()
                    text += tail
                delta = {"content": text} if text else {}
                logprobs = self.chat_logprobs(p) if req.logprobs and p.token_ids else None
                finish = None if calls else p.finish_reason
                if delta or logprobs or finish or (req.return_token_ids and p.token_ids):
                    yield sse({**chunk_head, "choices": [choice(i, p, {"delta": delta, "logprobs": logprobs}, finish)]})
                for d in tool_call_deltas(calls):
                    yield sse({**chunk_head, "choices": [_delta(i, {"tool_calls": [d]})]})
                if calls:
                    yield sse({**chunk_head, "choices": [_delta(i, {}, "tool_calls")]})
            if req.include_usage:
                yield sse({**chunk_head, "choices": [], "usage": self.usage([ids], generated)})

        return events()


def _delta(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
