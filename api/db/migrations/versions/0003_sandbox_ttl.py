"""User sandboxes get a lifetime: ``expires_at`` (wall-clock seconds) on their owner record.

Sandboxes made before lifetimes keep none (``NULL``): they live until deleted, as when they were made.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable ``expires_at`` column of ``api_sandboxes``."""
    op.add_column("api_sandboxes", sa.Column("expires_at", sa.Float, nullable=True))


def downgrade() -> None:
    """Drop ``expires_at``."""
    with op.batch_alter_table("api_sandboxes") as batch:
        batch.drop_column("expires_at")
