"""The seed contracts (`reference/seeds/`) that the hardening issue found failing, one test per
rule, each named after the rule it pins."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, check_in_approved, tool
from agentfootprint.errors import ProviderError
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory, window
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest

CONV = MemoryIdentity("seed-contracts")


def _turns(path: Path) -> set[int]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT body FROM af_memory_entries").fetchall()
    import json

    return {json.loads(body)["source"]["turn"] for (body,) in rows}


def _claims(path: Path) -> dict[int, bool]:
    """Claimed turns → whether a run still holds them."""
    with sqlite3.connect(path) as db:
        claims = [t for (t,) in db.execute("SELECT turn FROM af_memory_turn_claims")]
        held = {t for (t,) in db.execute("SELECT turn FROM af_memory_turn_holders")}
    return {t: t in held for t in claims}


# -- 000 turn numbering ---------------------------------------------------------------------------


async def test_seed_000_same_file_two_store_objects_share_claims(tmp_path: Path) -> None:
    """Two memories, each with its own store object on one SQLite file: turns 1, 2, 3 in order,
    every turn written, no claim left held."""
    path = tmp_path / "m.db"
    with SQLiteStore(path) as one, SQLiteStore(path) as two:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=one)
        notes = define_memory(id="notes", type="episodic", strategy=window(5), store=two)
        for expected in (1, 2, 3):
            result = await Agent(provider=mock(reply="ok"), model="m", memory=[chat, notes],
                                 identity=CONV).run(f"message {expected}")
            assert result.turn == expected
    assert _turns(path) == {1, 2, 3}
    assert _claims(path) == {1: False, 2: False, 3: False}


async def test_seed_000_claims_expire_with_their_turns_entries(tmp_path: Path) -> None:
    """10,001 claims whose turns' entries are gone never brick the conversation: it restarts at
    turn 1 (the numbering an expired store would give) and keeps working."""
    path = tmp_path / "m.db"
    SQLiteStore(path).close_sync()
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO af_memory_turn_claims VALUES (?, ?, 0)",
                       [(CONV.namespace, t) for t in range(1, 10_002)])
    with SQLiteStore(path) as store:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
        agent = Agent(provider=mock(reply="ok"), model="m", memory=[chat])
        first = await agent.run("hi", identity=CONV)
        second = await agent.run("again", identity=CONV)
    assert (first.turn, second.turn) == (1, 2)


async def test_seed_000_failed_run_does_not_burn_a_turn(tmp_path: Path) -> None:
    """A run that fails before writing gives its turn back: the next run is turn 1, not 2."""
    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
        failing = Agent(provider=mock(script=[ProviderError("down", provider="mock", status=503)]),
                        model="m", memory=[chat], identity=CONV)
        with pytest.raises(ProviderError):
            await failing.run("hi")
        assert _claims(path) == {}
        ok = await Agent(provider=mock(reply="ok"), model="m", memory=[chat],
                         identity=CONV).run("hi")
    assert ok.turn == 1


async def test_seed_000_denied_run_does_not_burn_a_turn(tmp_path: Path) -> None:
    """A run whose input a rule denies writes nothing and gives its turn back."""
    from agentfootprint import Governance
    from agentfootprint.agent._moments import act, deny

    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
        guarded = Agent(provider=mock(reply="ok"), model="m", memory=[chat], identity=CONV,
                        governance=Governance(act=[act("input", lambda c: deny("no"), id="g")]))
        denied = await guarded.run("off topic")
        assert denied.stopped_early == "input-denied"
        ok = await Agent(provider=mock(reply="ok"), model="m", memory=[chat],
                         identity=CONV).run("hi")
    assert ok.turn == 1
    assert _claims(path) == {1: False}


async def test_seed_000_resumable_run_keeps_its_turn(tmp_path: Path) -> None:
    """A paused run holds its turn: a run meanwhile gets turn 2, and the resumed run writes
    turn 1 and settles it."""

    @tool(check_in=lambda args: True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    def respond(request: LLMRequest) -> Any:
        if any(m["role"] == "tool" for m in request.messages):
            return "refunded"
        return {"tool_calls": [{"id": "c1", "name": "refund", "args": {"order": "A-1"}}]}

    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
        agent = Agent(provider=mock(respond=respond), model="m", tools=[refund], memory=[chat],
                      identity=CONV)
        paused = await agent.run("refund A-1")
        assert paused.status == "paused" and paused.turn == 1
        assert _claims(path) == {1: True}
        other = await Agent(provider=mock(reply="ok"), model="m", memory=[chat],
                            identity=CONV).run("meanwhile")
        assert other.turn == 2
        done = await agent.resume(paused.checkpoint, check_in_approved(by="lead"))
    assert done.turn == 1 and done.content == "refunded"
    assert _turns(path) == {1, 2}
    assert _claims(path) == {1: False, 2: False}


async def test_seed_000_replay_keeps_the_turn_it_claimed(tmp_path: Path) -> None:
    """A failed run gives its turn back; its replay (resume_on_error) claims the same turn."""
    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
        agent = Agent(provider=mock(script=[ProviderError("down", provider="mock", status=503),
                                            "recovered"]),
                      model="m", memory=[chat], identity=CONV)
        with pytest.raises(ProviderError) as caught:
            await agent.run("hi")
        result = await agent.resume_on_error(caught.value)
    assert (result.turn, result.content) == (1, "recovered")
    assert _turns(path) == {1}
    assert _claims(path) == {1: False}


# -- others ---------------------------------------------------------------------------------------


async def test_seed_others_resume_on_error_with_identity_given_per_run(tmp_path: Path) -> None:
    """USAGE §3's style — identity passed to run(), not to Agent() — replays after a failure."""
    with SQLiteStore(tmp_path / "m.db") as store:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
        agent = Agent(provider=mock(script=[ProviderError("down", provider="mock", status=503),
                                            "recovered"]), model="m", memory=[chat])
        with pytest.raises(ProviderError) as caught:
            await agent.run("hi", identity=CONV)
        result = await agent.resume_on_error(caught.value)
    assert result.content == "recovered"
    assert _turns(tmp_path / "m.db") == {1}


