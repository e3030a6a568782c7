"""Control-plane replicas share one database: node agents, where each session runs, who runs each job.

* ``api_nodes``: the standalone node agents (endpoint, capacity, last heartbeat, boot id, lost reason);
* ``api_sessions.node_id`` / ``system_prompt`` / ``group_key`` / ``server`` / ``open_key``: any replica
  can serve a session opened on another one, placement spreads one rollout group's sessions over
  nodes, and an open resent with its ``Idempotency-Key`` finds the session it opened;
* ``api_jobs.runner`` / ``cancel_requested``: the server that runs a job (another replica takes it
  over once that server's lease lapses) and a cancel asked at another replica.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``api_nodes``; add the new session and job columns."""
    op.create_table(
        "api_nodes",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("endpoint", sa.String(300), nullable=False),
        sa.Column("capacity", sa.Integer, nullable=False),
        sa.Column("sessions", sa.Integer, nullable=False),
        sa.Column("boot", sa.String(64), nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("lost", sa.Text, nullable=False),
    )
    op.add_column("api_sessions", sa.Column("node_id", sa.String(64), nullable=False, server_default=""))
    op.add_column("api_sessions", sa.Column("system_prompt", sa.Text, nullable=False, server_default=""))
    op.add_column("api_sessions", sa.Column("group_key", sa.String(128), nullable=False, server_default=""))
    op.add_column("api_sessions", sa.Column("server", sa.String(128), nullable=False, server_default=""))
    op.add_column("api_sessions", sa.Column("open_key", sa.String(64), nullable=True))
    with op.batch_alter_table("api_sessions") as batch:
        batch.create_unique_constraint("uq_api_sessions_owner_open_key", ["owner", "open_key"])
    op.create_index("ix_api_sessions_node_id", "api_sessions", ["node_id"])
    op.create_index("ix_api_sessions_group_key", "api_sessions", ["group_key"])
    op.add_column("api_jobs", sa.Column("runner", sa.String(128), nullable=False, server_default=""))
    op.add_column("api_jobs", sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    with op.batch_alter_table("api_jobs") as batch:
        batch.drop_column("cancel_requested")
        batch.drop_column("runner")
    op.drop_index("ix_api_sessions_group_key", "api_sessions")
    op.drop_index("ix_api_sessions_node_id", "api_sessions")
    with op.batch_alter_table("api_sessions") as batch:
        batch.drop_constraint("uq_api_sessions_owner_open_key", type_="unique")
        batch.drop_column("open_key")
        batch.drop_column("server")
        batch.drop_column("group_key")
        batch.drop_column("system_prompt")
        batch.drop_column("node_id")
    op.drop_table("api_nodes")
