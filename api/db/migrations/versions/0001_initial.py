"""Initial control-plane schema: tokens, custom envs, sandbox owners, sessions, jobs.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the tables."""
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, index=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True, index=True),
        sa.Column("admin", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked", sa.Boolean, nullable=False),
    )
    op.create_table(
        "api_envs",
        sa.Column("env_id", sa.String(128), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, index=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("entry_point", sa.String(256), nullable=False),
        sa.Column("image", sa.String(256), nullable=False),
        sa.Column("source_name", sa.String(256), nullable=False),
        sa.Column("source", sa.LargeBinary, nullable=True),
        sa.Column("kwargs", sa.JSON, nullable=False),
        sa.Column("max_steps", sa.Integer, nullable=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "api_sandboxes",
        sa.Column("sandbox_id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "api_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("env_id", sa.String(128), nullable=False),
        sa.Column("kwargs", sa.JSON, nullable=False),
        sa.Column("sandbox_id", sa.String(64), nullable=False, index=True),
        sa.Column("steps", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("closed_at", sa.Float, nullable=True),
    )
    op.create_table(
        "api_jobs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("progress", sa.Float, nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("logs", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("finished_at", sa.Float, nullable=True),
    )


def downgrade() -> None:
    """Drop the tables."""
    for table in ("api_jobs", "api_sessions", "api_sandboxes", "api_envs", "api_tokens"):
        op.drop_table(table)
