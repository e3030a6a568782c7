"""An ``Idempotency-Key`` remembers the body it was used with: ``api_sessions.open_hash``.

A resent open with the same key and the same body answers the session the first one opened; the same
key with another body is refused (422), so a key reused by mistake never hands back a different env.
Sessions opened before this column keep none (``NULL``) and answer as before.

Revision ID: 0005_open_hash
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_open_hash"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable ``open_hash`` column of ``api_sessions``."""
    op.add_column("api_sessions", sa.Column("open_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    """Drop ``open_hash``."""
    with op.batch_alter_table("api_sessions") as batch:
        batch.drop_column("open_hash")
