"""What keeps one caller from taking the server down: body size, run time, runs at once.

* ``read_body(request, limit)`` reads a request body of at most ``limit`` bytes (a declared
  ``Content-Length`` over it is refused before a byte is read; a chunked body is counted as it
  arrives) — ``HTTPProblem(413)`` otherwise.
* ``RunSlots`` counts each principal's runs under way and refuses one more than
  ``max_concurrent`` with ``HTTPProblem(429)``. A slot is held until the run ends, also when
  its SSE reader went away. The count is per server process: with ``--workers N`` a principal
  may have up to N times as many runs at once.
* the per-request timeout is ``asyncio.timeout`` around the run, in ``_app.py`` (504).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["HTTPProblem", "RunSlots", "read_body"]

_NUMBER = re.compile(r"[0-9]{1,18}")


class HTTPProblem(Exception):
    """A request the server answers with ``status`` and one sentence, ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def read_body(request: Request, limit: int) -> bytes:
    """The body, or ``HTTPProblem(413)`` as soon as it is known to be over ``limit`` bytes."""
    declared = request.headers.get("content-length", "").strip()
    if _NUMBER.fullmatch(declared) and int(declared) > limit:  # else counted as they come
        raise HTTPProblem(413, _too_large(limit))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPProblem(413, _too_large(limit))
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> str:
    return (f"the request body is larger than this server's limit of {limit:,} bytes; "
            "send a shorter message")


class RunSlots:
    """Runs under way per principal, at most ``max_concurrent`` each (in this process)."""

    def __init__(self, max_concurrent: int) -> None:
        self.max_concurrent = max_concurrent
        self._running: Counter[str] = Counter()

    def running(self, principal: str) -> int:
        """How many runs ``principal`` has under way here."""
        return self._running[principal]

    def take(self, principal: str) -> None:
        """Take a slot, or ``HTTPProblem(429)`` when the principal has none left."""
        if self._running[principal] >= self.max_concurrent:
            raise HTTPProblem(
                429, f"you already have {self.max_concurrent} runs under way on this server, "
                     "its limit; wait for one to finish and send again")
        self._running[principal] += 1

    def give_back(self, principal: str) -> None:
        """Give a slot back (once per ``take``)."""
        self._running[principal] -= 1
        if self._running[principal] <= 0:
            del self._running[principal]

    @contextmanager
    def slot(self, principal: str) -> Iterator[None]:
        """A slot held for the block."""
        self.take(principal)
        try:
            yield
        finally:
            self.give_back(principal)
