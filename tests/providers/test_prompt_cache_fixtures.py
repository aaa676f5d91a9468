"""Prompt caching for real: an agent's Anthropic requests carry ``cache_control`` on the stable
prefix (as in ``fixtures_anthropic/request_cached_prefix.json``), and the cached-token counts
the OpenAI and Anthropic APIs report reach the recording, ``RunResult.usage``, the run store's
``llm_calls`` table (SQLite; PostgreSQL when ``AGENTFOOTPRINT_PG_URL`` is set) and the report.

Both adapters run their real SDK with only the HTTP transport replaced, answering with the
recorded API payloads of ``fixtures_anthropic/`` and ``fixtures_openai/``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

anthropic_sdk = pytest.importorskip("anthropic")
openai_sdk = pytest.importorskip("openai")

import httpx  # noqa: E402

from agentfootprint import (  # noqa: E402
    Agent,
    RunResult,
    Tracing,
    define_fact,
    define_instruction,
    tool,
)
from agentfootprint.explain import render_html_report  # noqa: E402
from agentfootprint.providers import PRICES  # noqa: E402
from agentfootprint.providers._anthropic import AnthropicProvider  # noqa: E402
from agentfootprint.providers._openai import OpenAIProvider  # noqa: E402
from agentfootprint.providers._pricing import call_cost  # noqa: E402
from agentfootprint.runs import (  # noqa: E402
    Recording,
    RunStore,
    trace,
)

HERE = Path(__file__).parent
ANTHROPIC = HERE / "fixtures_anthropic"
OPENAI = HERE / "fixtures_openai"
EXPECTED_REQUESTS = ANTHROPIC / "request_cached_prefix.json"
REGEN = os.environ.get("AGENTFOOTPRINT_REGEN_FIXTURES") == "1"

BASE = "You are a weather assistant. Answer in one sentence."
FACT = "The user lives in Paris and prefers Celsius."
LATE = "Mention the source of each figure."


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city."""
    return f"{city}: 21 degrees {unit}, sunny"


@tool
def get_time(tz: str) -> str:
    """Local time in a time zone."""
    return f"{tz}: 14:05"


class Recorded:
    """Answers each request with the next recorded payload; keeps the request bodies."""

    def __init__(self, sdk_httpx: Any, *files: Path) -> None:
        self.httpx = sdk_httpx
        self.files = list(files)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.bodies.append(json.loads(request.content))
        return self.httpx.Response(200, text=self.files.pop(0).read_text(),
                                   headers={"content-type": "application/json"})


def _sdk_httpx(sdk: Any) -> Any:
    """The HTTP library an SDK is built on (``httpx``, or ``httpx2`` for anthropic>=2)."""
    import importlib

    base = next(cls for cls in sdk.DefaultAsyncHttpxClient.__mro__
                if cls.__name__ == "AsyncClient")
    return importlib.import_module(base.__module__.partition(".")[0])


def anthropic_agent(store: RunStore | None = None) -> tuple[Agent, Recorded]:
    net = _sdk_httpx(anthropic_sdk)
    server = Recorded(net, ANTHROPIC / "message_tool_use.json", ANTHROPIC / "message_text.json")
    client = anthropic_sdk.AsyncAnthropic(
        api_key="test", max_retries=0,
        http_client=net.AsyncClient(transport=net.MockTransport(server)))
    agent = Agent(provider=AnthropicProvider(client=client), model="claude-sonnet-4-5",
                  system=BASE, tools=[get_weather],
                  context=[define_instruction(id="cite", prompt=LATE),
                           define_fact(id="home", data=FACT)],
                  tracing=Tracing(run_store=store))
    return agent, server


def openai_agent(store: RunStore | None = None) -> tuple[Agent, Recorded]:
    server = Recorded(httpx, OPENAI / "chat_tool_calls.json", OPENAI / "chat_text.json")
    client = openai_sdk.AsyncOpenAI(
        api_key="sk-test", base_url="https://api.openai.test/v1", max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)))
    agent = Agent(provider=OpenAIProvider(client=client), model="gpt-4o-mini",
                  system=BASE, tools=[get_weather, get_time], tracing=Tracing(run_store=store))
    return agent, server


# -- cache_control on the stable prefix ---------------------------------------------------------


