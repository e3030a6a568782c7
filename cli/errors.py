"""How the ``rockroll`` command line ends on an error: a user error prints one or two lines and exits non-zero.

:func:`describe` maps the errors a user causes (a missing config, an unknown env id, a bad override,
a server that is down, a bad token, a run that exists, a port in use...) to what is wrong, what to do
and an exit code; anything else is a bug and keeps its traceback. :func:`report` prints either, and
with ``--debug`` (or ``$ROCKROLL_DEBUG=1``) the traceback of a user error too.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import traceback
from dataclasses import dataclass

import typer
from typer.exceptions import TyperException

from rockroll.client.errors import ApiClientError
from rockroll.envhub.errors import UnknownEnvError
from rockroll.envs.config import ConfigError
from rockroll.envs.errors import EnvConfigError, RockrollError

__all__ = ["UserError", "describe", "report"]

_SERVER_HINT = "Start one with `rockroll serve-api`, or point at yours with --url or $ROCKROLL_URL."
_TOKEN_HINT = "Pass a valid token with --token or $ROCKROLL_TOKEN (create one: `rockroll token create --name NAME`)."
_STATUS_HINTS = {
    401: _TOKEN_HINT,
    403: "This token may not do that; ask the server's admin.",
    500: "The server failed; its log has the details.",
}
_SERVER_ENV_HINT = (
    "An id like owner/Name-v0 is an env on a control plane: `rockroll envs list --url URL` lists them, "
    "`rockroll session create ID --url URL` plays one."
)
_FILE_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


@dataclass(frozen=True)
class UserError:
    """What went wrong (``message``), what to do (``hint``, may be empty) and the exit ``code``."""

    message: str
    hint: str = ""
    code: int = 1


def describe(exc: BaseException) -> UserError | None:
    """The :class:`UserError` for a known user error, None for anything else (a bug: show its traceback)."""
    if isinstance(exc, TyperException):  # usage errors: a bad option, a missing argument, a bad key=value
        ctx = getattr(exc, "ctx", None)
        hint = f"Try '{ctx.command_path} --help' for help." if ctx is not None else ""
        return UserError(exc.format_message(), hint, getattr(exc, "exit_code", 2))
    if isinstance(exc, (KeyboardInterrupt, typer.Abort)):
        return UserError("interrupted", "", 130)
    if isinstance(exc, ApiClientError):
        hint = _STATUS_HINTS.get(exc.status, _STATUS_HINTS[500] if exc.status >= 500 else "")
        return UserError(f"the server answered {exc.status} {exc.code}: {exc.message}", hint, 1)
    found = _http_error(exc)
    if found is not None:
        return found
    if isinstance(exc, ConfigError):
        return UserError(f"config error: {exc}", "`rockroll train --help-config` lists every train config key.", 2)
    if isinstance(exc, UnknownEnvError) and "/" in exc.env_id:
        return UserError(str(exc), _SERVER_ENV_HINT, 2)
    if isinstance(exc, (UnknownEnvError, EnvConfigError)):
        return UserError(str(exc), "", 2)
    if isinstance(exc, RockrollError):
        return UserError(str(exc) or type(exc).__name__, str(getattr(exc, "hint", "") or ""), 1)
    if isinstance(exc, OSError) and exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
        return UserError(_os_text(exc), "Pick another port with --port (0 picks a free one), or stop what uses it.", 1)
    if isinstance(exc, _FILE_ERRORS):
        return UserError(_os_text(exc), "Check the path.", 2 if isinstance(exc, FileNotFoundError) else 1)
    return None


def _http_error(exc: BaseException) -> UserError | None:
    """Connection errors of httpx (the client SDK): the server is down, unreachable or too slow."""
    import httpx

    if not isinstance(exc, httpx.TransportError):
        return None
    try:
        url = exc.request.url
        where = f"{url.scheme}://{url.netloc.decode()}"
    except RuntimeError:  # no request attached
        where = "the server"
    reason = re.sub(r"^\[Errno -?\d+\]\s*", "", str(exc)) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return UserError(f"cannot reach the rockroll server at {where} ({reason})", _SERVER_HINT, 1)
    if isinstance(exc, httpx.TimeoutException):
        return UserError(
            f"the rockroll server at {where} did not answer in time", "Try again, or raise the timeout.", 1
        )
    return UserError(f"the connection to {where} failed ({reason})", "Try again; the server may have restarted.", 1)


def _os_text(exc: OSError) -> str:
    if exc.strerror:
        return exc.strerror if exc.filename is None else f"{exc.strerror}: {exc.filename}"
    return str(exc)


def report(exc: BaseException, *, debug: bool) -> int:
    """Print ``exc`` for the user (the traceback too for a bug or with ``debug``) and return the exit code."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # `rockroll` alone: the help was printed
        return 2
    if isinstance(exc, BrokenPipeError):  # `rockroll ... | head`: the reader left; nothing to say
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - no flush error at exit
        return 1
    found = describe(exc)
    if found is None or debug:
        traceback.print_exception(exc)
    if found is None:
        sys.stderr.write("rockroll crashed: this is a bug; please report it with the traceback above.\n")
        return 1
    sys.stderr.write(f"{_red('error:')} {found.message}\n")
    if found.hint:
        sys.stderr.write(found.hint + "\n")
    return found.code


def _red(text: str) -> str:
    return typer.style(text, fg="red", bold=True) if sys.stderr.isatty() else text
