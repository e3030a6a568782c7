"""One running manager per name: the ``sandbox_manager_leases`` table (:mod:`rockroll.sandbox.lease`).

Revision ID: s0002
Revises: s0001
"""

import sqlalchemy as sa
from alembic import op

revision = "s0002"
down_revision = "s0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``sandbox_manager_leases``."""
    op.create_table(
        "sandbox_manager_leases",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    """Drop ``sandbox_manager_leases``."""
    op.drop_table("sandbox_manager_leases")
