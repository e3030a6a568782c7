"""The sessions' rows (``api_sessions``) as the control-plane replicas share them, and :class:`LiveSession`,
a session held in this server's memory.

A session opened on a standalone node agent is found by any replica through its row: which agent
serves it (``node_id``), its env and system prompt, and which server opened it (``server``, that
server's lease name). Rows also count a rollout group's open sessions per agent, for anti-affinity
(:func:`group_spread`); sessions whose opening server is gone are adopted by another replica, so its
idle reaper can close them.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from rockroll.api.db import Database, SessionRecord
from rockroll.client.responses import SessionInfo
from rockroll.envs.action_wire import tools_to_wire
from rockroll.envs.errors import RockrollError
from rockroll.sandbox.node.agent import AgentSession
from rockroll.sandbox.session import EnvSession

__all__ = [
    "LiveSession",
    "record_intent",
    "record_open",
    "body_hash",
    "drop_key",
    "record_close",
    "find",
    "find_by_key",
    "open_on_nodes",
    "group_spread",
    "is_closed",
]


@dataclass
class LiveSession:
    """One open session."""

    id: str
    owner: str
    env_id: str
    kwargs: dict[str, Any]
    remote: EnvSession  # a RemoteSession (this server's sandboxes) or a NodeSession (a standalone node agent)
    created_at: float = field(default_factory=time.time)
    steps: int = 0
    last_used: float = field(default_factory=time.monotonic)
    node: str = ""  # the node agent serving it ("" when none: stepped through the control plane only)
    entry: AgentSession | None = None  # its session on the embedded node agent (steps numbered there)

    @property
    def sandbox_id(self) -> str:
        return self.remote.sandbox_id

    def view(self) -> SessionInfo:
        return {
            "id": self.id,
            "owner": self.owner,
            "env": self.env_id,
            "sandbox_id": self.sandbox_id,
            "steps": self.steps,
            "created_at": self.created_at,
            "system_prompt": self.remote.system_prompt(),
            "tools": self.tools(),
        }

    def tools(self) -> list[dict[str, Any]]:
        """The env's tools as OpenAI function schemas ([] where its host cannot say now: a lost node agent)."""
        try:
            return tools_to_wire(self.remote.tools)
        except RockrollError:
            return []


def record_intent(
    db: Database,
    session_id: str,
    owner: str,
    env: str,
    kwargs: dict[str, Any],
    node_id: str,
    *,
    group_key: str = "",
    server: str = "",
    key: str = "",
    open_hash: str | None = None,
) -> None:
    """Write the row of a session about to be opened on agent ``node_id`` (``sandbox_id`` '' until
    :func:`record_open` confirms it); ``IntegrityError`` when the owner used its ``open_key`` already."""
    now = time.time()
    with db.session() as s:
        rec = s.get(SessionRecord, session_id)
        if rec is not None:  # the first agent chosen did not answer: another one is asked
            rec.node_id = node_id
            return
        s.add(SessionRecord(id=session_id, owner=owner, env_id=env, kwargs=kwargs, sandbox_id="", created_at=now,
                            node_id=node_id, open_key=key or None, group_key=group_key, server=server,
                            open_hash=open_hash))  # fmt: skip


def record_open(
    db: Database, live: LiveSession, *, group: str = "", server: str = "", key: str = "", key_hash: str = ""
) -> None:
    """Write the row of a newly opened session (a :class:`rockroll.api.sessions.live.LiveSession`), or confirm its
    :func:`record_intent`; ``key``: the client's idempotency key (``IntegrityError`` when the owner opened
    a session with it already)."""
    with db.session() as s:
        rec = s.get(SessionRecord, live.id)
        if rec is not None:
            rec.sandbox_id, rec.system_prompt, rec.env_id = (
                live.remote.sandbox_id,
                live.remote.system_prompt(),
                live.env_id,
            )
            return
        s.add(
            SessionRecord(
                id=live.id,
                owner=live.owner,
                env_id=live.env_id,
                kwargs=live.kwargs,
                sandbox_id=live.remote.sandbox_id,
                created_at=live.created_at,
                node_id=live.node,
                system_prompt=live.remote.system_prompt(),
                group_key=group,
                server=server,
                open_key=key or None,
                open_hash=key_hash or None,
            )
        )


def record_close(db: Database, session_id: str, steps: int, *, closed: bool = True) -> None:
    """Record a session's step count and (``closed``) its end."""
    with db.session() as s:
        rec = s.get(SessionRecord, session_id)
        if rec is not None:
            rec.steps = max(rec.steps, steps)
            if closed and rec.closed_at is None:
                rec.closed_at = time.time()


def find(db: Database, session_id: str) -> SessionRecord | None:
    with db.session() as s:
        return s.get(SessionRecord, session_id)


def body_hash(env: str, kwargs: dict[str, Any], group: str, avoid: Collection[str]) -> str:
    """SHA-256 of an open's body (what its ``Idempotency-Key`` stands for), key order aside."""
    body = {"env": env, "kwargs": kwargs, "group": group, "avoid": sorted(avoid)}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def drop_key(db: Database, session_id: str) -> None:
    """Close an unconfirmed row and free its idempotency key (its opening server died mid-open)."""
    with db.session() as s:
        rec = s.get(SessionRecord, session_id)
        if rec is not None:
            rec.open_key, rec.closed_at = None, rec.closed_at or time.time()


def find_by_key(db: Database, owner: str, key: str) -> SessionRecord | None:
    """The session ``owner`` opened with idempotency key ``key``, if any."""
    with db.session() as s:
        return s.scalars(
            select(SessionRecord).where(SessionRecord.owner == owner, SessionRecord.open_key == key)
        ).first()


def is_closed(db: Database, session_id: str) -> bool:
    """Whether the session's row says it was closed (maybe by another replica)."""
    rec = find(db, session_id)
    return rec is not None and rec.closed_at is not None


def rows_of(db: Database, session_ids: Collection[str]) -> dict[str, SessionRecord]:
    """The rows of ``session_ids`` that exist, by id."""
    if not session_ids:
        return {}
    with db.session() as s:
        rows = s.scalars(select(SessionRecord).where(SessionRecord.id.in_(list(session_ids))))
        return {r.id: r for r in rows}


def open_on_nodes(
    db: Database, owner: str | None, node_ids: Collection[str], limit: int = 10_000
) -> list[SessionRecord]:
    """Open sessions on the agents ``node_ids`` (of ``owner``; None: everyone's), oldest first."""
    if not node_ids:
        return []
    query = select(SessionRecord).where(SessionRecord.closed_at.is_(None), SessionRecord.node_id.in_(list(node_ids)))
    if owner is not None:
        query = query.where(SessionRecord.owner == owner)
    with db.session() as s:
        return list(s.scalars(query.order_by(SessionRecord.created_at).limit(limit)))


def group_spread(db: Database, owner: str, group: str) -> dict[str, int]:
    """How many open sessions of ``owner``'s rollout group ``group`` each agent holds."""
    query = (
        select(SessionRecord.node_id, func.count())
        .where(SessionRecord.group_key == group, SessionRecord.owner == owner, SessionRecord.closed_at.is_(None))
        .group_by(SessionRecord.node_id)
    )
    with db.session() as s:
        return {node: int(n) for node, n in s.execute(query)}
