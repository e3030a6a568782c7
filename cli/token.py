"""``rockroll token ...``: manage the control plane's API tokens (stored hashed in its database)."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.table import Table

from rockroll.cli.envs import fail
from rockroll.cli.server import _settings

__all__ = ["token_app"]

token_app = typer.Typer(help="Manage API bearer tokens (stored hashed in the server's database).", no_args_is_help=True)


@token_app.command("create")
def create(
    name: str = typer.Option(..., help="Owner name of the token."),
    admin: bool = typer.Option(False, "--admin", help="Admins see every owner's resources."),
    database_url: str = typer.Option(None, "--db", help="The server's database URL."),
) -> None:
    """Create a token and print it (shown once; only its hash is stored).

    Example: rockroll token create --name alice --db sqlite:///rockroll.db
    """
    settings = _settings(database_url=database_url)
    from rockroll.api.db import Database
    from rockroll.api.server.auth import create_token

    db = Database(settings.resolved_database_url())
    try:
        db.migrate()
        token = create_token(db, name, admin=admin)
    except ValueError as e:
        fail(str(e), 2, e)
    finally:
        db.close()
    sys.stdout.write(token + "\n")


@token_app.command("list")
def list_tokens(database_url: str = typer.Option(None, "--db", help="The server's database URL.")) -> None:
    """List tokens (ids and names; tokens themselves are not stored).

    Example: rockroll token list --db sqlite:///rockroll.db
    """
    from rockroll.api.db import Database
    from rockroll.api.server.auth import list_tokens as _list

    db = Database(_settings(database_url=database_url).resolved_database_url())
    try:
        db.migrate()
        table = Table("id", "name", "admin", "revoked")
        for t in _list(db):
            table.add_row(t.id, t.name, str(t.admin), str(t.revoked))
        Console().print(table)
    finally:
        db.close()


@token_app.command("revoke")
def revoke(token_id: str, database_url: str = typer.Option(None, "--db", help="The server's database URL.")) -> None:
    """Revoke a token by id.

    Example: rockroll token revoke 3f9a1c2b4d5e6f70 --db sqlite:///rockroll.db
    """
    from rockroll.api.db import Database
    from rockroll.api.server.auth import revoke_token

    db = Database(_settings(database_url=database_url).resolved_database_url())
    try:
        db.migrate()
        if not revoke_token(db, token_id):
            fail(f"no token {token_id!r}; `rockroll token list` shows them", 1)
    finally:
        db.close()
