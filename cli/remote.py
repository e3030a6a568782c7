"""What ``rockroll remote-env|sandbox|session|job ...`` share: the control plane from the shell, over
:class:`rockroll.client.sdk.Client`.

The server URL and token come from ``--url``/``--token`` or ``$ROCKROLL_URL``/``$ROCKROLL_TOKEN``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["TOKEN", "URL", "console", "err"]

console = Console()
err = Console(stderr=True)
URL = typer.Option("http://127.0.0.1:8080", "--url", envvar="ROCKROLL_URL", help="Server URL.")
TOKEN = typer.Option("", "--token", envvar="ROCKROLL_TOKEN", help="Bearer token.")


def _run(url: str, token: str, fn: Callable[[Any], Any]) -> Any:
    """Call ``fn(client)``; an error answer or a server that is down ends the command in one or two lines
    (:mod:`rockroll.cli.errors`, which ``rockroll`` applies to every command)."""

    from rockroll.client.sdk import Client

    with Client(url, token or None, retries=1) as c:
        return fn(c)


def _say(text: Any) -> None:
    """Print server or env text verbatim (``[Search]`` is not Rich markup)."""
    console.print(str(text), markup=False, highlight=False, soft_wrap=True)


def _table(columns: list[str], rows: list[dict[str, Any]]) -> None:
    table = Table(*columns)
    for row in rows:
        table.add_row(*[Text(_cell(row.get(c))) for c in columns])
    console.print(table)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    if isinstance(v, dict):
        return json.dumps(v)
    return "" if v is None else str(v)
