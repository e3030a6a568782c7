"""Histories that outlive a restart: each job's metric reports and each sandbox replacement.

* ``api_job_metrics``: one row per metrics report of a job (the page plots them), bounded per job;
* ``api_restarts``: the restart log of a server's sandbox manager (time, sandbox, pool, reason),
  the newest few hundred kept.

Revision ID: 0006_histories
Revises: 0005_open_hash
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_histories"
down_revision = "0005_open_hash"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``api_job_metrics`` and ``api_restarts``."""
    op.create_table(
        "api_job_metrics",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
    )
    op.create_index("ix_api_job_metrics_job_id", "api_job_metrics", ["job_id"])
    op.create_table(
        "api_restarts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("manager", sa.String(128), nullable=False),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("event", sa.JSON, nullable=False),
    )
    op.create_index("ix_api_restarts_manager", "api_restarts", ["manager"])


def downgrade() -> None:
    """Drop both tables."""
    op.drop_index("ix_api_restarts_manager", table_name="api_restarts")
    op.drop_table("api_restarts")
    op.drop_index("ix_api_job_metrics_job_id", table_name="api_job_metrics")
    op.drop_table("api_job_metrics")