# -- 002 messages-slot delivery -------------------------------------------------------------------


def test_seed_002_delivery_key_hashes_a_lone_surrogate() -> None:
    """Valid JSON "caf\\ud83d" hashes as its UTF-16 code units (one per lone surrogate)."""
    from agentfootprint.context._delivery import delivery_key, fnv1a

    assert fnv1a("caf\ud83d") != fnv1a("caf")
    assert fnv1a("\ud83d\ude00") == fnv1a("😀")  # a pair is the character it encodes
    assert delivery_key("i", "user", "caf\ud83d") == delivery_key("i", "user", "caf\ud83d")


async def test_seed_002_lone_surrogate_delivery_does_not_break_later_turns() -> None:
    """A messages-slot injection carrying a lone surrogate is delivered, and the next turn reads
    its key back from the history (the hash that used to raise) and does not deliver it again."""
    from agentfootprint import define_instruction

    hint = define_instruction(id="odd", prompt="caf\ud83d", slot="messages", role="assistant")
    agent = Agent(provider=mock(reply="ok"), model="m", context=[hint])
    first = await agent.run("hi")
    assert any(m.get("injected_by") == "odd" for m in first.history)
    second = await agent.follow_up("and again")
    assert second.content == "ok"
    assert sum(1 for m in second.history if m.get("injected_by") == "odd") == 1


def test_seed_002_tail_wire_role_folds_tool_into_user() -> None:
    """tailWireRole: none for an empty window, the tail's effective role otherwise."""
    from agentfootprint.context._delivery import tail_wire_role

    assert tail_wire_role([]) is None
    assert tail_wire_role([{"role": "user", "content": "q"}]) == "user"
    assert tail_wire_role([{"role": "tool", "content": "r", "tool_call_id": "c"}]) == "user"


def test_seed_002_deferral_records_a_note_naming_what_blocked_it() -> None:
    """A deferred delivery carries the tail role and a note naming the injection and cause."""
    from agentfootprint.context._delivery import deliver

    history: list[dict[str, Any]] = [{"role": "tool", "content": "r", "tool_call_id": "c"}]
    _, deferred = deliver([("nudge", "steering", [{"role": "user", "content": "go on"}])],
                          history, set(), 2)
    (row,) = deferred
    assert row["reason"] == "role-collision" and row["tail_role"] == "user"
    assert "'nudge'" in row["note"] and "user turn" in row["note"]
    assert "next boundary" in row["note"]


# -- 001 causal snapshots -------------------------------------------------------------------------


