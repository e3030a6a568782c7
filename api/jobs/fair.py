"""Fair shares of job workers between owners (issue 48 item 4).

:class:`FairPool` runs a server's queued jobs on ``workers`` shared worker threads plus ``reserve``
reserve ones, by these rules:

* a freed worker takes the next job of the waiting owner with the fewest running jobs; among owners
  running as many, the one served longest ago (round robin); an owner's own jobs go oldest first;
* an owner's jobs hold at most ``share(owner, workers)`` of the shared workers (``job_workers_per_owner``);
* a reserve worker runs only a job of an owner who runs none, and only while every shared worker is
  busy. So however long one owner's jobs run, and however many workers they hold, another owner's job
  starts at once: on a 2-worker server, B's two long jobs keep their workers and A's job runs beside
  them. An owner alone uses all ``workers`` (never the reserve); the server runs at most
  ``workers + reserve`` jobs.

Nothing is preempted: a running job keeps its worker until it ends, is cancelled, or passes its
wall-clock cap (:mod:`rockroll.api.jobs.caps`). The counts are this server's (a replica shares its
database's jobs but runs its own workers).

Threat model: one owner submits many long jobs; another owner's job must still start at once.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

__all__ = ["FairPool"]

log = logging.getLogger("rockroll.api")


class FairPool:
    """Queued jobs per owner, run ``run(job_id)`` on worker threads by the rules of the module docstring."""

    def __init__(
        self,
        run: Callable[[str], None],
        workers: int,
        reserve: int = 1,
        share: Callable[[str, int], int] | None = None,
    ) -> None:
        if workers < 1 or reserve < 0:
            raise ValueError(f"a job pool needs workers >= 1 and reserve >= 0, got {workers} and {reserve}")
        self._run, self.workers, self.reserve = run, workers, reserve
        self._share = share or (lambda _owner, n: n)  # (owner, workers) -> the shared workers owner may hold
        self._queued: dict[str, deque[str]] = {}  # owner -> job ids, oldest first
        self._running: dict[str, int] = {}
        self._served: dict[str, int] = {}  # owner -> the tick of its latest start
        self._tick = 0
        self._idle_shared = 0  # shared workers waiting for a job
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, job_id: str, owner: str = "") -> None:
        """Queue ``job_id`` of ``owner`` (a job queued already is not queued twice)."""
        with self._cond:
            if self._closed or any(job_id in q for q in self._queued.values()):
                return
            self._queued.setdefault(owner, deque()).append(job_id)
            if not self._threads:  # started on first use, as an executor's
                for i in range(self.workers + self.reserve):
                    reserve = i >= self.workers
                    t = threading.Thread(target=self._serve, args=(reserve,), name=f"job-{i}", daemon=True)
                    t.start()
                    self._threads.append(t)
            self._cond.notify_all()

    def discard(self, job_id: str) -> None:
        """Drop a queued job (it was cancelled)."""
        with self._cond:
            for owner, q in list(self._queued.items()):
                if job_id in q:
                    q.remove(job_id)
                    if not q:
                        del self._queued[owner]

    def shutdown(self) -> None:
        """Run nothing more and wait for the running jobs; queued ones are left (in the database)."""
        with self._cond:
            self._closed = True
            self._queued.clear()
            self._cond.notify_all()
            threads = list(self._threads)
        for t in threads:
            t.join()

    # ---------------------------------------------------------- workers
    def _serve(self, reserve: bool) -> None:
        while (picked := self._take(reserve)) is not None:
            owner, job_id = picked
            try:
                self._run(job_id)
            except Exception:  # noqa: BLE001 - one job's failure never stops a worker
                log.exception("job %s: the runner failed", job_id)
            finally:
                with self._cond:
                    left = self._running.get(owner, 1) - 1
                    if left > 0:
                        self._running[owner] = left
                    else:
                        self._running.pop(owner, None)
                    self._cond.notify_all()

    def _take(self, reserve: bool) -> tuple[str, str] | None:
        with self._cond:
            while not self._closed:
                owner = self._pick(reserve)
                if owner is not None:
                    q = self._queued[owner]
                    job_id = q.popleft()
                    if not q:
                        del self._queued[owner]
                    self._running[owner] = self._running.get(owner, 0) + 1
                    self._tick += 1
                    self._served[owner] = self._tick
                    self._cond.notify_all()  # the idle count changed: a reserve worker may take what waits
                    return owner, job_id
                self._idle_shared += 0 if reserve else 1
                self._cond.wait()
                self._idle_shared -= 0 if reserve else 1
            return None

    def _pick(self, reserve: bool) -> str | None:
        """The owner whose job this worker takes next (None: none it may take)."""
        if reserve and self._idle_shared:  # a shared worker is free: the job is its
            return None
        running = self._running.get
        ready = [
            o for o in self._queued if (running(o, 0) == 0 if reserve else running(o, 0) < self._share(o, self.workers))
        ]
        return min(ready, key=lambda o: (running(o, 0), self._served.get(o, 0)), default=None)
