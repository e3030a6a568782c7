"""Which URLs a job may reach: only those an admin allowed (``Settings.job_engine_urls``), issue 13 item 4,
and which API-key variables it may send (``Settings.job_api_key_envs``), issue 48 item 7d.

A job's engine (``engine.args.base_url`` of an eval job), judge reward or tracker is a client the control
plane's worker runs: left open, it reaches cloud metadata services, other hosts of the private network,
or the control plane's own admin routes. So every URL a job can make its worker reach must match an entry
of the allowlist, a default the config leaves unset included (:mod:`rockroll.api.jobs.outbound` resolves
it as the worker would); with the allowlist empty (the default) every URL is refused.

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

__all__ = ["JobUrlError", "JobKeyEnvError", "check_url", "check_key_env", "url_allowed", "SETTING", "KEY_SETTING"]

#: the setting an admin changes to allow a URL (named in every refusal)
SETTING = "job_engine_urls"
#: the setting that lists the environment variables a job may name as its API key (``api_key_env``)
KEY_SETTING = "job_api_key_envs"
#: variables of the server's own settings (its token, cluster secret, database URL): never a job's key
SERVER_PREFIX = "ROCKROLL_"
_BAD = re.compile(r"[\s\\\x00-\x1f\x7f]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class JobUrlError(RockrollError):
    """A URL of a job config that the allowlist refuses (``key``: the dotted field)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class JobKeyEnvError(RockrollError):
    """An ``api_key_env`` of a job config that ``Settings.job_api_key_envs`` does not list (``key``: the field)."""

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


def check_url(url: str, allowed: Sequence[str], key: str, *, default: bool = False) -> None:
    """Raise :class:`JobUrlError` naming ``key`` and the setting unless ``url`` is allowed.

    ``default``: the config left ``key`` unset and ``url`` is what the worker would reach then."""
    if url_allowed(url, allowed):
        return
    if not allowed:
        why = f"this server allows jobs no URL ({SETTING} is empty)"
    else:
        why = f"it is not under an entry of {SETTING} ({', '.join(allowed)})"
    what = f"{key} (unset: its default) {url!r}" if default else f"{key} {url!r}"
    raise JobUrlError(key, f"{what} is refused: {why}; an admin adds the URL to {SETTING}")


def check_key_env(name: str, allowed: Sequence[str], key: str) -> None:
    """Raise :class:`JobKeyEnvError` naming ``key`` and the setting unless ``name`` is ``''`` (no key) or listed
    (and not one of the server's own ``ROCKROLL_*`` settings)."""
    if not name or (name in allowed and not name.startswith(SERVER_PREFIX)):
        return
    if name.startswith(SERVER_PREFIX):
        raise JobKeyEnvError(key, f"{key} {name!r} is refused: the server's own settings ({SERVER_PREFIX}*) are never "
                             f"passed to a job, whatever {KEY_SETTING} lists")  # fmt: skip
    listed = f"it lists {', '.join(allowed)}" if allowed else "it is empty"
    raise JobKeyEnvError(
        key, f"{key} {name!r} is refused: a job may name only a variable of {KEY_SETTING} ({listed}); "
        f"set {key}: '' for no key, or an admin adds the variable to {KEY_SETTING}",
    )  # fmt: skip
