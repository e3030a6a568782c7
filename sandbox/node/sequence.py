"""Step sequence numbers: each session's steps are numbered 1, 2, 3...; a replay returns the recorded answer.

A client numbers its steps; the agent applies step ``n`` only when the session's last applied step
is ``n - 1``. When a connection drops mid-step the client cannot know whether the step ran: it
reconnects and sends the same ``n`` again, and gets the recorded answer of step ``n`` (or, had
it not run, the step runs now). So a step is never applied twice. A number further back than the
recorded window, or one that skips ahead, is :class:`SequenceError` (409, naming the expected
number). A call without a number (the control plane's proxied routes, a reset) takes the next one.

The record is per session and in memory (the session's env state is too), bounded in count
(:data:`REPLAY_WINDOW`) and in bytes, per session and per process (:mod:`rockroll.sandbox.node.replay`).
An answer past those bounds is delivered but not kept: a replay of its number is
:class:`ReplayNotKept` (409 ``replay_not_kept``; the step was applied, it is not run again). A
reset starts no new numbering: numbers count every step of the session's life.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

from rockroll.envs.json_types import JSONObject
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.node.replay import FLOOR_BYTES, ReplayBudget, answer_bytes, replay_budget

__all__ = ["SequenceError", "SequenceRangeError", "ReplayNotKept", "StepLog", "REPLAY_WINDOW", "MAX_SEQ"]

REPLAY_WINDOW = 8
"""How many latest answers a session keeps for replays (a client retries its last step only)."""


class SequenceError(SandboxError, ValueError):
    """A step number that is neither the next one nor a recorded one (the data plane's 409)."""

    code = "bad_sequence"

    def __init__(self, session_id: str, got: int, expected: int) -> None:
        if got > expected:
            why = f"skips ahead (steps {expected}..{got - 1} were never sent)"
        else:
            why = f"is older than the last {REPLAY_WINDOW} recorded steps"
        super().__init__(f"step number {got} of session {session_id!r} {why}; the next step is number {expected}")
        self.session_id = session_id
        self.got: int | float | str = got  # what was sent (a SequenceRangeError's: shown as text unless a number)
        self.expected = expected


MAX_SEQ = 2**63 - 1
"""The largest step number (a signed 64-bit integer, as every JSON codec and database keeps it)."""


class SequenceRangeError(SequenceError):
    """A step number that is no integer from 1 to :data:`MAX_SEQ` (``got``: what was sent, as sent)."""

    def __init__(self, session_id: str, got: object, expected: int) -> None:
        shown = got if isinstance(got, (int, float)) and not isinstance(got, bool) else repr(got)[:40]
        SandboxError.__init__(
            self,
            f"step number {shown!r} of session {session_id!r} is not allowed: a step number is an integer from 1 to "
            f"{MAX_SEQ} (or left out for the next one); the next step is number {expected}",
        )
        self.session_id = session_id
        self.got = shown
        self.expected = expected


class ReplayNotKept(SequenceError):
    """A replay of a step that was applied but whose answer was not kept (too large for the replay bounds)."""

    code = "replay_not_kept"

    def __init__(self, session_id: str, got: int, expected: int, size: int) -> None:
        SandboxError.__init__(
            self,
            f"step number {got} of session {session_id!r} was applied, but its answer ({size} bytes) was not kept "
            f"for replay (over the replay byte bounds); it is not run again; the next step is number {expected}",
        )
        self.session_id = session_id
        self.got = got
        self.expected = expected
        self.size = size


#: what a step number is recorded with: the step's answer, or the error it raised
Recorded = JSONObject | BaseException


class _NotKept:
    """The place of an answer that was not kept (or dropped for room) in a session's record."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


def _give_back(budget: ReplayBudget, held: list[int], owner: str) -> None:
    budget.give(held[0], owner)
    held[0] = 0


class StepLog:
    """The numbering and the recent answers of one session (thread-safe; one step at a time)."""

    def __init__(self, session_id: str, budget: ReplayBudget | None = None, owner: str = "") -> None:
        self.session_id = session_id
        self.owner = owner  # whose bytes the kept answers count against (ReplayBudget.owner_bytes)
        self.last = 0
        self.budget = budget if budget is not None else replay_budget()
        self._answers: OrderedDict[int, Recorded | _NotKept] = OrderedDict()
        self._sizes: dict[int, int] = {}  # bytes of each kept answer
        self._held = [0]  # bytes this log holds, given back to the budget when the log goes
        weakref.finalize(self, _give_back, self.budget, self._held, owner)
        self.lock = threading.Lock()  # held while a step runs: a replay waits for the answer it replays

    @property
    def held_bytes(self) -> int:
        return self._held[0]

    def check(self, seq: object) -> tuple[int, Recorded | None]:
        """Call under :attr:`lock`: ``(seq, recorded answer or None)``; raise :class:`SequenceError`
        (:class:`ReplayNotKept` for a recorded number whose answer was not kept)."""
        if seq is None:
            return self.last + 1, None
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_SEQ:
            raise SequenceRangeError(self.session_id, seq, self.last + 1)
        if seq == self.last + 1:
            return seq, None
        if seq in self._answers:
            recorded = self._answers[seq]
            if isinstance(recorded, _NotKept):
                raise ReplayNotKept(self.session_id, seq, self.last + 1, recorded.size)
            return seq, recorded
        raise SequenceError(self.session_id, seq, self.last + 1)

    def record(self, seq: int, answer: Recorded) -> None:
        """Call under :attr:`lock`: step ``seq`` was applied with ``answer`` (errors are answers too).

        The answer is kept for replays within the byte bounds (older answers of the session make
        room for it); past them only its place is kept, so a replay says it was not kept.
        """
        self.last = seq
        self._release(seq)  # a number recorded again (never twice in practice) holds its bytes once
        budget = self.budget
        size = answer_bytes(answer, budget.session_bytes)
        kept = size <= budget.session_bytes
        if kept:
            while self._held[0] + size > budget.session_bytes:
                self._drop_oldest()
            if not budget.take(size, owner=self.owner):
                self._drop_oldest(everything=True)  # the owner's or process's bytes are spent: keep at most this one
                kept = budget.take(size, owner=self.owner, force=size <= FLOOR_BYTES)
        if kept:
            self._answers[seq] = answer
            self._sizes[seq] = size
            self._held[0] += size
        else:
            self._answers[seq] = _NotKept(size)
        while len(self._answers) > REPLAY_WINDOW:
            old, _ = self._answers.popitem(last=False)
            self._release(old)

    def _drop_oldest(self, everything: bool = False) -> None:
        """Drop the oldest kept answer (every kept one with ``everything``), keeping its place as not kept."""
        for seq in list(self._sizes):
            size = self._release(seq)
            self._answers[seq] = _NotKept(size)
            if not everything:
                return

    def _release(self, seq: int) -> int:
        size = self._sizes.pop(seq, 0)
        if size:
            self._held[0] -= size
            self.budget.give(size, self.owner)
        return size

    def run(self, seq: object, step: Callable[[], JSONObject]) -> tuple[JSONObject, bool]:
        """Apply ``step`` as number ``seq`` (or replay it): ``(answer, replayed)``.

        A step that raises is recorded as applied with its error (the env may have moved) and the
        error raised again, so a replay of it raises the same error without stepping.
        """
        with self.lock:
            n, recorded = self.check(seq)
            if recorded is not None:
                if isinstance(recorded, BaseException):
                    raise recorded
                return recorded, True
            try:
                answer = step()
            except Exception as e:
                self.record(n, e)
                raise
            self.record(n, answer)
            return answer, False
