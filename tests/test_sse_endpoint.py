"""An SSE endpoint: a Starlette app streams ``agent.run_stream(...)`` over a real uvicorn on
127.0.0.1 to an httpx client; what arrives is what the run store's recording holds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from agentfootprint import Agent, Tracing, define_fact, tool
from agentfootprint.events import InjectionFired, ToolCalled, ToolReturned
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

CATALOGUE = {kind.model_fields["type"].default: kind.catalogue
             for kind in (InjectionFired, ToolCalled, ToolReturned)}
"""SSE event name -> the catalogue event the recording holds under that name."""


def sse_app(make_agent: Any) -> Starlette:
    """What a user writes: one route that forwards a streamed run as Server-Sent Events."""

    async def chat(request: Request) -> StreamingResponse:
        agent = make_agent()
        message = request.query_params["q"]

        async def frames() -> AsyncIterator[str]:
            async with agent.run_stream(message) as run:
                async for event in run:
                    yield event.sse()

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[Route("/chat", chat)])


@contextlib.asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[str]:
    """The app on a real uvicorn server, on a free port of 127.0.0.1, for the block."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", ws="none"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not server.started:
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """``(event name, JSON data)`` per SSE frame, as the frames arrive."""
    name, data = "", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            data = line[len("data: "):]
        elif not line and data:
            yield name, json.loads(data)
            name, data = "", ""


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order by id."""
    return f"order {order_id}: delivered on 2 May, 42.00 EUR"


async def test_sse_events_arrive_in_order_and_the_recording_holds_them(tmp_path: Path) -> None:
    """Over HTTP: injection, tool call, tool result, the answer's tokens, then the result; the
    result's run id opens a stored recording whose steps hold those same events, in order."""
    with RunStore(tmp_path / "runs.db") as store:
        def make_agent() -> Agent:
            return Agent(
                provider=mock(script=[
                    {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]},
                    "Order A-1001 was delivered on 2 May.",
                ]),
                model="m", system="You answer order questions.", tools=[lookup_order],
                context=[define_fact(id="tier", data="The customer is on the Pro plan.")],
                tracing=Tracing(run_store=store))

        async with (serving(sse_app(make_agent)) as base, httpx.AsyncClient() as client,
                    client.stream("GET", f"{base}/chat",
                                  params={"q": "Where is A-1001?"}) as response):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            received = [frame async for frame in sse_events(response)]

        names = [name for name, _ in received]
        assert names[:4] == ["injection", "tool_call", "tool_result", "injection"]
        assert set(names[4:-1]) == {"text_delta"} and names[-1] == "result"
        assert [data["type"] for _, data in received] == names
        final = received[-1][1]
        assert final["status"] == "done"
        assert final["content"] == "Order A-1001 was delivered on 2 May."
        assert "".join(d["text"] for n, d in received if n == "text_delta") == final["content"]
        assert {data["run_id"] for _, data in received} == {final["run_id"]}

        recording = store.load(final["run_id"])
        assert recording.status == "done"
        log = recording.commit_log()
        recorded = [(name, record.runtime_stage_id, payload)
                    for record in log.records for name, payload in record.emits
                    if name in CATALOGUE.values()]
        streamed = [(CATALOGUE[name], data["step"],
                     {k: v for k, v in data.items() if k not in ("type", "run_id", "step")})
                    for name, data in received if name in CATALOGUE]
        assert streamed == recorded
        assert [name.rsplit(".", 1)[1] for name, _, _ in recorded] == [
            "injected", "tool_start", "tool_end", "injected"]
        tool_end = recorded[2][2]
        assert tool_end["result"] == "order A-1001: delivered on 2 May, 42.00 EUR"


async def test_a_client_that_leaves_cancels_the_run(tmp_path: Path) -> None:
    """The client disconnects while a tool runs: the server cancels the run, which the run
    store keeps as failed, its tool call recorded."""
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def slow_lookup(order_id: str) -> str:
        """Look up an order (slowly)."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    with RunStore(tmp_path / "runs.db") as store:
        def make_agent() -> Agent:
            return Agent(provider=mock(script=[
                {"tool_calls": [{"name": "slow_lookup", "args": {"order_id": "A-7"}}]}, "ok"]),
                model="m", tools=[slow_lookup], tracing=Tracing(run_store=store))

        async with serving(sse_app(make_agent)) as base, httpx.AsyncClient() as client:
            async with client.stream("GET", f"{base}/chat", params={"q": "A-7?"}) as response:
                async for name, data in sse_events(response):
                    assert name == "tool_call"
                    run_id = data["run_id"]
                    await started.wait()
                    break
            async with asyncio.timeout(10):
                await cancelled.wait()
                while store.load(run_id).status != "failed":
                    await asyncio.sleep(0.02)
        emitted = [name for record in store.load(run_id).commit_log().records
                   for name, _ in record.emits]
        assert "agentfootprint.stream.tool_start" in emitted
        assert "agentfootprint.stream.tool_end" not in emitted
