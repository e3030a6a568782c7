"""A background duty of the control plane: ``tick()`` every ``interval_s`` on a daemon thread until closed.

The node watch, the revocation watch and the Ray node supervisor are such duties. A failing tick is
logged and the next one runs (a database or GCS hiccup must not stop the watch).
"""

from __future__ import annotations

import logging
import threading

__all__ = ["Periodic"]

log = logging.getLogger("rockroll.api")


class Periodic:
    """Subclasses set ``interval_s`` and ``name`` and implement :meth:`tick`."""

    interval_s: float = 1.0
    name: str = "periodic"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)

    def tick(self) -> object:
        raise NotImplementedError

    def close(self) -> None:
        """Stop ticking (subclasses release what else they hold)."""
        self.stop_ticking()

    def start_ticking(self) -> None:
        self._thread.start()

    def stop_ticking(self, join_s: float = 0.0) -> None:
        self._stop.set()
        if join_s and self._thread.is_alive():
            self._thread.join(timeout=join_s)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the duty must survive anything
                log.exception("%s failed", self.name)
