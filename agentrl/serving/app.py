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
text, stop strings and streaming are made from the engine's tokens: :mod:`rockroll.agentrl.serving.decode`.

vLLM's extensions are understood: ``top_k``, ``stop_token_ids``, ``return_tokens_as_token_ids``
(logprob tokens spelled ``token_id:<id>``) and ``return_token_ids`` (``token_ids`` and
``prompt_token_ids`` on each choice); a completion's ``stop_reason`` is the stop token id or string.
Logprobs are the engine's (raw model, temperature 1). The top alternatives come from one forward
pass of the model over prompt and answer (``top_logprobs`` needs an engine with a local ``model``,
the hf engine); they agree with the sampled tokens' logprobs within float tolerance.

Tools (OpenAI's ``tools``, ``tool_choice``, ``parallel_tool_calls``; assistant ``tool_calls`` and ``tool``
messages; ``tool_calls`` in answers and streams): :mod:`rockroll.agentrl.serving.tool_calls`, read in the
style of ``tool_call_parser`` (``--tool-call-parser``; default: what the export records, else ``hermes``).

Errors are OpenAI's ``{"error": {"message", "type", "param", "code"}}``
(:mod:`rockroll.agentrl.serving.protocol`). An export of a training run is served as it was trained:
its ``rockroll_episode.json`` sets the chat defaults (:mod:`rockroll.agentrl.serving.episode`).

Threat model (:mod:`rockroll.agentrl.serving.guard`): with ``api_key`` set every route but ``/health``
needs it (401 otherwise); bodies past ``max_body_bytes`` are refused while read (413); a client that
disconnects stops its generation; SIGTERM stops the server within ``SHUTDOWN_S`` even mid-request.
Without a key, bind it to 127.0.0.1.

Why not vLLM or TGI's server: they need a GPU build and load models their own way; this serves the
engine rockroll trains with (CPU or CUDA, the tiny test model, weights shared with the trainer).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.requests import Request

from rockroll.agentrl.engines.base import LLMEngine
from rockroll.agentrl.serving.episode import EpisodeDefaults, load_episode
from rockroll.agentrl.serving.guard import (
    EPISODE_STATE,
    MAX_BODY_BYTES,
    ClientGone,
    ServeGuard,
    until_disconnected,
)
from rockroll.agentrl.serving.protocol import (
    SSE_DONE,
    ChatCompletionRequest,
    CompletionRequest,
    OpenAIError,
    error_body,
    install_error_handlers,
    sse,
)
from rockroll.agentrl.serving.recording import CallRecorder
from rockroll.agentrl.serving.service import Answer, ModelService
from rockroll.agentrl.serving.tool_calls import DEFAULT_PARSER, recorded_parser

__all__ = ["create_app", "serve_model", "CompletionRequest", "ChatCompletionRequest"]

SHUTDOWN_S = 2  # seconds SIGTERM waits for running requests before cancelling them


def create_app(
    engine: LLMEngine,
    model_name: str = "rockroll-model",
    default_max_tokens: int = 16,
    max_model_len: int | None = None,
    chunk_tokens: int = 8,
    *,
    episode: EpisodeDefaults | None = None,
    api_key: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    tool_call_parser: str = DEFAULT_PARSER,
    recorder: CallRecorder | None = None,
) -> Any:
    """The FastAPI app serving ``engine`` under the model id ``model_name``.

    ``max_model_len``: the model's context (prompt + answer; None: unchecked); ``chunk_tokens``:
    tokens per engine request of a chunked choice (see :mod:`rockroll.agentrl.serving.decode`);
    ``episode``: the trained turn's defaults; ``api_key``: the key every route but /health needs;
    ``tool_call_parser``: the style tool calls are read in (:data:`rockroll.agentrl.tools.TOOL_PARSERS`);
    ``recorder``: agent episodes' keys and calls (:mod:`rockroll.agentrl.serving.recording`): a request with an
    episode's key is recorded as that episode's.
    """
    from fastapi import FastAPI
    from fastapi.responses import Response

    service = ModelService(
        engine, model_name, default_max_tokens, max_model_len, chunk_tokens, episode, tool_call_parser, recorder
    )
    app = FastAPI(title="rockroll model server", version="1")
    install_error_handlers(app)
    app.add_middleware(ServeGuard, api_key=api_key, max_body_bytes=max_body_bytes, episodes=recorder)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        stats = getattr(engine, "stats", {})
        return {"status": "ok", "weight_version": engine.weight_version, "running": stats.get("running")}

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [service.card]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str) -> dict[str, Any]:
        service.check_model(model_id or "?")
        return service.card

    @app.post("/v1/completions")
    async def create_completion(req: CompletionRequest, request: Request) -> Any:
        try:
            return _respond(await until_disconnected(request, service.completion(req, _episode(request))))
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the client left

    @app.post("/v1/chat/completions")
    async def create_chat_completion(req: ChatCompletionRequest, request: Request) -> Any:
        try:
            return _respond(await until_disconnected(request, service.chat_completion(req, _episode(request))))
        except ClientGone:
            return Response(status_code=499)

    return app


