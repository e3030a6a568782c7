"""The OpenAI wire format of ``rockroll serve-model``: request models, errors, server-sent events.

Requests are validated by pydantic; unknown fields are ignored (OpenAI clients send many), known
ones the server cannot honour (penalties, ``logit_bias``, ``best_of``, the legacy ``functions``, ...)
are refused with a 400 naming them rather than silently dropped. Chat requests may declare ``tools``
(OpenAI function tools, checked by :func:`rockroll.envs.tools.check_tools`: a 400 with
``param="tools"`` naming the entry) and a ``tool_choice``; their messages may carry the assistant's
``tool_calls`` (arguments as JSON text) and ``tool`` results (:mod:`rockroll.agentrl.serving.tool_calls`). Every error is OpenAI's
``{"error": {"message", "type", "param", "code"}}`` (:class:`OpenAIError`,
:func:`install_error_handlers`): a validation error is a 400 ``invalid_request_error`` whose
``param`` is the field, an unknown model a 404 ``model_not_found``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictInt, field_validator, model_validator

from rockroll.agentrl.engines.base import SamplingParams
from rockroll.envs.errors import EnvConfigError
from rockroll.envs.tools import Tool, check_tools

__all__ = [
    "ChatCompletionRequest",
    "ChatMessage",
    "MessageToolCall",
    "CompletionRequest",
    "OpenAIError",
    "error_body",
    "install_error_handlers",
    "sse",
    "SSE_DONE",
]

MAX_TOKENS_LIMIT = 32_768
MAX_N = 16
MAX_TOP_LOGPROBS = 20
MAX_TOOLS = 128
TOOL_CHOICES = ("auto", "none", "required")
SSE_DONE = "data: [DONE]\n\n"


class OpenAIError(Exception):
    """An error answered in OpenAI's shape (``status``: the HTTP status)."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None, kind: str = ""
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.kind = kind or ("invalid_request_error" if status < 500 else "server_error")


def error_body(e: OpenAIError) -> dict[str, Any]:
    return {"error": {"message": e.message, "type": e.kind, "param": e.param, "code": e.code}}


def sse(data: dict[str, Any]) -> str:
    """One server-sent event carrying ``data`` as JSON."""
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


def install_error_handlers(app: Any) -> None:
    """Answer validation errors, HTTP errors (404 route, 405) and :class:`OpenAIError` in OpenAI's shape."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    def reply(e: OpenAIError) -> Any:
        return JSONResponse(error_body(e), status_code=e.status)

    @app.exception_handler(OpenAIError)
    async def _openai(_request: Any, e: OpenAIError) -> Any:
        return reply(e)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Any, e: RequestValidationError) -> Any:
        errors = e.errors()
        first = errors[0] if errors else {}
        loc = [str(x) for x in first.get("loc", ()) if x != "body"]
        param = ".".join(loc) or None
        msg = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        where = f"{param}: " if param else ""
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        return reply(OpenAIError(400, f"{where}{msg}{more}", param=param, code=str(first.get("type", "invalid"))))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Any, e: StarletteHTTPException) -> Any:
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code)
        return reply(OpenAIError(e.status_code, str(e.detail), code=code))


_UNSUPPORTED_NONZERO = ("presence_penalty", "frequency_penalty", "repetition_penalty")


class _Sampling(BaseModel):
    """Fields both endpoints share (OpenAI's, plus vLLM's ``top_k``/``stop_token_ids``/``return_token_ids``)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field("", max_length=512)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=-1)
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**64)
    n: int = Field(default=1, ge=1, le=MAX_N)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] = Field(default_factory=list, max_length=64)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    return_token_ids: bool = False
    user: str | None = None

    @field_validator("stop")
    @classmethod
    def _stop(cls, v: str | list[str] | None) -> list[str]:
        stops = [v] if isinstance(v, str) else list(v or [])
        if len(stops) > 16:
            raise ValueError("at most 16 stop strings")
        if any(not s or len(s) > 512 for s in stops):
            raise ValueError("stop strings must be 1 to 512 characters long")
        return stops

    @model_validator(mode="after")
    def _refuse_unsupported(self) -> _Sampling:
        extra = self.model_extra or {}
        for name in _UNSUPPORTED_NONZERO:
            if extra.get(name) not in (None, 0, 0.0):
                raise OpenAIError(400, f"{name} is not supported by this server", param=name, code="unsupported")
        if extra.get("logit_bias"):
            raise OpenAIError(400, "logit_bias is not supported by this server", param="logit_bias", code="unsupported")
        if extra.get("best_of") not in (None, self.n):
            raise OpenAIError(400, "best_of is not supported (leave it unset)", param="best_of", code="unsupported")
        if self.stream_options is not None and not self.stream:
            raise OpenAIError(400, "stream_options is only allowed with stream=true", param="stream_options")
        return self

    @property
    def stops(self) -> list[str]:
        return list(self.stop or [])  # type: ignore[arg-type]

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))

    def sampling(self, max_new_tokens: int, seed: int | None) -> SamplingParams:
        return SamplingParams(
            max_new_tokens=max_new_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            top_k=max(self.top_k, 0),
            stop_token_ids=list(self.stop_token_ids),
            seed=seed,
        )


