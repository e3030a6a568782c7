"""Bearer tokens: creation (``rockroll token create``), hashing and lookup.

A token is ``rr_`` + 43 URL-safe characters (256 random bits). Only its SHA-256 hash is stored;
the plain token is shown once, at creation. The token's *name* is its owner: every sandbox,
session and job records it, and only that owner (or an admin) sees them.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from sqlalchemy import select

from rockroll.api.db import Database, TokenRecord

__all__ = ["Principal", "create_token", "lookup_token", "list_tokens", "revoke_token", "hash_token", "DEV_PRINCIPAL"]

TOKEN_PREFIX = "rr_"


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token owner's name, whether it is an admin, and the id of the token presented
    ('' in dev mode; session tokens for the data plane carry it, so revoking it reaches them)."""

    owner: str
    admin: bool = False
    token_id: str = field(default="", compare=False)

    def can_see(self, owner: str) -> bool:
        """Whether this caller may see a resource owned by ``owner``."""
        return self.admin or owner == self.owner


#: the caller in development mode (no tokens; loopback only)
DEV_PRINCIPAL = Principal(owner="dev", admin=True)


def hash_token(token: str) -> str:
    """SHA-256 hex digest of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(db: Database, name: str, *, admin: bool = False) -> str:
    """Create a token for owner ``name`` and return it in plain text (it is not stored)."""
    if not name or len(name) > 128 or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ValueError(f"token name must be 1-128 letters, digits, '-', '_' or '.', got {name!r}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with db.session() as s:
        s.add(TokenRecord(id=secrets.token_hex(8), name=name, token_hash=hash_token(token), admin=admin))
    return token


def lookup_token(db: Database, token: str) -> Principal | None:
    """The principal a token belongs to, or None for an unknown or revoked token."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 256:
        return None
    with db.session() as s:
        rec = s.scalars(select(TokenRecord).where(TokenRecord.token_hash == hash_token(token))).first()
        if rec is None or rec.revoked:
            return None
        return Principal(owner=rec.name, admin=rec.admin, token_id=rec.id)


def list_tokens(db: Database) -> list[TokenRecord]:
    """Every token record (hashes only)."""
    with db.session() as s:
        return list(s.scalars(select(TokenRecord).order_by(TokenRecord.created_at)))


def revoke_token(db: Database, token_id: str) -> bool:
    """Revoke a token by its id; False when there is none."""
    with db.session() as s:
        rec = s.get(TokenRecord, token_id)
        if rec is None:
            return False
        rec.revoked = True
        return True
