"""Who calls the OpenEnv face, and the control plane's state it plays on.

OpenEnv's client sends no headers of its own, so besides ``Authorization: Bearer <token>`` the face takes HTTP
Basic credentials whose password is the token: ``requests``, ``httpx`` and ``websockets`` send them from a URL's
user info (``http://openenv:rr_...@HOST:8080/openenv/FrozenLake-v0``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any

from rockroll.api.server.auth import Principal
from rockroll.api.server.deps import principal_for
from rockroll.api.server.errors import ApiError
from rockroll.api.server.state import AppState

__all__ = ["principal_of", "face_state"]


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