class CompletionRequest(_Sampling):
    """``POST /v1/completions``: ``prompt`` is text, token ids, or a batch of either."""

    # strict ints: ``[[true]]`` or ``[1.0]`` is not a token id (pydantic would coerce them to 1)
    prompt: str | list[StrictInt] | list[str] | list[list[StrictInt]] = Field(...)
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False
    return_tokens_as_token_ids: bool = False

    @model_validator(mode="after")
    def _check(self) -> CompletionRequest:
        if (self.model_extra or {}).get("suffix"):
            raise OpenAIError(400, "suffix is not supported by this server", param="suffix", code="unsupported")
        if self.echo and self.logprobs is not None:
            raise OpenAIError(400, "echo with logprobs is not supported", param="echo", code="unsupported")
        return self


class FunctionCall(BaseModel):
    """``function`` of an assistant message's tool call: ``arguments`` is JSON text (OpenAI) or an object."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(..., min_length=1, max_length=64)
    arguments: str | dict[str, Any] = "{}"

    @field_validator("arguments")
    @classmethod
    def _arguments(cls, v: str | dict[str, Any]) -> str | dict[str, Any]:
        if isinstance(v, str) and not isinstance(_json_object(v or "{}"), dict):
            raise ValueError("must be a JSON object (as text)")
        return v

    def args(self) -> dict[str, Any]:
        """The arguments decoded."""
        return dict(self.arguments) if isinstance(self.arguments, dict) else dict(json.loads(self.arguments or "{}"))


def _json_object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


class MessageToolCall(BaseModel):
    """One entry of an assistant message's ``tool_calls`` (OpenAI's shape)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field("", max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: str = Field(..., max_length=64)
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[MessageToolCall] | None = Field(default=None, max_length=64)  # assistant
    tool_call_id: str | None = Field(default=None, max_length=256)  # tool: the call it answers
    name: str | None = Field(default=None, max_length=64)

    @field_validator("role")
    @classmethod
    def _role(cls, v: str) -> str:
        if v not in ("system", "developer", "user", "assistant", "tool"):
            raise ValueError(f"unknown role {v!r} (system, developer, user, assistant or tool)")
        return v

    def text(self) -> str:
        """The message's text: a string, or the text parts of a list (other parts are refused)."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        out: list[str] = []
        for part in self.content:
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise OpenAIError(
                    400, f"only text content parts are supported, got {part.get('type')!r}", param="messages"
                )
            out.append(part["text"])
        return "".join(out)


class ChatCompletionRequest(_Sampling):
    """``POST /v1/chat/completions`` (the tokenizer's chat template makes the prompt)."""

    messages: list[ChatMessage] = Field(..., min_length=1, max_length=4096)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)
    tools: list[Any] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    _tools: list[Tool] = PrivateAttr(default_factory=list)
    _named: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> ChatCompletionRequest:
        extra = self.model_extra or {}
        if self.top_logprobs and not self.logprobs:
            raise OpenAIError(400, "top_logprobs needs logprobs=true", param="top_logprobs")
        for legacy in ("functions", "function_call"):
            if extra.get(legacy):
                raise OpenAIError(
                    400, f"{legacy} (deprecated by OpenAI) is not supported: send tools and tool_choice",
                    param=legacy, code="unsupported",
                )  # fmt: skip
        self._tools = declared_tools(self.tools)
        self._named = _tool_choice(self.tool_choice, self._tools)
        fmt = extra.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") not in (None, "text"):
            raise OpenAIError(
                400, "response_format other than text is not supported", param="response_format", code="unsupported"
            )
        return self

    @property
    def declared(self) -> list[Tool]:
        """The request's tools, checked."""
        return self._tools

    @property
    def choice(self) -> str:
        """``auto`` (the default), ``none``, ``required``, or ``named`` (:attr:`named_tool`)."""
        if self._named is not None:
            return "named"
        return self.tool_choice if isinstance(self.tool_choice, str) else "auto"

    @property
    def named_tool(self) -> str | None:
        """The function ``tool_choice`` names (None: it names none)."""
        return self._named


def declared_tools(entries: list[Any] | None) -> list[Tool]:
    """The ``tools`` of a request as :class:`Tool` s: a 400 (``param="tools"``) naming the bad entry's field."""
    tools = []
    for i, entry in enumerate(entries or ()):
        fn = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or entry.get("type", "function") != "function" or not isinstance(fn, dict):
            raise OpenAIError(400, f'tools[{i}] must be {{"type": "function", "function": {{...}}}}', param="tools")
        name, description, params = fn.get("name"), fn.get("description"), fn.get("parameters")
        if not isinstance(name, str):
            raise OpenAIError(400, f"tools[{i}].function.name must be text", param="tools")
        if description is not None and not isinstance(description, str):
            raise OpenAIError(400, f"tools[{i}].function.description must be text", param="tools")
        if params is not None and not isinstance(params, dict):
            raise OpenAIError(400, f"tools[{i}].function.parameters must be a JSON schema (an object)", param="tools")
        tools.append(Tool(name, description or "", params or {"type": "object", "properties": {}}))
    try:
        check_tools(tools)
    except EnvConfigError as e:
        raise OpenAIError(400, str(e).replace("].", "].function.", 1), param="tools") from e
    return tools


def _tool_choice(choice: str | dict[str, Any] | None, tools: list[Tool]) -> str | None:
    """The function a ``tool_choice`` names (None: ``auto``/``none``/``required``); a 400 when it cannot be met."""
    if choice is None or choice in ("auto", "none"):
        return None
    if isinstance(choice, str) and choice != "required":
        raise OpenAIError(
            400, f"tool_choice must be one of {', '.join(TOOL_CHOICES)} or a named function, got {choice!r}",
            param="tool_choice",
        )  # fmt: skip
    if not tools:
        raise OpenAIError(400, "tool_choice other than auto or none needs tools", param="tool_choice")
    if isinstance(choice, str):
        return None
    fn = choice.get("function")
    name = fn.get("name") if isinstance(fn, dict) else None
    if choice.get("type") != "function" or not isinstance(name, str):
        raise OpenAIError(
            400, 'a named tool_choice is {"type": "function", "function": {"name": ...}}', param="tool_choice"
        )
    declared = [t.name for t in tools]
    if name not in declared:
        raise OpenAIError(
            400, f"tool_choice names function {name!r}, which tools do not declare ({', '.join(declared)})",
            param="tool_choice",
        )  # fmt: skip
    return name
