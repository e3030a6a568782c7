"""The point where the scheduler suspends generation to update weights (:class:`GenerationGate`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["GenerationGate"]


class GenerationGate:
    """Lets the scheduler suspend generation (to update weights) and wait until none is in flight."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.in_flight = 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a generation slot (waits while suspended)."""
        await self._open.wait()
        self.in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()

    async def suspend(self) -> None:
        """Stop new generations and wait for those in flight to end."""
        self._open.clear()
        await self._idle.wait()

    def resume(self) -> None:
        self._open.set()

    @property
    def suspended(self) -> bool:
        return not self._open.is_set()
