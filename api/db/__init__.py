"""Persistence of the control plane: SQLAlchemy 2 models, engine set-up and Alembic migrations."""

from rockroll.api.db.engine import Database
from rockroll.api.db.models import Base, EnvRecord, JobRecord, NodeRecord, SandboxOwner, SessionRecord, TokenRecord

__all__ = ["Base", "Database", "EnvRecord", "JobRecord", "NodeRecord", "SandboxOwner", "SessionRecord", "TokenRecord"]
