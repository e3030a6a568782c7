"""Tables that never cut what a user must copy: ids, option names (issue 37: ``sb-65…`` and
``--max-sessions-per…`` at 80 columns).

:func:`print_table` prints rows with their id columns at full width (``no_wrap``, never shrunk);
the other columns wrap and fold instead. :func:`keep_option_names` makes typer's ``--help`` do the
same for option names, and folds long words of the help text (a URL, an option it names).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["ID_COLUMNS", "print_table", "keep_option_names"]

#: columns whose values a user copies into the next command
ID_COLUMNS = frozenset({"id", "env_id", "session_id", "sandbox_id", "job_id", "node_id", "owner", "env", "name"})


def print_table(console: Console, columns: list[str], rows: list[list[str]]) -> None:
    """Print ``rows`` under ``columns``; id columns (:data:`ID_COLUMNS`) are never cut or folded.

    When the id columns alone are wider than the console the table is printed wider than it
    (the terminal wraps the line; the ids stay whole).
    """
    table = Table()
    keys = [c in ID_COLUMNS for c in columns]
    for name, key in zip(columns, keys, strict=True):
        widest = max([len(name), *(len(r[columns.index(name)]) for r in rows)]) if key else None
        table.add_column(name, no_wrap=key, min_width=widest, overflow="fold")
    for row in rows:
        table.add_row(*[Text(v) for v in row])
    need = sum(
        max(len(c), *(len(r[i]) for r in rows)) + 3 if keys[i] else 4 for i, c in enumerate(columns)
    ) + 1  # fmt: skip
    console.print(table, width=max(console.width, need) if rows else None)


class _HelpTable(Table):
    """typer's options table: the option names at full width; the type and help columns wrap."""

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        super().add_row(*renderables, **kwargs)
        for column in self.columns[:-2]:  # [required], --long, -short, --no-long, -no-short | type, help
            column.no_wrap = True


def keep_option_names() -> None:
    """Make typer's rich ``--help`` keep option names whole (see the module docstring)."""
    try:
        import typer.rich_utils as rich_utils
    except ImportError:  # typer without rich: click's plain help wraps, never cuts
        return
    rich_utils.Table = _HelpTable  # type: ignore[attr-defined,misc]
    original = rich_utils._get_parameter_help
    if getattr(original, "_folds", False):
        return

    def folded_help(**kwargs: Any) -> Any:  # long words of the help (a URL, an option named) fold, never cut
        columns = original(**kwargs)
        for item in getattr(columns, "renderables", []):
            if isinstance(item, Text):
                item.overflow = "fold"
        return columns

    folded_help._folds = True  # type: ignore[attr-defined]
    rich_utils._get_parameter_help = folded_help  # type: ignore[attr-defined]
