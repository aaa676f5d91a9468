"""A composition records the identity it was run under (and only then), the one its memory
members ran under and claimed turns under; the record survives JSON, a run store and a pause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentfootprint import Agent, check_in_approved, tool
from agentfootprint.compose import Conditional, Parallel, Sequence
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.memory._stages import identity_record
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore, trace
from agentfootprint.runs._recording import Recording

TEAM = MemoryIdentity("conv-team", principal="user-1", tenant="acme")


def remembering(name: str, store: SQLiteStore, *,
                identity: MemoryIdentity | None = None) -> Agent:
    return Agent(provider=mock(script=[f"{name} done"] * 4), model="m", name=name,
                 identity=identity,
                 memory=[define_memory(type="episodic", strategy="window", store=store,
                                       keep_turns=10, id=name)])


def plain(name: str) -> Agent:
    return Agent(provider=mock(script=[f"{name} done"] * 4), model="m", name=name)


def root_changes(result: Any) -> list[tuple[str, Any]]:
    """What the composition's own start stage wrote, in order."""
    first = result.recording.log.records[0]
    assert (first.ns, first.stage_id) == ("", "start")
    return [(change.key, change.value) for change in first.changes]


def member_identities(result: Any) -> dict[str, Any]:
    """The identity each member's mount handed it, by namespace."""
    return {record.ns: change.value for record in result.recording.log.records
            if record.kind == "subflow-enter"
            for change in record.changes if change.key == trace.IDENTITY}


async def turns_of(store: SQLiteStore, identity: MemoryIdentity) -> list[int]:
    """The turns the entries of ``identity``'s conversation were written in."""
    page = await store.list(identity, limit=100)
    return sorted({e.source.turn for e in page.entries
                   if e.source is not None and e.source.turn is not None})


async def test_a_run_identity_is_recorded_once_at_the_root_and_every_member_ran_under_it(
        tmp_path: Path) -> None:
    """Members with their own identities are overridden by the run's: each member's mount,
    the turns it claimed and the entries it stored are under the run's identity, which the
    composition's own state records (a nested composition does not record it again)."""
    path = tmp_path / "team.db"
    store = SQLiteStore(path)
    team = Sequence(
        ("plan", remembering("plan", store, identity=MemoryIdentity("own-plan"))),
        ("review", Parallel(("legal", remembering("legal", store)), ("tone", plain("tone")))),
        ("note", plain("note")))

    result = await team.run("Ship order 7", identity=TEAM)

    assert result.recording.state[trace.IDENTITY] == identity_record(TEAM)
    assert root_changes(result)[:2] == [(trace.ORIGINAL, "Ship order 7"),
                                        (trace.IDENTITY, identity_record(TEAM))]
    members = member_identities(result)
    assert members and set(map(json.dumps, members.values())) == {
        json.dumps(identity_record(TEAM))}
    nested_start = [r for r in result.recording.log.records
                    if r.ns and r.stage_id.endswith("start")]
    assert nested_start and all(c.key != trace.IDENTITY for r in nested_start
                                for c in r.changes)
    assert await turns_of(store, TEAM) == [1, 2]  # plan's turn, then legal's
    assert await turns_of(store, MemoryIdentity("own-plan")) == []
    assert result.turn == 2
    await store.aclose()


async def test_a_run_without_identity_records_what_it_always_recorded(tmp_path: Path) -> None:
    """No ``identity=``: the start stage writes the message keys only, the root state has no
    identity, and each member records its own."""
    store = SQLiteStore(tmp_path / "own.db")
    team = Sequence(("a", remembering("a", store, identity=MemoryIdentity("conv-a"))),
                    ("b", remembering("b", store, identity=MemoryIdentity("conv-b"))))

    result = await team.run("Hello")

    assert [key for key, _ in root_changes(result)] == [
        trace.ORIGINAL, trace.CURRENT, trace.FINAL_CONTENT]
    assert trace.IDENTITY not in result.recording.state
    assert sorted(v["conversation_id"] for v in member_identities(result).values()) == [
        "conv-a", "conv-a", "conv-a", "conv-b", "conv-b", "conv-b"]
    await store.aclose()


async def test_an_identity_given_to_a_team_without_memory_is_not_recorded() -> None:
    """Nobody reads or writes a conversation, so the run records nothing more."""
    result = await Sequence(("a", plain("a")), ("b", plain("b"))).run("Hi", identity=TEAM)
    assert [key for key, _ in root_changes(result)] == [
        trace.ORIGINAL, trace.CURRENT, trace.FINAL_CONTENT]


async def test_the_identity_is_recorded_when_the_memory_member_never_runs(
        tmp_path: Path) -> None:
    """A Conditional that takes its plain branch still records the run's identity (what its
    memory branch would have run under)."""
    store = SQLiteStore(tmp_path / "cond.db")
    team = Conditional(("memo", lambda i: i.message.startswith("MEMO"),
                        remembering("memo", store)), otherwise=plain("other"))

    result = await team.run("plain question", identity=TEAM)

    assert result.content == "other done"
    assert member_identities(result) == {}
    assert result.recording.state[trace.IDENTITY] == identity_record(TEAM)
    await store.aclose()


async def test_the_recorded_identity_survives_json_and_a_sqlite_run_store(
        tmp_path: Path) -> None:
    """The recording's JSON carries it in the start record, and a run loaded back from a
    SQLite run store (another process's view) holds the same identity at its root."""
    store = SQLiteStore(tmp_path / "mem.db")
    team = Sequence(("a", remembering("a", store)), ("b", remembering("b", store)))
    result = await team.run("Hello", identity=TEAM)

    body = json.loads(Recording.of(result).to_json())
    start = body["log"]["records"][0]
    assert start["stage_id"] == "start" and start["ns"] == ""
    assert {"key": trace.IDENTITY, "op": "set", "value": identity_record(TEAM)} in (
        start["changes"])
    with RunStore(tmp_path / "runs.db") as runs:
        runs.save(result)
        loaded = runs.load(result.run_id)
    log = loaded.commit_log()
    assert log.value_at(trace.IDENTITY, len(log.records)) == identity_record(TEAM)
    await store.aclose()


@tool(check_in=True)
async def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def refunder() -> Agent:
    def respond(request: Any) -> object:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "r1", "name": "refund", "args": {"order_id": "A-9"}}]}
        return "Refund done"

    return Agent(provider=mock(respond=respond), model="m", name="Refunder", tools=[refund])


async def test_a_resumed_run_keeps_the_identity_it_was_started_under(tmp_path: Path) -> None:
    """Paused in a member and resumed from the JSON checkpoint by a rebuilt team: the finished
    recording still says which identity the run was under, the one the later member used."""
    store = SQLiteStore(tmp_path / "pause.db")

    def team() -> Sequence:
        return Sequence(("triage", remembering("T", store)), ("act", refunder()),
                        ("note", remembering("N", store)))

    paused = await team().run("Refund A-9", identity=TEAM)
    assert paused.paused
    saved = json.loads(json.dumps(paused.checkpoint))
    done = await team().resume(saved, check_in_approved(by="alice@ops"))

    assert done.status == "done"
    assert done.recording.state[trace.IDENTITY] == identity_record(TEAM)
    note = [v for ns, v in member_identities(done).items() if ns.startswith("note")]
    assert note and all(v == identity_record(TEAM) for v in note)
    await store.aclose()
