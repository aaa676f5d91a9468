"""How every built-in store is closed: ``aclose()``, ``close_sync()`` or ``async with``.

A store writes ``aclose`` (the async release of its connection, pool or client); this mixin
adds the synchronous twin and the context manager, so the four stores cannot drift apart. A
store whose release never waits (a file, a dict) overrides ``close_sync`` instead of running a
coroutine for it.
"""

from __future__ import annotations

from typing import Self

from ...flow._run import run_sync

__all__ = ["Closing"]


class Closing:
    """Mixin for stores: ``close_sync`` and ``async with`` on top of the store's ``aclose``."""

    async def aclose(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement aclose()")

    def close_sync(self) -> None:
        """``aclose`` from synchronous code (on the thread's loop that ``*_sync`` calls use)."""
        run_sync(self.aclose())

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
