"""``/docs`` (Swagger UI) and ``/redoc`` served with no network: their files come from an installed package.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so they are blank offline. The same
pages here point at ``/docs/assets/...``, served from the files the ``fastapi-offline`` package
ships (Swagger UI 5, which renders OpenAPI 3.1, and ReDoc 2). The bearer scheme is declared on the
auth dependency (:mod:`rockroll.api.server.deps`), so Swagger UI's "Authorize" button takes a token.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from rockroll.api.server.errors import ApiError

__all__ = ["router", "ASSETS_DIR"]

router = APIRouter(include_in_schema=False)


def _assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


ASSETS_DIR = _assets_dir()
_TYPES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon.png": "image/png",
}


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI on ``/openapi.json``; the token given to "Authorize" is kept across reloads."""
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{root}/docs/assets/swagger-ui-bundle.js",
        swagger_css_url=f"{root}/docs/assets/swagger-ui.css",
        swagger_favicon_url=f"{root}/docs/assets/favicon.png",
        swagger_ui_parameters={"persistAuthorization": True},
    )


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    """ReDoc on ``/openapi.json`` (no web fonts)."""
    root = request.scope.get("root_path", "")
    return get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root}/docs/assets/redoc.standalone.js",
        redoc_favicon_url=f"{root}/docs/assets/favicon.png",
        with_google_fonts=False,
    )


@router.get("/docs/assets/{name}")
def asset(name: str) -> FileResponse:
    """One of the documentation pages' files (cached by browsers for a day)."""
    if name not in _TYPES:
        raise ApiError(404, "not_found", f"no asset {name!r}")
    return FileResponse(ASSETS_DIR / name, media_type=_TYPES[name], headers={"Cache-Control": "public, max-age=86400"})
