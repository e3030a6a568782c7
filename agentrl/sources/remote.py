"""``RemoteSource``: env sources over the control plane's HTTP API, and the ``remote`` source kind.

:class:`RemoteSource` is the rollout layer's :class:`~rockroll.agentrl.sources.kinds.EnvSource` whose
envs are :class:`~rockroll.client.remote_env.RemoteEnv` sessions placed by a ``rockroll serve-api``
control plane: a rollout group's sessions are spread over node agents, and a hedged copy of an
episode is opened off the stalled one's agent (:meth:`RemoteSource.location`). Group ids go out as the
server takes them (:func:`group_id`: the rollout's ``<env id>/<i>`` has a ``/``), and
:meth:`RemoteSource.check_env` asks the server whether the caller may play an id before anything is built
(``rockroll train --url``, ``rockroll eval --url``): an env registered on the control plane
(``alice/Nim-v0``) is played through it without its code ever running here.
:func:`open_remote_source` is the source kind ``remote`` (an eval config's
``source: {kind: remote, url: ..., token_env: ...}``), registered in :mod:`rockroll.agentrl.sources.kinds`
as a lazy entry, so httpx loads only when an eval asks for that kind. The client SDK it uses,
:mod:`rockroll.client`, is the layer below; it never imports the server (:mod:`rockroll.api`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Collection, Iterator
from typing import Any

from rockroll.agentrl.sources.kinds import EnvSource
from rockroll.client.errors import ApiClientError
from rockroll.client.remote_env import RemoteEnv
from rockroll.client.sdk import Client
from rockroll.envhub.errors import UnknownEnvError

__all__ = ["RemoteSource", "open_remote_source", "group_id"]

#: what the server takes as a session's ``group`` (``SessionCreate.group`` in api/server/schemas.py)
_GROUP_CHARS = re.compile(r"[^A-Za-z0-9_.:-]")
_GROUP_MAX = 128


def group_id(prefix: str, group: str) -> str:
    """``prefix + group`` as the server accepts it: characters outside ``[A-Za-z0-9_.:-]`` (the ``/`` of
    ``FrozenLake-v0/3``, ``alice/Nim-v0/3``) become ``:``, and an id that then changed or grew past 128
    characters ends with a digest of the original, so two groups never share one id."""
    raw = f"{prefix}{group}"
    safe = _GROUP_CHARS.sub(":", raw)
    if safe == raw and len(safe) <= _GROUP_MAX:
        return safe
    digest = hashlib.sha1(raw.encode()).hexdigest()[:10]
    return f"{safe[: _GROUP_MAX - len(digest) - 1]}.{digest}"


class RemoteSource(EnvSource):
    """Sessions of the control plane through :class:`~rockroll.client.remote_env.RemoteEnv`.

    Args:
        client: a :class:`~rockroll.client.sdk.Client` (owned by the caller).
    """

    name = "remote"

    def __init__(self, client: Client) -> None:
        super().__init__()
        self.client = client
        self.group_prefix = f"{secrets.token_hex(4)}:"  # group ids repeat across rollouts: made this source's

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        return RemoteEnv(self.client, env_id, **kwargs)

    def _open_avoiding(self, env_id: str, kwargs: dict[str, Any], avoid: Collection[str]) -> Any:
        return RemoteEnv(self.client, env_id, avoid_nodes=tuple(avoid), **kwargs)

    def _open_in_group(self, env_id: str, kwargs: dict[str, Any], avoid: Collection[str], group: str) -> Any:
        """A session the control plane places on the node agent holding the fewest of ``group``'s sessions."""
        return RemoteEnv(self.client, env_id, group=group_id(self.group_prefix, group), avoid_nodes=tuple(avoid),
                         **kwargs)  # fmt: skip

    def location(self, env: Any) -> str | None:
        """The node agent serving ``env`` (None when the control plane steps it itself)."""
        return getattr(env, "node", "") or None

    def describe(self, env_id: str) -> dict[str, Any]:
        """The server's view of ``env_id`` (id, max_steps, owner, ...): ``UnknownEnvError`` with the server's
        suggestions when the caller may not see it (an unknown id, another owner's private env)."""
        try:
            return dict(self.client.get_env(env_id))
        except ApiClientError as e:
            if e.status != 404:
                raise
            raise UnknownEnvError(env_id, list(e.details.get("suggestions") or [])) from e

    def check_env(self, env_id: str) -> None:
        """The control plane knows ``env_id`` and lets this token play it (see :meth:`describe`)."""
        self.describe(env_id)


@contextlib.contextmanager
def open_remote_source(config: Any) -> Iterator[EnvSource]:
    """A client of ``config.url`` (token from ``$config.token_env``), closed on exit."""
    with Client(config.url, os.environ.get(config.token_env) or None) as client:
        yield RemoteSource(client)
