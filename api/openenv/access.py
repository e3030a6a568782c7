"""Who calls the OpenEnv face, and the control plane's state it plays on.

OpenEnv's client sends no headers of its own, so besides ``Authorization: Bearer <token>`` the face takes HTTP
Basic credentials whose password is the token: ``requests``, ``httpx`` and ``websockets`` send them from a URL's
user info (``http://openenv:rr_...@HOST:8080/openenv/FrozenLake-v0``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from rockroll.api.server.auth import Principal
from rockroll.api.server.deps import principal_for
from rockroll.api.server.errors import ApiError
from rockroll.api.server.state import AppState

__all__ = ["principal_of", "face_state", "Caller", "caller", "CallerDep"]


async def principal_of(state: AppState, headers: Mapping[str, str]) -> Principal:
    """The caller, from ``Authorization: Bearer <token>`` or ``Basic`` credentials whose password is the token
    (the dev principal in dev mode without a header); ``ApiError`` 401 otherwise."""
    header = headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "basic":
        try:
            _user, _, token = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError) as e:
            raise ApiError(401, "unauthorized", "malformed Basic credentials") from e
        if not token:
            raise ApiError(
                401, "unauthorized", "Basic credentials carry the API token as password: http://openenv:TOKEN@..."
            )
        header = f"Bearer {token}"
    return await principal_for(state, header)


def face_state(face: Any) -> AppState:
    """The control plane's state, from the face app (``face.state.rr_of``, set by ``create_face``)."""
    state_of: Callable[[], AppState] = face.state.rr_of
    return state_of()


@dataclass(frozen=True)
class Caller:
    """An authenticated request for one env the caller may play."""

    state: AppState
    who: Principal
    env: dict[str, Any]  # the catalog's view of the env (id, description, owner, version, ...)

    @property
    def env_id(self) -> str:
        return str(self.env["id"])


async def caller(request: Request) -> Caller:
    """Authenticate, then find the env of the mount's ``env_id`` among those the caller may see (else 404)."""
    state = face_state(request.app)
    who = await principal_of(state, request.headers)
    return Caller(state, who, state.catalog.get(request.path_params["env_id"], who))


CallerDep = Annotated[Caller, Depends(caller)]