async def test_seed_001_snapshot_decisions_are_the_turns_route_choices() -> None:
    """Under an Agent a causal snapshot keeps the route's choices, one per iteration."""
    from agentfootprint.memory import InMemoryStore, top_k
    from agentfootprint.memory.embedding import mock_embedder

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order} shipped"

    store = InMemoryStore()
    causal = define_memory(id="why", type="causal", store=store,
                           strategy=top_k(k=1, embedder=mock_embedder(64)))
    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"id": "c1", "name": "lookup", "args": {"order": "A-1"}}]},
        "A-1 has shipped."]), model="m", tools=[lookup], memory=[causal], identity=CONV)
    await agent.run("Where is A-1?")
    snapshot = await store.get(CONV, "snap-1")
    assert snapshot is not None and isinstance(snapshot.value, dict)
    decisions = snapshot.value["decisions"]
    assert [(d["stage_id"], d["chosen"], d["iteration"]) for d in decisions] == [
        ("route", "tool-calls", 1), ("route", "final", 2)]
    assert decisions[0]["rule"] == "the model asked for tools"


# -- events ---------------------------------------------------------------------------------------


async def test_seed_events_memory_written_is_emitted_per_write(tmp_path: Path) -> None:
    """memory.written is declared, so a memory write says what it put where, under which turn."""
    from agentfootprint.events._catalogue import payload_model

    seen: list[Any] = []
    with SQLiteStore(tmp_path / "m.db") as store:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
        agent = Agent(provider=mock(reply="ok"), model="m", memory=[chat], identity=CONV)
        agent.on("memory.written", seen.append)
        await agent.run("hi")
    (event,) = seen
    payload = payload_model("memory.written").model_validate(event.payload)
    assert payload.model_dump() == {"store": store.name, "ids": ["msg-1-0", "msg-1-1"],
                                    "turn": 1}


async def test_seed_events_pause_events_have_payload_models() -> None:
    """pause.requested and pause.check_in_settled can be listened to and validate."""
    @tool(check_in=lambda args: True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    def respond(request: LLMRequest) -> Any:
        if any(m["role"] == "tool" for m in request.messages):
            return "refunded"
        return {"tool_calls": [{"id": "c1", "name": "refund", "args": {"order": "A-1"}}]}

    agent = Agent(provider=mock(respond=respond), model="m", tools=[refund])
    seen: list[Any] = []
    agent.on("pause.requested", seen.append)
    agent.on("pause.check_in_settled", seen.append)
    paused = await agent.run("refund A-1")
    await agent.resume(paused.checkpoint, check_in_approved(by="lead"))
    requested, settled = (event.model() for event in seen)
    assert (requested.kind, requested.tool_name, requested.tool_call_id) == (
        "check_in", "refund", "c1")
    assert (settled.approved, settled.by, settled.tool_call_id) == (True, "lead", "c1")


# -- others: a system-role delivery records where it was sent -------------------------------------


async def test_seed_others_anthropic_system_role_delivery_records_the_system_prompt() -> None:
    """Anthropic sends a system-role message in its system prompt, so the delivery says that
    (sent_to, no wire_index) instead of a position among the messages; a provider that keeps
    it in place records its position."""
    anthropic = pytest.importorskip("anthropic")
    import importlib
    import json

    from agentfootprint import define_instruction
    from agentfootprint.providers import with_retry
    from agentfootprint.providers._anthropic import AnthropicProvider

    base = next(c for c in anthropic.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient")
    sdk_httpx = importlib.import_module(base.__module__.partition(".")[0])
    reply = (Path(__file__).parent / "providers/fixtures_anthropic/message_text.json").read_text()
    bodies: list[dict[str, Any]] = []

    def server(request: Any) -> Any:
        bodies.append(json.loads(request.content))
        return sdk_httpx.Response(200, text=reply, headers={"content-type": "application/json"})

    client = anthropic.AsyncAnthropic(api_key="test", max_retries=0, http_client=sdk_httpx
                                      .AsyncClient(transport=sdk_httpx.MockTransport(server)))
    hint = define_instruction(id="cite", prompt="Cite your sources.", slot="messages",
                              role="system")
    claude = with_retry(AnthropicProvider(client=client, model="claude-sonnet-4-6"))
    result = await Agent(provider=claude, model="claude-sonnet-4-6", context=[hint]).run("hi")
    (row,) = result.recording.state["messages_delivery"]["delivered"]
    assert (row["sent_to"], row["wire_index"], row["history_index"]) == ("system_prompt", None, 1)
    assert "Cite your sources." in bodies[0]["system"]
    assert all("Cite your sources." not in json.dumps(m) for m in bodies[0]["messages"])

    kept = await Agent(provider=mock(reply="ok"), model="m", context=[hint]).run("hi")
    (row,) = kept.recording.state["messages_delivery"]["delivered"]
    assert row["wire_index"] == 1 and "sent_to" not in row


# -- 003 per-turn script ledger -------------------------------------------------------------------


def _code_agent(*rules: Any, script: list[Any]) -> Agent:
    from agentfootprint import Governance
    from agentfootprint.tools import code_runner

    return Agent(provider=mock(script=script), model="m",
                 tools=[code_runner(isolation="process", timeout=20)],
                 governance=Governance(act=list(rules)) if rules else None)


def _script_rows(result: Any) -> list[dict[str, Any]]:
    return [r for r in result.recording.state.get("findings_ledger") or ()
            if r.get("kind") == "script"]


def _run_code(program: str, call_id: str = "c1") -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "run_code", "args": {"code": program}}]}


