"""JSON as types: what ``json.loads`` gives back, what crosses a wire or a file as JSON.

:data:`JSONValue` is the honest type of a decoded payload (a value read from a socket, a worker's
answer, a file): code narrows it (``isinstance``) before it reads a field. :data:`JSONObject` is a
decoded object. Where a value is only passed on (encoded again, logged), ``object`` is enough.

Light on purpose (no imports): the in-sandbox server uses it before any env library loads.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONObject", "JSONScalar", "JSONValue"]

#: a JSON scalar: a string, a number, a boolean or null
JSONScalar: TypeAlias = str | int | float | bool | None
#: any JSON value: a scalar, an array or an object
JSONValue: TypeAlias = str | int | float | bool | None | list["JSONValue"] | dict[str, "JSONValue"]
#: a JSON object
JSONObject: TypeAlias = dict[str, JSONValue]
