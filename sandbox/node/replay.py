"""The bytes that step replay records may hold: per session and per process.

A node agent keeps the latest answers of each session so that a client that lost a connection can
replay its last step (:mod:`rockroll.sandbox.node.sequence`). Answers come from env code, some of
it an owner's own (a custom env may return 31 MB observations), so the records are bounded in
bytes, not only in count:

* ``ROCKROLL_REPLAY_SESSION_BYTES`` (default 1 MiB, at most 64 MiB): the most one session keeps.
  An answer larger than this is delivered but not kept; older answers make room for a new one.
* ``ROCKROLL_REPLAY_OWNER_BYTES`` (default 16 MiB, at most the total): the most all sessions of one
  owner keep together, so one owner's large answers cannot take the process's bytes from the others.
* ``ROCKROLL_REPLAY_TOTAL_BYTES`` (default 64 MiB, at most 4 GiB): the most all sessions of this
  process keep together. The latest answer of a session is kept past the owner's and the process's
  bounds when it is at most :data:`FLOOR_BYTES` (the session then keeps only that one): the process
  holds at most ``total + sessions * FLOOR_BYTES``.

Sizes are the Python objects' memory (``sys.getsizeof`` over the containers of JSON values), which
is what the records cost. Threat model: env code and clients are untrusted; a record is never kept
past these bounds, whatever the answers hold.
"""

from __future__ import annotations

import os
import sys
import threading

__all__ = [
    "ReplayBudget",
    "answer_bytes",
    "replay_budget",
    "set_replay_budget",
    "SESSION_BYTES_ENV",
    "TOTAL_BYTES_ENV",
    "OWNER_BYTES_ENV",
    "FLOOR_BYTES",
]

SESSION_BYTES_ENV = "ROCKROLL_REPLAY_SESSION_BYTES"
TOTAL_BYTES_ENV = "ROCKROLL_REPLAY_TOTAL_BYTES"
OWNER_BYTES_ENV = "ROCKROLL_REPLAY_OWNER_BYTES"
DEFAULT_OWNER_BYTES = 16 * 1024 * 1024
DEFAULT_SESSION_BYTES = 1024 * 1024
DEFAULT_TOTAL_BYTES = 64 * 1024 * 1024
MAX_SESSION_BYTES = 64 * 1024 * 1024
"""The server-side cap of ``ROCKROLL_REPLAY_SESSION_BYTES``."""
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024
"""The server-side cap of ``ROCKROLL_REPLAY_TOTAL_BYTES``."""
FLOOR_BYTES = 64 * 1024
"""A session's latest answer up to this size is kept even when the process's bytes are spent."""
EXCEPTION_BYTES = 512
"""What a recorded error costs besides its message."""


class ReplayBudget:
    """The byte bounds of replay records and the bytes the records of this process hold (thread-safe)."""

    def __init__(
        self,
        session_bytes: int = DEFAULT_SESSION_BYTES,
        total_bytes: int = DEFAULT_TOTAL_BYTES,
        owner_bytes: int | None = None,
    ) -> None:
        if not 0 <= session_bytes <= MAX_SESSION_BYTES:
            raise ValueError(f"the replay bytes per session must be 0..{MAX_SESSION_BYTES}, got {session_bytes}")
        if not session_bytes <= total_bytes <= MAX_TOTAL_BYTES:
            raise ValueError(
                f"the replay bytes per process must be {session_bytes}..{MAX_TOTAL_BYTES} "
                f"(at least the bytes per session), got {total_bytes}"
            )
        owner_bytes = min(DEFAULT_OWNER_BYTES, total_bytes) if owner_bytes is None else owner_bytes
        if not session_bytes <= owner_bytes <= total_bytes:
            raise ValueError(
                f"the replay bytes per owner must be {session_bytes}..{total_bytes} "
                f"(between the bytes per session and per process), got {owner_bytes}"
            )
        self.session_bytes = session_bytes
        self.total_bytes = total_bytes
        self.owner_bytes = owner_bytes
        self.used = 0
        self.by_owner: dict[str, int] = {}
        self._lock = threading.RLock()  # a log's finalizer may give bytes back from a collection in any thread

    @classmethod
    def from_env(cls) -> ReplayBudget:
        """The bounds ``ROCKROLL_REPLAY_SESSION_BYTES`` and ``ROCKROLL_REPLAY_TOTAL_BYTES`` name (defaults where unset)."""
        total = _env_int(TOTAL_BYTES_ENV, DEFAULT_TOTAL_BYTES)
        owner = _env_int(OWNER_BYTES_ENV, min(DEFAULT_OWNER_BYTES, total))
        return cls(_env_int(SESSION_BYTES_ENV, DEFAULT_SESSION_BYTES), total, owner)

    def take(self, n: int, *, owner: str = "", force: bool = False) -> bool:
        """Count ``n`` more bytes as held by ``owner``; False (nothing counted) when that passes the
        owner's or the process's bound, unless ``force``."""
        with self._lock:
            mine = self.by_owner.get(owner, 0)
            if not force and (self.used + n > self.total_bytes or mine + n > self.owner_bytes):
                return False
            self.used += n
            self.by_owner[owner] = mine + n
            return True

    def give(self, n: int, owner: str = "") -> None:
        """``n`` bytes held by ``owner`` were dropped."""
        with self._lock:
            self.used -= n
            left = self.by_owner.get(owner, 0) - n
            if left > 0:
                self.by_owner[owner] = left
            else:
                self.by_owner.pop(owner, None)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of bytes, got {raw!r}") from None


_budget: ReplayBudget | None = None
_budget_lock = threading.Lock()


def replay_budget() -> ReplayBudget:
    """This process's budget (read from the environment at first use)."""
    global _budget
    with _budget_lock:
        if _budget is None:
            _budget = ReplayBudget.from_env()
        return _budget


def set_replay_budget(budget: ReplayBudget) -> None:
    """Use ``budget`` for the step logs made from now on (a server configured otherwise than by its environment)."""
    global _budget
    with _budget_lock:
        _budget = budget


def answer_bytes(answer: object, cap: int) -> int:
    """The memory ``answer`` (a JSON value, or a recorded error) holds; counting stops once past ``cap``."""
    if isinstance(answer, BaseException):
        return EXCEPTION_BYTES + sys.getsizeof(str(answer))
    total = 0
    stack = [answer]
    while stack and total <= cap:
        item = stack.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total
