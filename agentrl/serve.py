"""An OpenAI-compatible server over an engine (``rockroll serve-model MODEL_PATH``).

Endpoints: ``GET /v1/models`` (and ``/v1/models/{id}``), ``POST /v1/completions`` (``prompt`` as
text, token ids, or a batch of either), ``POST /v1/chat/completions`` (the tokenizer's chat
template), ``GET /health``. Concurrent requests share the engine's batches.

What a request may ask for, as OpenAI defines it: ``stream`` (server-sent events ending with
``data: [DONE]``; ``stream_options.include_usage`` adds a usage chunk), ``stop`` (strings; the
text ends where one begins), ``n`` (choices, seeded ``seed``, ``seed + 1``, ...), ``max_tokens``
(chat: ``max_completion_tokens`` too; default: 16 for completions, the rest of the context for
chat), ``seed``, ``temperature``, ``top_p``, ``logprobs`` and ``top_logprobs`` (completions:
``logprobs=k`` gives the ``k`` most likely tokens at each position, ``0`` only the sampled one).
``model`` must be the served model's id (404 ``model_not_found`` otherwise; empty means it). How
text, stop strings and streaming are made from the engine's tokens: :mod:`rockroll.agentrl.serve_decode`.

vLLM's extensions are understood: ``top_k``, ``stop_token_ids``, ``return_tokens_as_token_ids``
(logprob tokens spelled ``token_id:<id>``) and ``return_token_ids`` (``token_ids`` and
``prompt_token_ids`` on each choice); a completion's ``stop_reason`` is the stop token id or string.
Logprobs are the engine's (raw model, temperature 1). The top alternatives come from one forward
pass of the model over prompt and answer (``top_logprobs`` needs an engine with a local ``model``,
the hf engine); they agree with the sampled tokens' logprobs within float tolerance.

Errors are OpenAI's ``{"error": {"message", "type", "param", "code"}}``
(:mod:`rockroll.agentrl.serve_protocol`). Threat model: a local development and test server with no
authentication: bind it to 127.0.0.1.

Why not vLLM or TGI's server: they need a GPU build and load models their own way; this serves the
engine rockroll trains with (CPU or CUDA, the tiny test model, weights shared with the trainer).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from rockroll.agentrl.engines.base import EngineError, LLMEngine
from rockroll.agentrl.serve_decode import Piece, TopScorer, generate_choice, merge_choices
from rockroll.agentrl.serve_protocol import (
    SSE_DONE,
    ChatCompletionRequest,
    CompletionRequest,
    OpenAIError,
    error_body,
    install_error_handlers,
    sse,
)

__all__ = ["create_app", "serve_model", "CompletionRequest", "ChatCompletionRequest"]

MAX_PROMPTS = 64


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


def create_app(
    engine: LLMEngine,
    model_name: str = "rockroll-model",
    default_max_tokens: int = 16,
    max_model_len: int | None = None,
    chunk_tokens: int = 8,
) -> Any:
    """The FastAPI app serving ``engine`` under the model id ``model_name``.

    ``max_model_len``: the model's context (prompt + answer; None: unchecked); ``chunk_tokens``:
    tokens per engine request of a chunked choice (see :mod:`rockroll.agentrl.serve_decode`).
    """
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    tok = engine.tokenizer
    vocab = len(tok)
    app = FastAPI(title="rockroll model server", version="1")
    install_error_handlers(app)
    scorer = _top_scorer(engine)
    card = {"id": model_name, "object": "model", "created": 0, "owned_by": "rockroll", "max_model_len": max_model_len}

    def check_model(name: str) -> None:
        if name and name != model_name:
            raise OpenAIError(
                404,
                f"The model `{name}` does not exist. This server serves `{model_name}` (see /v1/models).",
                param="model",
                code="model_not_found",
            )

    def token_str(i: int, as_ids: bool = False) -> str:
        return f"token_id:{i}" if as_ids else tok.decode([i], skip_special_tokens=False)

    def prompt_batch(prompt: Any) -> tuple[list[list[int]], bool]:
        """Token ids of each prompt, and whether any was text."""
        items = prompt if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)) else [prompt]
        if len(items) > MAX_PROMPTS:
            raise OpenAIError(400, f"at most {MAX_PROMPTS} prompts per request", param="prompt")
        out, text = [], False
        for p in items:
            ids = tok.encode(p, add_special_tokens=False) if isinstance(p, str) else list(p)
            text = text or isinstance(p, str)
            if not ids:
                raise OpenAIError(400, "prompt is empty", param="prompt")
            if max(ids) >= vocab or min(ids) < 0:
                raise OpenAIError(400, f"prompt token ids must be in [0, {vocab})", param="prompt")
            out.append(ids)
        return out, text

    def budget(prompt_len: int, asked: int | None, default: int | None) -> int:
        if max_model_len is not None and prompt_len >= max_model_len:
            raise OpenAIError(
                400,
                f"the prompt has {prompt_len} tokens; this model's context is {max_model_len} tokens",
                param="messages",
                code="context_length_exceeded",
            )
        room = None if max_model_len is None else max_model_len - prompt_len
        n = asked or default or room or 16
        if room is not None and n > room:
            raise OpenAIError(
                400,
                f"this model's context is {max_model_len} tokens: the prompt has {prompt_len}, "
                f"so max_tokens must be at most {room} (got {n})",
                param="max_tokens",
                code="context_length_exceeded",
            )
        return n

    def choices_of(req: Any, prompts: list[list[int]], max_tokens: list[int], chunked: bool, top_n: int) -> list[Any]:
        if top_n and scorer is None:
            raise OpenAIError(400, "top logprobs need an engine with a local model (hf)", param="top_logprobs")
        iters = []
        for ids, mt in zip(prompts, max_tokens, strict=True):
            for j in range(req.n):
                seed = None if req.seed is None else req.seed + j
                params = req.sampling(mt, seed)
                chunk = chunk_tokens if chunked or req.stream or req.stops else None
                iters.append(
                    generate_choice(engine, ids, params, stops=req.stops, chunk=chunk, top_n=top_n, scorer=scorer)
                )
        return iters

    async def collect(iters: list[AsyncIterator[Piece]]) -> list[Piece]:
        whole = [Piece() for _ in iters]
        try:
            async for i, p in merge_choices(iters):
                w = whole[i]
                w.token_ids += p.token_ids
                w.logprobs += p.logprobs
                w.token_text += p.token_text
                w.top = None if p.top is None else (w.top or []) + p.top
                w.text += p.text
                w.generated += p.generated
                w.finish_reason, w.stop_reason = p.finish_reason, p.stop_reason
        except EngineError as e:
            raise OpenAIError(500, f"generation failed: {e}", code="engine_error") from e
        except ValueError as e:
            raise OpenAIError(400, str(e)) from e
        return whole

    def usage(prompts: list[list[int]], generated: int) -> dict[str, int]:
        p = sum(len(x) for x in prompts)
        return {"prompt_tokens": p, "completion_tokens": generated, "total_tokens": p + generated}

    def stream_response(events: AsyncIterator[str]) -> Any:
        async def body() -> AsyncIterator[str]:
            try:
                async for e in events:
                    yield e
            except OpenAIError as e:
                yield sse(error_body(e))
            except Exception as e:  # noqa: BLE001 - the status line is sent: report it in the stream
                yield sse(error_body(OpenAIError(500, f"generation failed: {type(e).__name__}: {e}")))
            yield SSE_DONE

        return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    # ------------------------------------------------------------------------------ routes
    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "weight_version": engine.weight_version}

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [card]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str) -> dict[str, Any]:
        check_model(model_id or "?")
        return card

    def completion_logprobs(p: Piece, req: CompletionRequest, offset: int) -> dict[str, Any]:
        offsets = []
        for t in p.token_text:
            offsets.append(offset)
            offset += len(t)
        as_ids = req.return_tokens_as_token_ids
        tops = None
        if req.logprobs:
            tops = [
                {**{token_str(i, as_ids): lp for i, lp in top}, token_str(t, as_ids): lp0}
                for t, lp0, top in zip(p.token_ids, p.logprobs, p.top or [], strict=True)
            ]
        elif req.logprobs == 0:
            tops = [{token_str(t, as_ids): lp} for t, lp in zip(p.token_ids, p.logprobs, strict=True)]
        return {
            "tokens": [token_str(t, as_ids) for t in p.token_ids],
            "token_logprobs": list(p.logprobs),
            "top_logprobs": tops,
            "text_offset": offsets,
        }

    @app.post("/v1/completions")
    async def create_completion(req: CompletionRequest) -> Any:
        check_model(req.model)
        prompts, text_prompt = prompt_batch(req.prompt)
        max_tokens = [budget(len(ids), req.max_tokens, default_max_tokens) for ids in prompts]
        iters = choices_of(req, prompts, max_tokens, text_prompt, req.logprobs or 0)
        rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        head = {"id": rid, "object": "text_completion", "created": created, "model": model_name}
        echo = [tok.decode(ids) if req.echo else "" for ids in prompts]

        def choice(i: int, p: Piece, text: str, offset: int) -> dict[str, Any]:
            c: dict[str, Any] = {
                "index": i,
                "text": text,
                "logprobs": None if req.logprobs is None else completion_logprobs(p, req, offset),
                "finish_reason": p.finish_reason,
                "stop_reason": p.stop_reason,
            }
            if req.return_token_ids:
                c["token_ids"] = list(p.token_ids)
                c["prompt_token_ids"] = prompts[i // req.n]
            return c

        if not req.stream:
            whole = await collect(iters)
            out = [choice(i, p, echo[i // req.n] + p.text, len(echo[i // req.n])) for i, p in enumerate(whole)]
            return {**head, "choices": out, "usage": usage(prompts, sum(p.generated for p in whole))}

        async def events() -> AsyncIterator[str]:
            sent = [len(echo[i // req.n]) for i in range(len(iters))]
            started = [False] * len(iters)
            generated = 0
            async for i, p in merge_choices(iters):
                prefix = "" if started[i] else echo[i // req.n]
                started[i] = True
                generated += p.generated
                yield sse({**head, "choices": [choice(i, p, prefix + p.text, sent[i])]})
                sent[i] += len(p.text)
            if req.include_usage:
                yield sse({**head, "choices": [], "usage": usage(prompts, generated)})

        return stream_response(events())

    def chat_logprobs(p: Piece) -> dict[str, Any]:
        def entry(i: int, lp: float, text: str | None = None) -> dict[str, Any]:
            s = token_str(i) if text is None else text
            return {"token": s, "logprob": lp, "bytes": list(s.encode())}

        return {
            "content": [
                {**entry(t, lp), "top_logprobs": [entry(i, v) for i, v in (top or [])]}
                for t, lp, top in zip(p.token_ids, p.logprobs, p.top or [None] * len(p.token_ids), strict=True)
            ]
        }

    @app.post("/v1/chat/completions")
    async def create_chat_completion(req: ChatCompletionRequest) -> Any:
        check_model(req.model)
        messages = [{"role": m.role, "content": m.text()} for m in req.messages]
        try:
            text_prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        except Exception as e:  # noqa: BLE001 - templates raise what they like on odd conversations
            raise OpenAIError(400, f"the chat template refused the messages: {e}", param="messages") from e
        ids = tok.encode(text_prompt, add_special_tokens=False)
        max_tokens = budget(len(ids), req.max_completion_tokens or req.max_tokens, None)
        top_n = (req.top_logprobs or 0) if req.logprobs else 0
        iters = choices_of(req, [ids], [max_tokens], True, top_n)
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        head = {"id": rid, "created": created, "model": model_name, "system_fingerprint": None}

        def extras(c: dict[str, Any], p: Piece) -> dict[str, Any]:
            if req.return_token_ids:
                c["token_ids"] = list(p.token_ids)
                c["prompt_token_ids"] = ids
            return c

        if not req.stream:
            whole = await collect(iters)
            out = [
                extras(
                    {
                        "index": i,
                        "message": {"role": "assistant", "content": p.text},
                        "logprobs": chat_logprobs(p) if req.logprobs else None,
                        "finish_reason": p.finish_reason,
                    },
                    p,
                )
                for i, p in enumerate(whole)
            ]
            return {
                **head,
                "object": "chat.completion",
                "choices": out,
                "usage": usage([ids], sum(p.generated for p in whole)),
            }

        async def events() -> AsyncIterator[str]:
            chunk_head = {**head, "object": "chat.completion.chunk"}
            for i in range(len(iters)):
                first = {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None}
                yield sse({**chunk_head, "choices": [{**first, "finish_reason": None}]})
            generated = 0
            async for i, p in merge_choices(iters):
                generated += p.generated
                delta = {"content": p.text} if p.text else {}
                c = {
                    "index": i,
                    "delta": delta,
                    "logprobs": chat_logprobs(p) if req.logprobs and p.token_ids else None,
                    "finish_reason": p.finish_reason,
                }
                if delta or c["logprobs"] or p.finish_reason:
                    yield sse({**chunk_head, "choices": [extras(c, p)]})
            if req.include_usage:
                yield sse({**chunk_head, "choices": [], "usage": usage([ids], generated)})

        return stream_response(events())

    return app


def serve_model(
    model_path: str,
    host: str = "127.0.0.1",
    port: int = 8001,
    device: str = "cpu",
    model_name: str | None = None,
    max_batch_size: int = 64,
    num_threads: int | None = 1,
    seed: int = 0,
) -> None:
    """Load ``model_path`` into an :class:`~rockroll.agentrl.engines.hf.HFEngine` and serve it (blocks)."""
    import uvicorn

    from rockroll.agentrl.engines.hf import HFEngine

    engine = HFEngine(model_path, device=device, max_batch_size=max_batch_size, num_threads=num_threads, seed=seed)
    context = getattr(getattr(engine.model, "config", None), "max_position_embeddings", None)
    name = model_name or str(model_path)
    app = create_app(engine, model_name=name, max_model_len=int(context) if context else None)
    print(f"serving {name} on http://{host}:{port}/v1 (OpenAI-compatible; Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