async def test_anthropic_requests_carry_cache_control_on_the_stable_prefix() -> None:
    """Both calls of the run send the recorded request bodies: the tool list, the system
    prompt's stable part (the base prompt and the fact; the instruction, declared first but
    never cached, after it) and the conversation so far each end on a breakpoint."""
    agent, server = anthropic_agent()
    result = await agent.run("Weather in Paris and Lyon?")
    if REGEN:
        EXPECTED_REQUESTS.write_text(json.dumps(server.bodies, indent=2) + "\n")
    assert server.bodies == json.loads(EXPECTED_REQUESTS.read_text())
    first, second = server.bodies
    ephemeral = {"type": "ephemeral"}
    assert first["tools"][-1]["cache_control"] == ephemeral
    assert first["system"] == [
        {"type": "text", "text": f"{BASE}\n\n{FACT}", "cache_control": ephemeral},
        {"type": "text", "text": f"\n\n{LATE}"}]
    assert second["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    # one moving breakpoint on the conversation, not one per message
    assert "cache_control" not in json.dumps(second["messages"][:-1])
    # the recording holds the prompt in the order it was sent, and the breakpoints sent
    sent = result.recording.log.value_at(trace.SYSTEM_SLOT, len(result.recording.log) - 1)
    assert [(row["source"], row["position"]) for row in sent] == [
        ("base", 0), ("home", 1), ("cite", 2)]
    assert [c.cache for c in result.usage.calls] == [
        {"system": len(f"{BASE}\n\n{FACT}"), "tools": 1, "messages": 1},
        {"system": len(f"{BASE}\n\n{FACT}"), "tools": 1, "messages": 4}]  # 2 tool results


async def test_an_agent_without_tools_marks_no_message() -> None:
    """A call the loop will not follow (no tools) caches the prompt, not the conversation."""
    net = _sdk_httpx(anthropic_sdk)
    server = Recorded(net, ANTHROPIC / "message_text.json")
    client = anthropic_sdk.AsyncAnthropic(
        api_key="test", max_retries=0,
        http_client=net.AsyncClient(transport=net.MockTransport(server)))
    agent = Agent(provider=AnthropicProvider(client=client), model="claude-sonnet-4-5",
                  system=BASE)
    await agent.run("Hello")
    body = server.bodies[0]
    assert body["system"] == [{"type": "text", "text": BASE,
                               "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": "Hello"}]


# -- cached tokens reach every reader -----------------------------------------------------------

ANTHROPIC_CALLS = [  # (input incl. cached, cache read, cache written, output), per call
    (472 + 2048 + 1024, 2048, 1024, 89),
    (21, 0, 0, 10),
]
OPENAI_CALLS = [(81, 64, 0, 46), (24, 0, 0, 3)]


def _expected_costs(model: str, calls: list[tuple[int, int, int, int]]) -> list[float]:
    price = PRICES[model]
    return [call_cost(price, input=i, output=o, cache_read=r, cache_write=w) or 0.0
            for i, r, w, o in calls]


@pytest.mark.parametrize(("make", "model", "calls"), [
    (anthropic_agent, "claude-sonnet-4-5", ANTHROPIC_CALLS),
    (openai_agent, "gpt-4o-mini", OPENAI_CALLS),
], ids=["anthropic", "openai"])
async def test_cached_tokens_reach_the_recording_result_store_and_report(
        tmp_path: Path, make: Callable[[RunStore], tuple[Agent, Recorded]], model: str,
        calls: list[tuple[int, int, int, int]]) -> None:
    """Cache read and written tokens, and the cost they imply, as the API reported them."""
    with RunStore(tmp_path / "runs.db") as store:
        agent, _ = make(store)
        result: RunResult = await agent.run("Weather and time in Paris?")
        costs = _expected_costs(model, calls)
        # the recording
        rows = result.recording.state[trace.LLM_USAGE]
        assert [(r["input_tokens"], r.get("cache_read_tokens", 0), r.get("cache_write_tokens", 0),
                 r["output_tokens"]) for r in rows] == calls
        # the result
        usage = result.usage
        assert [(c.input_tokens, c.cache_read_tokens, c.cache_write_tokens, c.output_tokens)
                for c in usage.calls] == calls
        assert [c.cost_usd for c in usage.calls] == pytest.approx(costs)
        assert usage.cache_read_tokens == sum(c[1] for c in calls)
        assert usage.cost_usd == pytest.approx(sum(costs))
        assert all(c.model is not None and c.model.startswith(model) for c in usage.calls)
        # the run store's query table
        db = sqlite3.connect(tmp_path / "runs.db")
        table = db.execute(
            "SELECT input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, "
            "cost_usd, latency_ms FROM llm_calls WHERE run_id = ? ORDER BY call_idx",
            (result.run_id,)).fetchall()
        assert [row[:4] for row in table] == calls
        assert [row[4] for row in table] == pytest.approx(costs)
        assert all(isinstance(row[5], float) for row in table)
        run = db.execute("SELECT cache_read_tokens, cost_usd FROM runs WHERE run_id = ?",
                         (result.run_id,)).fetchone()
        assert run == (usage.cache_read_tokens, pytest.approx(sum(costs)))
        db.close()
        # the report, from the stored recording
        page = render_html_report(store.load(result.run_id))
    section = page[page.index('<section id="usage">'):]
    section = section[:section.index("</section>")]
    for n, (i, read, written, out) in enumerate(calls, start=1):
        row = section[section.index(f'data-call="{n}"'):]
        row = row[:row.index("</tr>")]
        assert f"<td>{i}</td><td>{read}</td><td>{written}</td><td>{out}</td>" in row
        assert f"${costs[n - 1]:.6f}" in row


async def test_cached_tokens_reach_the_postgres_llm_calls_table(pg_url: str,
                                                                pg_schema: str) -> None:
    """The same rows in PostgresRunStore's {table}_llm_calls (needs AGENTFOOTPRINT_PG_URL)."""
    import psycopg
    from psycopg import sql

    from agentfootprint.runs import PostgresRunStore

    agent, _ = anthropic_agent()
    result = await agent.run("Weather in Paris and Lyon?")
    with PostgresRunStore(pg_url, schema=pg_schema) as store:
        store.save(result)
        loaded = store.load(result.run_id)
    assert isinstance(loaded, Recording)
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(sql.SQL(
            "SELECT input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, cost_usd "
            "FROM {} WHERE run_id = %s ORDER BY call_idx").format(
                sql.Identifier(pg_schema, "af_runs_llm_calls")), (result.run_id,)).fetchall()
    assert [row[:4] for row in rows] == ANTHROPIC_CALLS
    assert [row[4] for row in rows] == pytest.approx(
        _expected_costs("claude-sonnet-4-5", ANTHROPIC_CALLS))
