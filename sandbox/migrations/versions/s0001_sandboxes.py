"""The sandbox manager's records: the ``sandboxes`` table.

Older rockroll made this table with ``create_all`` and no version table; such a table already has
this exact schema, so it is adopted as is.

Revision ID: s0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "s0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``sandboxes`` (unless an older rockroll made it already)."""
    if sa.inspect(op.get_bind()).has_table("sandboxes"):
        return
    op.create_table(
        "sandboxes",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("manager", sa.String(64), nullable=False, index=True),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("pool", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("socket_path", sa.String(255), nullable=False),
        sa.Column("ref", sa.String(128), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("boot_id", sa.String(32), nullable=False),
        sa.Column("restarts", sa.Integer, nullable=False),
        sa.Column("leased", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    """Drop ``sandboxes``."""
    op.drop_table("sandboxes")
