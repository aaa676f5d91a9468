"""The bad-input battery, the rows that need a server: identities on every store, and a
provider's bad answers on a real HTTP server (see ``test_bad_inputs.py`` for the table)."""

from __future__ import annotations

import functools
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent
from agentfootprint.errors import RunError
from agentfootprint.memory import MemoryEntry, MemoryIdentity, RedisStore, SQLiteStore

# -- one rule for identities on every store ----------------------------------------------------


def _redis_url() -> str:
    found = os.environ.get("AGENTFOOTPRINT_REDIS_URL")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("AGENTFOOTPRINT_REDIS_URL is unset under CI; .ci/run starts redis-server.")
    pytest.skip("needs AGENTFOOTPRINT_REDIS_URL=redis://… (a running server)")


@pytest.fixture(params=["sqlite", "redis", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Each durable store in turn (Redis and PostgreSQL when their servers are there)."""
    if request.param == "sqlite":
        store: Any = SQLiteStore(tmp_path / "memory.db")
    elif request.param == "redis":
        store = RedisStore(_redis_url(), prefix=f"afbad-{uuid.uuid4().hex}")
    else:
        from agentfootprint.memory import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_url"),
                              schema=request.getfixturevalue("pg_schema"))
    yield store
    if request.param == "redis":
        client = store._redis("cleanup")
        keys = [key async for key in client.scan_iter(f"{store.prefix}/*")]
        if keys:
            await client.delete(*keys)
    await store.aclose()


def test_a_stored_identity_breaking_the_rule_reads_as_a_validation_error() -> None:
    """The rule's error is a ValueError too, so a row written before it (an entry's source
    identity) is a Pydantic validation error, which every store reports as unreadable."""
    from pydantic import ValidationError

    from agentfootprint.memory import MemorySource

    with pytest.raises(ValidationError, match="over the 256 every store accepts"):
        MemorySource.model_validate({"identity": {"conversation_id": "a" * 300}})


async def test_the_widest_identity_the_rule_allows_is_kept_by_every_store(any_store: Any) -> None:
    """The identity rule is the stores' common ground: 256 four-byte characters (or 256 '%',
    which the namespace escapes threefold) in every field are written and read back on each."""
    for char in ("\U0001f600", "%"):
        wide = char * 256
        identity = MemoryIdentity(wide, principal=wide, tenant=wide)
        await any_store.put(identity, MemoryEntry(id="msg-1-0", value={"n": 1}))
        found = await any_store.get(identity, "msg-1-0")
        assert found is not None and found.value == {"n": 1}
        assert found.source is None or found.source.identity in (None, identity)


# -- a provider's bad answer: an error keeping the evidence, retried, never the answer -----------


@functools.cache
def _wire_server() -> Any:
    """``tests/providers/wire_server.py`` (a real HTTP server answering as planned)."""
    import importlib.util

    name = "bad_inputs_wire_server"
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).parent / "providers" / "wire_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
async def wire() -> Any:
    pytest.importorskip("openai")
    server = _wire_server().WireServer()
    await server.start()
    yield server
    await server.stop()


async def test_a_stream_cut_before_its_finish_is_an_error_not_the_answer(wire: Any) -> None:
    """No finish_reason, no [DONE]: the partial text is evidence in the error, not an answer."""
    from agentfootprint.errors import StreamIncompleteError
    from agentfootprint.providers import openai

    ws = _wire_server()
    wire.plan(ws.sse_reply(ws.openai_stream(["Order ", "A-1 ", "ship"], finish=False,
                                            done=False)))
    agent = Agent(provider=openai(base_url=f"{wire.url}/v1", model="m", retry=None), model="m",
                  stream=True)
    with pytest.raises(StreamIncompleteError) as caught:
        await agent.run("?")
    assert caught.value.partial == "Order A-1 ship" and caught.value.retryable
    assert wire.url in str(caught.value) and "with_retry(provider) asks again" in str(caught.value)


@pytest.mark.parametrize("first", ["non-json-200", "429-retry-after-3"])
async def test_a_bad_provider_answer_is_retried_as_the_server_asks(wire: Any, first: str) -> None:
    """A 200 whose body is not JSON is a MalformedResponseError (status kept) that with_retry
    asks again after; a 429 with Retry-After: 3 is waited on for at least 3 s."""
    from agentfootprint.errors import MalformedResponseError
    from agentfootprint.providers import openai, with_retry

    ws = _wire_server()
    bad = (ws.raw_reply(b"{not json") if first == "non-json-200"
           else ws.json_reply({}, status=429, headers={"Retry-After": "3"}))
    wire.plan(bad)
    with pytest.raises(MalformedResponseError if first == "non-json-200" else RunError) as once:
        await Agent(provider=openai(base_url=f"{wire.url}/v1", model="m", retry=None),
                    model="m").run("?")
    assert getattr(once.value, "status", None) == (200 if first == "non-json-200" else 429)
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    wire.plan(bad, ws.json_reply(ws.openai_completion("fine")))
    provider = with_retry(openai(base_url=f"{wire.url}/v1", model="m"), sleep=sleep)
    assert (await Agent(provider=provider, model="m").run("?")).content == "fine"
    assert len(wire.requests) == 2 and len(waits) == 1
    assert waits[0] >= (3.0 if first == "429-retry-after-3" else 0.0)
