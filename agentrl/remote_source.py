"""``RemoteSource``: env sources over the control plane's HTTP API, and the ``remote`` source kind.

:class:`RemoteSource` is the rollout layer's :class:`~rockroll.agentrl.env_source.EnvSource` whose
envs are :class:`~rockroll.client.remote_env.RemoteEnv` sessions placed by a ``rockroll serve-api``
control plane: a rollout group's sessions are spread over node agents, and a hedged copy of an
episode is opened off the stalled one's agent (:meth:`RemoteSource.location`).
:func:`open_remote_source` is the source kind ``remote`` (an eval config's
``source: {kind: remote, url: ..., token_env: ...}``), registered in :mod:`rockroll.agentrl.env_source`
as a lazy entry, so httpx loads only when an eval asks for that kind. The client SDK it uses,
:mod:`rockroll.client`, is the layer below; it never imports the server (:mod:`rockroll.api`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Collection, Iterator
from typing import Any

from rockroll.agentrl.env_source import EnvSource
from rockroll.client.remote_env import RemoteEnv
from rockroll.client.sdk import Client

__all__ = ["RemoteSource", "open_remote_source"]


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
        return RemoteEnv(self.client, env_id, group=f"{self.group_prefix}{group}"[:128], avoid_nodes=tuple(avoid),
                         **kwargs)  # fmt: skip

    def location(self, env: Any) -> str | None:
        """The node agent serving ``env`` (None when the control plane steps it itself)."""
        return getattr(env, "node", "") or None


@contextlib.contextmanager
def open_remote_source(config: Any) -> Iterator[EnvSource]:
    """A client of ``config.url`` (token from ``$config.token_env``), closed on exit."""
    with Client(config.url, os.environ.get(config.token_env) or None) as client:
        yield RemoteSource(client)
