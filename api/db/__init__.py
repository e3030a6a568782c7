"""Persistence of the control plane: SQLAlchemy 2 models, engine set-up and Alembic migrations."""

from api.db.engine import Database
from api.db.models import Base, EnvRecord, JobRecord, SandboxOwner, SessionRecord, TokenRecord

__all__ = ["Base", "Database", "EnvRecord", "JobRecord", "SandboxOwner", "SessionRecord", "TokenRecord"]
