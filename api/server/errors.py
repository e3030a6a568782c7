"""Errors of the control plane and their one HTTP shape.

Every error answer is ``{"error": {"code", "message", "details"}}``. Domain exceptions from
``envs``, ``envhub`` and ``sandbox`` are mapped to status codes here and nowhere else; anything
unexpected becomes a 500 ``internal_error`` with the same shape (and is logged).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rockroll.envhub.errors import RegistrationError, UnknownEnvError
from rockroll.envs.errors import ActionTypeError, EnvConfigError, EnvError, ResetNeeded, RockrollError, StateError
from rockroll.sandbox import errors as sb

__all__ = ["RockrollError", "ApiError", "install_error_handlers", "error_body", "to_api_error"]

log = logging.getLogger("rockroll.api")

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    413: "too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "too_many_requests",
}


class ApiError(RockrollError):
    """An error the API answers as-is."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


def capacity_error(message: str, active: int, limit: int, what: str) -> ApiError:
    """The 429 ``capacity`` answer naming the limit reached (``details``: active, limit, what)."""
    return ApiError(429, "capacity", message, {"active": active, "limit": limit, "what": what})


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of every error answer."""
    return {"error": {"code": code, "message": message, "details": details or {}}}


def to_api_error(e: Exception) -> ApiError | None:
    """Map a domain exception onto an :class:`ApiError` (None when it has no mapping)."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, UnknownEnvError):
        return ApiError(404, "env_not_found", str(e), {"env_id": e.env_id, "suggestions": e.suggestions})
    if isinstance(e, RegistrationError):
        return ApiError(400, "invalid_env_spec", str(e))
    if isinstance(e, ResetNeeded):
        return ApiError(409, "reset_needed", str(e))
    if isinstance(e, (EnvConfigError, StateError, ActionTypeError)):
        details = {k: v for k, v in vars(e).items() if isinstance(v, (str, int, float, bool, type(None)))}
        return ApiError(400, "invalid_env_input", str(e), details)
    if isinstance(e, EnvError):
        return ApiError(400, "env_error", str(e))
    if isinstance(e, sb.SandboxLost):
        return ApiError(410, "sandbox_lost", str(e), {"sandbox_id": e.sandbox_id, "reason": e.reason})
    if isinstance(e, sb.SessionNotFound):
        return ApiError(410, "sandbox_lost", f"the sandbox no longer hosts this session: {e}")
    if isinstance(e, sb.SandboxNotFound):
        return ApiError(404, "sandbox_not_found", str(e), {"sandbox_id": e.sandbox_id})
    if isinstance(e, sb.CapacityError):
        return capacity_error(str(e), e.active, e.limit, e.what)
    if isinstance(e, sb.FileTooLarge):
        message = f"file {e.path!r} is {e.size} bytes, over the cap of {e.limit} bytes (max_file_bytes)"
        return ApiError(413, "too_large", message, {"path": e.path, "size": e.size, "limit": e.limit})
    if isinstance(e, sb.SandboxPathError) and "no such file" in e.reason.lower():
        return ApiError(404, "file_not_found", str(e), {"path": e.path})
    if isinstance(e, sb.SandboxPathError):
        return ApiError(400, "invalid_path", str(e), {"path": e.path, "reason": e.reason})
    if isinstance(e, sb.ImageNotFound):
        return ApiError(400, "image_not_found", str(e), {"image": e.image})
    if isinstance(e, sb.SandboxTimeout):
        return ApiError(504, "sandbox_timeout", str(e))
    if isinstance(e, sb.RemoteError):
        return ApiError(400, "env_error", str(e), {"kind": e.kind})
    if isinstance(e, sb.SandboxError):
        return ApiError(503, "sandbox_error", str(e))
    if isinstance(e, (FileNotFoundError, IsADirectoryError, NotADirectoryError)):
        return ApiError(404, "file_not_found", str(e))
    if isinstance(e, (ValueError, TypeError, KeyError)):
        return ApiError(400, "bad_request", str(e))
    if isinstance(e, RecursionError):  # a body or message nested past what the parser takes
        return ApiError(422, "validation_error", f"the input is nested too deeply: {e}")
    return None


def _json(status: int, code: str, message: str, details: dict[str, Any] | None = None, headers=None) -> JSONResponse:
    return JSONResponse(error_body(code, message, details), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Make every error answer use :func:`error_body`."""

    @app.exception_handler(ApiError)
    async def _api_error(_req: Request, e: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
        return _json(e.status, e.code, e.message, e.details, headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(req: Request, e: RequestValidationError) -> JSONResponse:
        errors = [
            {
                "loc": [str(x) for x in err.get("loc", ())],
                "msg": str(err.get("msg", "")),
                "type": str(err.get("type", "")),
            }
            for err in e.errors()
        ]
        message = "the request does not match the schema"
        if errors:  # name the field that failed (body.group: String should match pattern ...)
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            message += f": {'.'.join(first['loc'])}: {first['msg']}{more}"
        log.info("422 on %s %s: %s", req.method, req.url.path, message)
        return _json(422, "validation_error", message, {"errors": errors})

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, e: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(e.status_code, "http_error")
        return _json(e.status_code, code, str(e.detail), None, getattr(e, "headers", None))

    async def _domain(req: Request, e: Exception) -> JSONResponse:
        mapped = to_api_error(e)
        if mapped is not None:
            return _json(mapped.status, mapped.code, mapped.message, mapped.details)
        log.error("unhandled error on %s %s", req.method, req.url.path, exc_info=e)
        return _json(500, "internal_error", f"{type(e).__name__}: {e}")

    # handled inside the exception middleware (looked up along the MRO), so no traceback is printed
    for cls in (EnvError, sb.SandboxError, ValueError, TypeError, LookupError, OSError, RecursionError):
        app.add_exception_handler(cls, _domain)

    @app.exception_handler(Exception)
    async def _unexpected(req: Request, e: Exception) -> JSONResponse:
        return await _domain(req, e)
