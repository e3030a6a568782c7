"""Short-lived signed session tokens: the control plane issues them, node agents check them.

A token is a JWT (PyJWT, HS256) over ``{"sub": session id, "own": owner, "node": agent id, "exp"}``
(and ``"tid"``: the id of the API token that asked for it, when one did), signed with the deployment's cluster secret, which the control plane and every agent share. The
agent needs no database nor a call to the control plane to authorise a step: a valid signature,
an unexpired ``exp`` and a session that the agent holds for that same owner are enough.

Threat model: clients are untrusted. A token cannot be forged without the secret, cannot be
stretched (``exp`` is signed) and names one session of one owner on one agent; a stolen token
plays that one session until it expires, or until the API token it was asked with is revoked
(agents hold the revoked ids: :class:`TokenRevoked`). Refusals: a bad signature or a malformed token is
:class:`TokenInvalid` (401), an expired one :class:`TokenExpired` (401); a valid token for a
session the agent does not hold, or holds for another owner, is the agent's 404.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import jwt

from rockroll.sandbox.errors import SandboxError

__all__ = ["SessionClaims", "SessionTokens", "TokenExpired", "TokenInvalid", "TokenRejected", "TokenRevoked"]

ALGORITHM = "HS256"
MIN_SECRET_BYTES = 32
CACHE_SIZE = 8192


class TokenRejected(SandboxError, PermissionError):
    """A session token that does not authorise the call (the data plane's 401)."""

    code = "invalid_token"


class TokenInvalid(TokenRejected):
    """Not a token signed with this deployment's secret (forged, truncated, another deployment's)."""


class TokenExpired(TokenRejected):
    """A token past its ``exp``: ask the control plane for a fresh one (``POST /v1/sessions/{id}/token``)."""

    code = "token_expired"


class TokenRevoked(TokenRejected):
    """The API token this session token was asked with has been revoked."""

    code = "token_revoked"


@dataclass(frozen=True)
class SessionClaims:
    """What a valid token says: this owner may play this session on this agent until ``expires_at``."""

    session_id: str
    owner: str
    node_id: str
    expires_at: float
    token_id: str = ""  # the API token that asked for it ('' : none, e.g. dev mode)


class SessionTokens:
    """Issue and check session tokens with one shared secret (see the module docstring)."""

    def __init__(self, secret: str | bytes, *, ttl_s: float = 900.0, leeway_s: float = 0.0) -> None:
        key = secret.encode() if isinstance(secret, str) else bytes(secret)
        if len(key) < MIN_SECRET_BYTES:
            raise ValueError(f"the cluster secret must be at least {MIN_SECRET_BYTES} bytes, got {len(key)}")
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        self._key = key
        self.ttl_s = ttl_s
        self.leeway_s = leeway_s
        self._checked: OrderedDict[str, SessionClaims] = OrderedDict()  # token -> claims, signature verified
        self._lock = threading.Lock()

    def issue(
        self, session_id: str, owner: str, node_id: str, *, ttl_s: float | None = None, token_id: str = ""
    ) -> tuple[str, float]:
        """A token for ``owner`` to play ``session_id`` on ``node_id`` (asked with API token ``token_id``);
        returns ``(token, expires_at)``."""
        # whole seconds, rounded up: a JWT's exp is read as an integer (PyJWT truncates a fraction,
        # which would end the token up to a second before the expires_at the client is told)
        expires_at = float(math.ceil(time.time() + (self.ttl_s if ttl_s is None else ttl_s)))
        payload = {"sub": session_id, "own": owner, "node": node_id, "exp": expires_at}
        if token_id:
            payload["tid"] = token_id
        return jwt.encode(payload, self._key, algorithm=ALGORITHM), expires_at

    def verify(self, token: str) -> SessionClaims:
        """The token's claims; raise :class:`TokenExpired` or :class:`TokenInvalid`.

        A token whose signature was verified is remembered (the newest :data:`CACHE_SIZE`), so a
        batch naming it again costs a dictionary lookup; its expiry is checked at every use.
        """
        if not isinstance(token, str) or not token or len(token) > 4096:
            raise TokenInvalid("no session token (send the one the control plane gave with the session)")
        with self._lock:
            known = self._checked.get(token)
        if known is not None:
            if time.time() > known.expires_at + self.leeway_s:
                raise TokenExpired("the session token has expired; ask the control plane for a fresh one")
            return known
        claims = self._decode(token)
        with self._lock:
            self._checked[token] = claims
            while len(self._checked) > CACHE_SIZE:
                self._checked.popitem(last=False)
        return claims

    def _decode(self, token: str) -> SessionClaims:
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                leeway=self.leeway_s,
                options={"require": ["exp", "sub", "own", "node"]},
            )
        except jwt.ExpiredSignatureError as e:
            raise TokenExpired("the session token has expired; ask the control plane for a fresh one") from e
        except jwt.InvalidTokenError as e:
            raise TokenInvalid(f"the session token is not valid here: {e}") from e
        fields = (claims["sub"], claims["own"], claims["node"], claims.get("tid", ""))
        if not all(isinstance(v, str) for v in fields):
            raise TokenInvalid("the session token's claims are malformed")
        return SessionClaims(*fields[:3], expires_at=float(claims["exp"]), token_id=fields[3])
