"""The ``wire`` fixture: a real HTTP server on 127.0.0.1 for this test (see ``wire_server``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from wire_server import WireServer


@pytest.fixture
async def wire() -> AsyncIterator[WireServer]:
    """A ``WireServer`` listening on 127.0.0.1 for this test."""
    server = WireServer()
    await server.start()
    yield server
    await server.stop()