async def test_seed_003_program_is_captured_before_the_before_tool_rules() -> None:
    """A before_tool rule that rewrites the program: the row is filed rewritten=True and holds
    the program that ran."""
    from agentfootprint.agent._moments import act, allow

    def safer(c: Any) -> Any:
        return allow({"code": "print(2)"}, reason="print 2 instead")

    agent = _code_agent(act("before_tool", safer, id="safer"),
                        script=[_run_code("print(1)"), "It printed 2."])
    result = await agent.run("run it")
    (row,) = _script_rows(result)
    assert (row["rewritten"], row["text"], row["outcome"]) == (True, "print(2)", "ran")


async def test_seed_003_ask_pause_files_a_submitted_row_that_the_settled_row_joins() -> None:
    """A call paused by an ``ask`` rule files a submitted row (no text); approved, it settles
    under the same dispatch with its text."""
    from agentfootprint.agent._moments import act, ask

    agent = _code_agent(act("before_tool", lambda c: ask("Run this?"), id="gate"),
                        script=[_run_code("print(3)"), "It printed 3."])
    paused = await agent.run("run it")
    assert paused.status == "paused"
    (row,) = _script_rows(paused)
    assert (row["outcome"], row["dispatch"], "text" in row) == ("submitted", 1, False)
    done = await agent.resume(paused.checkpoint, check_in_approved(by="lead"))
    rows = _script_rows(done)
    assert [(r["outcome"], r["dispatch"]) for r in rows] == [("submitted", 1), ("ran", 1)]
    assert rows[-1]["text"] == "print(3)"


async def test_seed_003_declined_or_denied_call_files_a_denied_row() -> None:
    """A call a person declines, or a rule denies, never runs and files a denied row."""
    from agentfootprint import check_in_declined
    from agentfootprint.agent._moments import act, ask, deny

    agent = _code_agent(act("before_tool", lambda c: deny("no code today"), id="no-code"),
                        script=[_run_code("print(4)"), "I could not run it."])
    (row,) = _script_rows(await agent.run("run it"))
    assert (row["outcome"], row["text"]) == ("denied", "print(4)")

    agent = _code_agent(act("before_tool", lambda c: ask("Run this?"), id="gate"),
                        script=[_run_code("print(5)"), "Declined."])
    paused = await agent.run("run it")
    done = await agent.resume(paused.checkpoint, check_in_declined(by="lead", note="no"))
    assert [(r["outcome"], r["dispatch"]) for r in _script_rows(done)] == [
        ("submitted", 1), ("denied", 1)]


async def test_seed_003_answer_is_matched_against_the_code_that_ran() -> None:
    """The ledger is read back: an answer's code block that ran is matched to its dispatch;
    one that never ran is named unmatched."""
    answer = ("I ran:\n```python\nprint(6 * 7)\n```\nIt printed 42. You could also try:\n"
              "```python\nprint(43)\n```")
    result = await _code_agent(script=[_run_code("print(6 * 7)"), answer]).run("multiply")
    match = result.recording.state["answer_scripts"]
    assert match["matched"] == [{"block": 0, "dispatch": 1, "tool_call_id": "c1",
                                 "outcome": "ran"}]
    assert match["unmatched"] == [1]
    plain = await Agent(provider=mock(reply="```\nx\n```"), model="m").run("hi")
    assert "answer_scripts" not in plain.recording.state


def test_seed_events_memory_written_name_is_the_catalogues() -> None:
    """memory emits its event under the name the catalogue declares (it cannot import it)."""
    from agentfootprint.events._catalogue import full_name, payload_model
    from agentfootprint.memory._stages import MEMORY_WRITTEN

    assert full_name("memory.written") == MEMORY_WRITTEN
    assert payload_model(MEMORY_WRITTEN).__name__ == "MemoryWritten"
