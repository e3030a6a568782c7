"""An engine over any OpenAI-compatible server (vLLM, SGLang, TGI, ``rockroll serve-model``).

Each request is one ``POST /v1/completions`` with the prompt as token ids and ``logprobs=0``;
the server batches concurrent requests itself. How the response tokens are recovered, best first:

1. ``choices[0].token_ids`` (vLLM's ``return_token_ids``, ``rockroll serve-model``);
2. ``logprobs.tokens`` spelled ``token_id:<id>`` (vLLM's ``return_tokens_as_token_ids``);
3. re-tokenising ``text`` with the local tokenizer: ``tokens_exact=False`` on the result.

Logprobs come from ``logprobs.token_logprobs`` when the server returns one per token; otherwise
they are NaN and ``logprobs_exact=False``. When the server says ``finish_reason="stop"`` but the
stop token is not in the returned ids (servers that drop EOS), it is appended with a NaN logprob,
so that the response ends where the turn ended, as the engine contract says.

``vllm_extensions=True`` (default) sends vLLM's extra fields (``top_k``, ``stop_token_ids``,
``return_token_ids``, ``return_tokens_as_token_ids``, ``skip_special_tokens``); SGLang and
``rockroll serve-model`` accept them too. Turn it off for servers that reject unknown fields.
``mode="chat"`` plays through ``/v1/chat/completions`` instead, with the env's tools and the server's own
tool-call parser (:mod:`rockroll.agentrl.engines.chat_mode`): for playing and evaluating, not for training.
The engine cannot update the server's weights; the trainer must push weights to the server
itself and call :meth:`OpenAIEngine.set_weight_version`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rockroll.agentrl.engines.base import EngineError, GenerationRequest, GenerationResult, LLMEngine, SamplingParams
from rockroll.agentrl.engines.chat_mode import ChatReply, chat_messages_for_server, reply_from_choice
from rockroll.envs.tools import Tool
from rockroll.sandbox.retry import aretry_call

__all__ = ["OpenAIEngine"]


class _ServerError(EngineError):
    """A 5xx answer (retried)."""


_FINISH = {"stop": "stop", "length": "length", "eos": "stop", "abort": "aborted", "aborted": "aborted"}


class OpenAIEngine(LLMEngine):
    """Token-in/token-out generation through an OpenAI-compatible ``/v1/completions``.

    Args:
        base_url: server root, e.g. ``http://127.0.0.1:8000`` (``/v1`` is appended if missing).
        tokenizer: the served model's tokenizer, or a local path to load it from; needed for the
            re-tokenisation fallback and by env managers to build prompts.
        model: model id; None: the first id listed by ``/v1/models``.
        api_key: sent as a bearer token when given.
        timeout_s: per-request timeout.
        max_concurrency: most requests in flight at once.
        max_retries: retries of a request: connection errors (by the httpx transport), dropped
            connections and 5xx answers (:mod:`rockroll.sandbox.retry`); timeouts are not retried.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        tokenizer: Any,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        max_concurrency: int = 256,
        max_retries: int = 2,
        vllm_extensions: bool = True,
        mode: str = "completions",
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if mode not in ("completions", "chat"):
            raise ValueError(f"mode must be 'completions' (token ids, for training) or 'chat', got {mode!r}")
        #: chat mode: played through chat completions with tools (agentrl/engines/chat_mode.py), not for training
        self.chat_mode = mode == "chat"
        if isinstance(tokenizer, (str, Path)):
            from rockroll.agentrl.models.tiny import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        url = base_url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else url + "/v1"
        self.tokenizer = tokenizer
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.vllm_extensions = vllm_extensions
        self.weight_version = 0
        eos = getattr(tokenizer, "eos_token_id", None)
        self.eos_token_id: int | None = int(eos) if eos is not None else None
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def set_weight_version(self, version: int) -> None:
        """Tag later results with ``version`` (after the trainer updated the server's weights)."""
        self.weight_version = int(version)

    # ----------------------------------------------------------------- HTTP
    def _http(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:  # clients and semaphores are bound to a loop
            self._loop = loop
            import httpx

            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            limits = httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency)
            transport = httpx.AsyncHTTPTransport(retries=self.max_retries, limits=limits)  # connection errors
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=headers, timeout=self.timeout_s, transport=transport
            )
            self._sem = asyncio.Semaphore(self.max_concurrency)
        return self._client

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import httpx

        client = self._http()

        async def once() -> dict[str, Any]:
            resp = await client.request(method, path, json=body)
            if resp.status_code >= 400:
                error = _ServerError if resp.status_code >= 500 else EngineError
                raise error(f"{method} {path} -> {resp.status_code}: {resp.text[:500]}")
            return resp.json()

        # a generation changes nothing on the server: resending it after a drop or a 5xx is safe
        resend = (_ServerError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
        try:
            return await aretry_call(once, retry_on=resend, attempts=self.max_retries + 1)
        except (_ServerError, httpx.HTTPError) as e:  # connection errors: after the transport's retries
            raise EngineError(f"{method} {self.base_url}{path} failed: {e}") from e

    async def _model_id(self) -> str:
        if self.model is None:
            data = await self._request("GET", "/models")
            models = data.get("data") or []
            if not models:
                raise EngineError(f"{self.base_url}/models lists no model")
            self.model = str(models[0]["id"])
        return self.model

    # ------------------------------------------------------------------ API
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """One completion for ``request`` (see the module docstring for token/logprob recovery)."""
        if not request.prompt_ids:
            raise ValueError("prompt_ids must not be empty")
        sp = request.params
        body: dict[str, Any] = {
            "model": await self._model_id(),
            "prompt": list(request.prompt_ids),
            "max_tokens": sp.max_new_tokens,
            "temperature": sp.temperature,
            "top_p": sp.top_p,
            "logprobs": 0,  # the sampled tokens' logprobs, no alternatives (vLLM, OpenAI)
            "n": 1,
        }
        if sp.seed is not None:
            body["seed"] = sp.seed
        if self.vllm_extensions:
            body.update(
                return_token_ids=True,
                return_tokens_as_token_ids=True,
                skip_special_tokens=False,
                stop_token_ids=list(sp.stop_token_ids),
            )
            if sp.top_k > 0:
                body["top_k"] = sp.top_k
        version = self.weight_version
        self._http()
        async with self._sem:  # type: ignore[union-attr]
            data = await self._request("POST", "/completions", body)
        return self._parse(data, request, version)

    async def chat(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Tool], params: SamplingParams
    ) -> ChatReply:
        """One chat completion of ``messages`` with ``tools`` (chat mode): the server's template renders them and
        its own parser reads the calls (:mod:`rockroll.agentrl.engines.chat_mode`)."""
        body: dict[str, Any] = {
            "model": await self._model_id(),
            "messages": chat_messages_for_server(messages),
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "n": 1,
        }
        if tools:
            body.update(tools=[t.to_openai() for t in tools], tool_choice="auto")
        if params.seed is not None:
            body["seed"] = params.seed
        self._http()
        async with self._sem:  # type: ignore[union-attr]
            data = await self._request("POST", "/chat/completions", body)
        try:
            choice = data["choices"][0]
        except (KeyError, IndexError, TypeError) as e:
            raise EngineError(f"malformed chat completion response: {str(data)[:300]}") from e
        return reply_from_choice(choice)

    def _parse(self, data: dict[str, Any], request: GenerationRequest, version: int) -> GenerationResult:
        try:
            choice = data["choices"][0]
        except (KeyError, IndexError, TypeError) as e:
            raise EngineError(f"malformed completion response: {str(data)[:300]}") from e
        lp = choice.get("logprobs") or {}
        tokens_exact = True
        ids: list[int] | None = None
        if isinstance(choice.get("token_ids"), list):
            ids = [int(t) for t in choice["token_ids"]]
        elif lp.get("tokens") and all(str(t).startswith("token_id:") for t in lp["tokens"]):
            ids = [int(str(t).split(":", 1)[1]) for t in lp["tokens"]]
        else:
            ids = list(self.tokenizer.encode(choice.get("text") or "", add_special_tokens=False))
            tokens_exact = False
        raw_lps = lp.get("token_logprobs")
        if tokens_exact and isinstance(raw_lps, list) and len(raw_lps) == len(ids):
            logprobs = [float("nan") if x is None else float(x) for x in raw_lps]
        else:
            logprobs = [float("nan")] * len(ids)
        finish = _FINISH.get(str(choice.get("finish_reason")), "stop")
        stops = set(request.params.stop_token_ids)
        if self.eos_token_id is not None:
            stops.add(self.eos_token_id)
        if finish == "stop" and stops and (not ids or ids[-1] not in stops):
            reason = choice.get("stop_reason")
            if reason is None or isinstance(reason, int):  # stopped on a token, not a stop string
                ids.append(int(reason) if isinstance(reason, int) else int(self.eos_token_id or next(iter(stops))))
                logprobs.append(float("nan"))
        return GenerationResult(
            token_ids=ids,
            logprobs=logprobs,
            finish_reason=finish,  # type: ignore[arg-type]
            weight_version=version,
            tokens_exact=tokens_exact,
            logprobs_exact=not any(math.isnan(x) for x in logprobs),
        )

    async def close(self) -> None:
        """Close the HTTP client (idempotent).

        The client belongs to the event loop that made it: closed there when that is the running
        loop; a client of a loop that has ended (``asyncio.run`` returned) is dropped, its
        connections having gone with their loop.
        """
        client, loop = self._client, self._loop
        self._client, self._loop, self._sem = None, None, None
        if client is None:
            return
        if loop is asyncio.get_running_loop():
            await client.aclose()
        elif loop is not None and not loop.is_closed() and loop.is_running():  # another thread's loop
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(client.aclose(), loop))
