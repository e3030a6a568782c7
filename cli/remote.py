"""What ``rockroll remote-env|sandbox|session|job ...`` share: the control plane from the shell, over
:class:`rockroll.client.sdk.Client`.

The server URL and token come from ``--url``/``--token`` or ``$ROCKROLL_URL``/``$ROCKROLL_TOKEN``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from rockroll.cli.tables import print_table
from rockroll.envs.errors import RockrollError

__all__ = ["TOKEN", "URL", "WrongServer", "console", "err"]

console = Console()
err = Console(stderr=True)
URL = typer.Option("http://127.0.0.1:8080", "--url", envvar="ROCKROLL_URL", help="Server URL.")
TOKEN = typer.Option("", "--token", envvar="ROCKROLL_TOKEN", help="Bearer token.")


class WrongServer(RockrollError):
    """``--url`` answers, but it is not a rockroll control plane (``hint``: what to point at instead)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _run(url: str, token: str, fn: Callable[[Any], Any]) -> Any:
    """Call ``fn(client)``; an error answer or a server that is down ends the command in one or two lines
    (:mod:`rockroll.cli.errors`, which ``rockroll`` applies to every command). A URL without a scheme,
    or one where something else answers (a model server, a path such as ``/v1``), is said so."""

    from rockroll.client.errors import ApiClientError
    from rockroll.client.sdk import Client

    if not re.match(r"^https?://", url):
        raise typer.BadParameter(f"{url!r} lacks a scheme; use http://{url.split('://')[-1]}", param_hint="--url")
    with Client(url, token or None, retries=1) as c:
        try:
            return fn(c)
        except ApiClientError as e:
            if e.status in (404, 405) and e.code in ("not_found", "method_not_allowed", "http_error"):
                _check_server(url, e)
            raise


def _check_server(url: str, error: Exception) -> None:
    """Raise :class:`WrongServer` when ``url`` is not a control plane's root (its route answered 404)."""
    import httpx

    root = url.rstrip("/")
    try:
        plane = httpx.get(root + "/v1/health", timeout=5)
        if plane.status_code == 200 and "status" in plane.json():
            return  # a control plane: the 404 was the resource's own
    except (httpx.HTTPError, ValueError):
        pass
    expected = "a rockroll control plane (`rockroll serve-api`, default http://127.0.0.1:8080) at its root URL"
    parsed = httpx.URL(root)
    if parsed.path not in ("", "/"):
        bare = str(parsed.copy_with(path="/")).rstrip("/")
        raise WrongServer(
            f"{url} answered 404 ({getattr(error, 'message', error)}): --url takes the server's root, not a path",
            f"Try --url {bare}",
        )
    try:
        health = httpx.get(root + "/health", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        health = None
    if isinstance(health, dict) and "weight_version" in health:
        raise WrongServer(
            f"{url} is a model server (`rockroll serve-model`), not the control plane", f"Expected {expected}."
        )
    raise WrongServer(
        f"{url} answered 404 and is not a rockroll control plane (no /v1/health)", f"Expected {expected}."
    )


def _say(text: Any) -> None:
    """Print server or env text verbatim (``[Search]`` is not Rich markup)."""
    console.print(str(text), markup=False, highlight=False, soft_wrap=True)


def _table(columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Rows under ``columns``; ids are never cut, whatever the width (:mod:`rockroll.cli.tables`)."""
    print_table(console, columns, [[_cell(row.get(c)) for c in columns] for row in rows])


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    if isinstance(v, dict):
        return json.dumps(v)
    return "" if v is None else str(v)
