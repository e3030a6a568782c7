"""Which URLs a job may reach: only those an admin allowed (``Settings.job_engine_urls``), issue 13 item 4.

A job's engine (``engine.args.base_url`` of an eval job) is a client the control plane's worker runs:
left open, it reaches cloud metadata services, other hosts of the private network, or the control
plane's own admin routes. So every URL in a job config must match an entry of the allowlist; with the
allowlist empty (the default) every URL is refused.

An entry is a URL prefix (``http://10.0.0.5:8000`` or ``https://llm.internal/v1``: same scheme, host and
port, and the URL's path at or under the entry's) or a host (``10.0.0.5``: any port, http or https;
``10.0.0.5:8000``: that port). A URL with a user part (``http://a@b``), a backslash, whitespace or a
scheme other than http/https is refused whatever the list says. Hosts are compared by name, as given:
allow addresses or names the admin controls (a name resolving elsewhere later is the DNS admin's call).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import SplitResult, urlsplit

from rockroll.api.server.errors import RockrollError

__all__ = ["JobUrlError", "check_url", "url_allowed", "SETTING"]

#: the setting an admin changes to allow a URL (named in every refusal)
SETTING = "job_engine_urls"
_BAD = re.compile(r"[\s\\\x00-\x1f\x7f]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class JobUrlError(RockrollError):
    """A URL of a job config that the allowlist refuses (``key``: the dotted field)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _split(url: str) -> SplitResult | None:
    if _BAD.search(url):
        return None
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return None
    if u.scheme not in _DEFAULT_PORTS or not u.hostname or u.username is not None or u.password is not None:
        return None
    return u


def _entry_matches(u: SplitResult, entry: str) -> bool:
    if "://" not in entry:  # a host, or host:port
        e = _split("http://" + entry)
        if e is None:
            return False
        return e.hostname == u.hostname and (e.port is None or e.port == (u.port or _DEFAULT_PORTS[u.scheme]))
    e = _split(entry)
    if e is None or e.scheme != u.scheme or e.hostname != u.hostname:
        return False
    if (e.port or _DEFAULT_PORTS[e.scheme]) != (u.port or _DEFAULT_PORTS[u.scheme]):
        return False
    prefix, path = e.path.rstrip("/"), u.path.rstrip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")


def url_allowed(url: str, allowed: Sequence[str]) -> bool:
    """Whether ``url`` matches an entry of ``allowed`` (see the module docstring)."""
    u = _split(url)
    return u is not None and any(_entry_matches(u, entry.strip()) for entry in allowed if entry.strip())


def check_url(url: str, allowed: Sequence[str], key: str) -> None:
    """Raise :class:`JobUrlError` naming ``key`` and the setting unless ``url`` is allowed."""
    if url_allowed(url, allowed):
        return
    if not allowed:
        why = f"this server allows jobs no URL ({SETTING} is empty)"
    else:
        why = f"it is not under an entry of {SETTING} ({', '.join(allowed)})"
    raise JobUrlError(key, f"{key} {url!r} is refused: {why}; an admin adds the engine's URL to {SETTING}")
