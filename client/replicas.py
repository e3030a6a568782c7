"""One request's walk over the control-plane replicas, written once for both clients.

Split from :mod:`rockroll.client.sdk`, whose docstring tells the policy: a request goes to the replica that
answered last, on to the next when one refuses the connection (the request was never sent) or answers
``409 session_elsewhere``, and (a request safe to resend) when one leaves it unanswered for the client's
timeout, once to each; when every replica refused, the round is repeated with backoff. :class:`Attempts` is
that state machine; :class:`~rockroll.client.sdk.Client` and :class:`~rockroll.client.sdk.AsyncClient` only
sleep, send and report back::

    attempts = Attempts(routes, resend)
    for delay_s, url in attempts:
        sleep(delay_s)                            # 0 but at the start of a repeated round
        try:
            resp = send(url + path)
        except RETRIED as e:
            attempts.failed(e)                    # raises unless the next replica is tried
            continue
        if attempts.answered(resp):
            return resp
    raise attempts.exhausted()                    # the last refusal
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx

from rockroll.client.routes import _NOT_SENT, _STALLED, elsewhere

if TYPE_CHECKING:
    from rockroll.client.routes import _Routes

__all__ = ["RETRIED", "Attempts"]

#: the errors an attempt reports to :meth:`Attempts.failed` (the others propagate as they are)
RETRIED = (*_NOT_SENT, *_STALLED)


class Attempts:
    """The attempts of one request over ``routes.urls`` (several replicas); iterate for ``(delay_s, url)``.

    ``resend``: the request is safe to send again (an idempotent method, or a route that carries its own
    idempotency), so a replica that left it unanswered is not the end of it.
    """

    def __init__(self, routes: _Routes, resend: bool) -> None:
        self.routes, self.resend = routes, resend
        self.error: Exception | None = None  # the last refusal
        self.stalled: set[int] = set()  # replicas that left this request unanswered
        self._i = self._at = 0  # the attempt under way, and its replica

    def __iter__(self) -> Iterator[tuple[float, str]]:
        """``(delay_s, url)`` per attempt: each replica ``retries + 1`` times from the one that answered last
        (those that stalled skipped), ``delay_s`` > 0 when a round starts again after every replica refused."""
        routes = self.routes
        n = len(routes.urls)
        order = [(routes._at + i) % n for i in range(n)] * (routes.retries + 1)
        for i, at in enumerate(order):
            if at in self.stalled:
                continue
            self._i, self._at = i, at
            yield (min(2.0, 0.1 * 2 ** (i // n)) if i and i % n == 0 else 0.0), routes.urls[at]

    def exhausted(self) -> Exception:
        """What to raise when no attempt is left: the last refusal (or RuntimeError: no replica to send to)."""
        return self.error or RuntimeError("no replica to send to")

    def failed(self, error: Exception) -> None:
        """The attempt raised ``error`` (one of :data:`RETRIED`): return to go on to the next attempt, else
        raise it. A refused connection goes on; a replica that left a resendable request unanswered too,
        until every replica did (the next request starts at the next replica either way)."""
        if isinstance(error, _NOT_SENT):
            self.error = error
            return
        self.stalled.add(self._at)
        self.routes._at = (self._at + 1) % len(self.routes.urls)
        if self.resend and len(self.stalled) < len(self.routes.urls):
            return
        raise error

    def answered(self, resp: httpx.Response) -> bool:
        """Whether ``resp`` is the request's answer (recorded as the replica that answered last); False: a
        ``409 session_elsewhere`` with another replica left to ask."""
        if elsewhere(resp) and self._i + 1 < len(self.routes.urls):
            return False
        self.routes._at = self._at
        return True
