"""Custom envs get a visibility (private unless shared) and live in their owner's namespace.

Every existing custom env becomes ``private`` and its id ``OWNER/ID`` (``alice/Maze-v0``), so a
custom env registered before namespaces can no longer capture another owner's requests. A row whose
owner cannot name a namespace (empty, ``rockroll`` in any case, or an id that would pass 128
characters) keeps its bare id: the catalog resolves bare ids to the built-in envs first and shows a
private env to its owner and admins only, so such a row shadows nothing (its owner or an admin can
still see and delete it by that id).

Revision ID: 0002
Revises: 0001
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_NAMESPACE = re.compile(r"^(?!\.\.?$)[A-Za-z0-9_.\-]{1,128}$")  # as rockroll.envhub.registry reads it


def _namespaced(env_id: str, owner: str) -> str | None:
    """``owner/env_id``, or None when the row keeps its id (see the module docstring)."""
    if "/" in env_id or not _NAMESPACE.match(owner or "") or owner.lower() == "rockroll":
        return None
    full = f"{owner}/{env_id}"
    return full if len(full) <= 128 else None


def upgrade() -> None:
    """Add ``visibility`` (every existing env private) and namespace the existing ids."""
    op.add_column("api_envs", sa.Column("visibility", sa.String(16), nullable=False, server_default="private"))
    conn = op.get_bind()
    envs = sa.table("api_envs", sa.column("env_id"), sa.column("name"), sa.column("owner"))
    rows = conn.execute(sa.select(envs.c.env_id, envs.c.name, envs.c.owner)).all()
    taken = {r.env_id for r in rows}
    for env_id, name, owner in rows:
        full = _namespaced(env_id, owner)
        if full is None or full in taken:
            continue
        conn.execute(envs.update().where(envs.c.env_id == env_id).values(env_id=full, name=f"{owner}/{name}"))


def downgrade() -> None:
    """Drop ``visibility`` (ids keep their namespace: a bare id could collide with another owner's)."""
    with op.batch_alter_table("api_envs") as batch:
        batch.drop_column("visibility")