def _episode(request: Request) -> str | None:
    """The agent episode whose key the request carries (set by the guard), or None."""
    return request.scope.get("state", {}).get(EPISODE_STATE)


def _respond(answer: Answer) -> Any:
    """A JSON body as it is; a stream as server-sent events (an error after the status line goes in the stream)."""
    if isinstance(answer, dict):
        return answer
    from fastapi.responses import StreamingResponse

    async def body() -> AsyncIterator[str]:
        try:
            async for e in answer:
                yield e
        except OpenAIError as e:
            yield sse(error_body(e))
        except Exception as e:  # noqa: BLE001 - the status line is sent: report it in the stream
            yield sse(error_body(OpenAIError(500, f"generation failed: {type(e).__name__}: {e}")))
        yield SSE_DONE

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def serve_model(
    model_path: str,
    host: str = "127.0.0.1",
    port: int = 8001,
    device: str = "cpu",
    model_name: str | None = None,
    max_batch_size: int = 64,
    num_threads: int | None = 1,
    seed: int = 0,
    *,
    use_episode: bool = True,
    api_key: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    tool_call_parser: str | None = None,
) -> None:
    """Load ``model_path`` into an :class:`~rockroll.agentrl.engines.hf.HFEngine` and serve it (blocks).

    ``use_episode``: apply the export's ``rockroll_episode.json`` (see the module docstring);
    ``tool_call_parser``: the tool-call style (None: the one the export records, else ``hermes``).
    Raises FileNotFoundError, before loading anything, for a folder that is not a model.
    """
    import uvicorn

    from rockroll.agentrl.engines import make_engine

    path = Path(model_path)
    if not path.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such model directory", str(path))
    if not (path / "config.json").is_file():
        raise FileNotFoundError(errno.ENOENT, "not a Hugging Face model directory (no config.json)", str(path))
    episode = load_episode(path) if use_episode else None
    parser = tool_call_parser or recorded_parser(path) or DEFAULT_PARSER
    print(f"loading {path} on {device} ...", flush=True)  # a big model takes a while: say so at once
    engine: Any = make_engine(
        "hf", model_path=model_path, device=device, max_batch_size=max_batch_size, num_threads=num_threads, seed=seed
    )
    context = getattr(getattr(engine.model, "config", None), "max_position_embeddings", None)
    name = model_name or str(model_path)
    app = create_app(
        engine,
        model_name=name,
        max_model_len=int(context) if context else None,
        episode=episode,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        tool_call_parser=parser,
    )
    if episode is not None:
        print(f"as trained ({episode.source.name}; --no-episode turns it off): {episode.describe()}", flush=True)
    print(f"tool calls read in the {parser} style (--tool-call-parser)", flush=True)
    auth = "API key required" if api_key else "no API key: keep it on 127.0.0.1"
    sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    port = int(sock.getsockname()[1])  # the port bound (--port 0: a free one, named below)
    print(f"serving {name} on http://{host}:{port}/v1 (OpenAI-compatible; {auth}; Ctrl-C stops)", flush=True)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=SHUTDOWN_S)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
