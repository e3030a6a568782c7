"""A small OpenAI-compatible server over the hf engine (``rockroll serve-model MODEL_PATH``).

Endpoints: ``GET /v1/models``, ``POST /v1/completions`` (``prompt`` as text or token ids;
``logprobs`` returns the sampled tokens' logprobs), ``POST /v1/chat/completions`` (the
tokenizer's chat template), ``GET /health``. Concurrent requests share the engine's batches.

vLLM's extensions are understood: ``top_k``, ``stop_token_ids``, ``return_tokens_as_token_ids``
(logprob tokens spelled ``token_id:<id>``) and ``return_token_ids`` (a ``token_ids`` list on each
choice). Unknown request fields are ignored, as OpenAI clients send many. ``top_logprobs`` is
always null: the engine returns only the sampled token's logprob (under temperature 1). Only
``n=1`` is served.

Threat model: a local development and test server; no authentication, bind it to 127.0.0.1.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, LLMEngine, SamplingParams

__all__ = ["create_app", "serve_model", "CompletionRequest", "ChatCompletionRequest"]

MAX_TOKENS_LIMIT = 32_768


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str = ""
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)
    temperature: float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=-1)
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=1)
    stop_token_ids: list[int] = Field(default_factory=list, max_length=64)
    return_token_ids: bool = False

    def sampling(self, default_max: int) -> SamplingParams:
        return SamplingParams(
            max_new_tokens=self.max_tokens or default_max,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=max(self.top_k, 0),
            stop_token_ids=list(self.stop_token_ids),
            seed=self.seed,
        )


class CompletionRequest(_Sampling):
    """``POST /v1/completions`` (OpenAI legacy completions, with vLLM's extensions)."""

    prompt: str | list[int] | list[list[int]] | list[str]
    logprobs: int | None = Field(default=None, ge=0, le=20)
    return_tokens_as_token_ids: bool = False
    echo: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: str = Field(max_length=64)
    content: str


class ChatCompletionRequest(_Sampling):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)


_FINISH = {"stop": "stop", "length": "length", "aborted": "abort"}


def _usage(prompt_len: int, res: GenerationResult) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_len,
        "completion_tokens": len(res.token_ids),
        "total_tokens": prompt_len + len(res.token_ids),
    }


def create_app(engine: LLMEngine, model_name: str = "rockroll-model", default_max_tokens: int = 16) -> Any:
    """The FastAPI app serving ``engine`` under the model id ``model_name``."""
    from fastapi import FastAPI, HTTPException

    tok = engine.tokenizer
    app = FastAPI(title="rockroll model server", version="1")

    def token_text(i: int) -> str:
        return tok.decode([i], skip_special_tokens=False)

    def prompt_ids(prompt: str | list[int] | list[list[int]] | list[str]) -> list[int]:
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (list, str)):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            ids = tok.encode(prompt, add_special_tokens=False)
        elif prompt and all(isinstance(x, int) for x in prompt):
            ids = list(prompt)  # type: ignore[arg-type]
        else:
            raise HTTPException(status_code=400, detail="prompt must be one string or one list of token ids")
        if not ids:
            raise HTTPException(status_code=400, detail="prompt is empty")
        if max(ids) >= len(tok) or min(ids) < 0:
            raise HTTPException(status_code=400, detail=f"token ids must be in [0, {len(tok)})")
        return ids

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "weight_version": engine.weight_version}

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "rockroll"}],
        }

    @app.post("/v1/completions")
    async def create_completion(req: CompletionRequest) -> dict[str, Any]:
        ids = prompt_ids(req.prompt)
        res = await engine.generate(GenerationRequest(ids, req.sampling(default_max_tokens)))
        text = tok.decode(res.token_ids, skip_special_tokens=True)
        choice: dict[str, Any] = {
            "index": 0,
            "text": (tok.decode(ids) if req.echo else "") + text,
            "logprobs": None,
            "finish_reason": _FINISH[res.finish_reason],
            "stop_reason": res.token_ids[-1] if res.finish_reason == "stop" and res.token_ids else None,
        }
        if req.logprobs is not None:
            pieces = [f"token_id:{i}" if req.return_tokens_as_token_ids else token_text(i) for i in res.token_ids]
            offsets, pos = [], 0
            for i in res.token_ids:
                offsets.append(pos)
                pos += len(token_text(i))
            choice["logprobs"] = {
                "tokens": pieces,
                "token_logprobs": list(res.logprobs),
                "top_logprobs": None,
                "text_offset": offsets,
            }
        if req.return_token_ids:
            choice["token_ids"] = list(res.token_ids)
            choice["prompt_token_ids"] = ids
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [choice],
            "usage": _usage(len(ids), res),
            "weight_version": res.weight_version,
        }

    @app.post("/v1/chat/completions")
    async def create_chat_completion(req: ChatCompletionRequest) -> dict[str, Any]:
        messages = [{"role": m.role, "content": m.content} for m in req.messages]
        text_prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tok.encode(text_prompt, add_special_tokens=False)
        params = req.sampling(default_max_tokens)
        if req.max_completion_tokens:
            params.max_new_tokens = req.max_completion_tokens
        res = await engine.generate(GenerationRequest(ids, params))
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": tok.decode(res.token_ids, skip_special_tokens=True)},
            "logprobs": None,
            "finish_reason": _FINISH[res.finish_reason],
        }
        if req.logprobs:
            choice["logprobs"] = {
                "content": [
                    {
                        "token": token_text(i),
                        "logprob": lp,
                        "bytes": list(token_text(i).encode()),
                        "top_logprobs": [],
                    }
                    for i, lp in zip(res.token_ids, res.logprobs, strict=True)
                ]
            }
        if req.return_token_ids:
            choice["token_ids"] = list(res.token_ids)
            choice["prompt_token_ids"] = ids
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [choice],
            "usage": _usage(len(ids), res),
        }

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
    app = create_app(engine, model_name=model_name or str(model_path))
    uvicorn.run(app, host=host, port=port, log_level="warning")
