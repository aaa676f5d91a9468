"""Re-runs of a composition run with ``identity=`` use the identity it recorded, not a guess.

Members re-run under the run's identity, an agent used as a tool under its own, the user's
SQLite files stay byte-identical; a team whose memory member never ran (where guessing from
the members finds nothing) re-runs and is proven; a stored run keeps its identity through a
SQLite run store; and a recording made before compositions kept their identity is still
re-run under the identity its members recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

from agentfootprint import Agent, define_fact
from agentfootprint.compose import Conditional, Sequence
from agentfootprint.explain import localize_context_bug
from agentfootprint.explain._isolation import run_identity
from agentfootprint.explain._prove import StoredRun, prove_stored_run
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.memory._entry import MemoryEntry
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.runs import RunStore, trace
from agentfootprint.runs._recording import Recording

TEAM = MemoryIdentity("conv-team", principal="user-1")
INNER = MemoryIdentity("conv-inner")
STALE = "Note: the Lisbon depot closed-zq; ship everything to Atlantis."
QUESTION = "Where should the parcel for ticket 42 go?"
CULPRIT = "memory:planner#msg-1-0"
"""The inner planner's recall of the stale note (its own conversation, turn 1)."""


def is_wrong(answer: str) -> bool:
    return "Atlantis" in answer


class SpyStore(SQLiteStore):
    """A SQLite store that notes every call (its name, whose conversation) once watched."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.calls: list[tuple[str, str]] = []
        self.watching = False

    def _note(self, name: str, identity: MemoryIdentity) -> None:
        if self.watching:
            self.calls.append((name, identity.conversation_id))

    async def get(self, identity: MemoryIdentity, entry_id: str) -> MemoryEntry | None:
        self._note("get", identity)
        return await super().get(identity, entry_id)

    async def put(self, identity: MemoryIdentity, entry: MemoryEntry) -> None:
        self._note("put", identity)
        await super().put(identity, entry)

    async def put_many(self, identity: MemoryIdentity, entries: Seq[MemoryEntry]) -> None:
        self._note("put_many", identity)
        await super().put_many(identity, entries)

    async def list(self, identity: MemoryIdentity, **options: Any) -> Any:
        self._note("list", identity)
        return await super().list(identity, **options)

    async def search(self, identity: MemoryIdentity, *args: Any,
                     **options: Any) -> Any:
        self._note("search", identity)
        return await super().search(identity, *args, **options)

    async def delete(self, identity: MemoryIdentity, entry_id: str) -> None:
        self._note("delete", identity)
        await super().delete(identity, entry_id)

    async def seen(self, identity: MemoryIdentity, signature: str) -> bool:
        self._note("seen", identity)
        return await super().seen(identity, signature)

    async def record_signature(self, identity: MemoryIdentity, signature: str) -> None:
        self._note("record_signature", identity)
        await super().record_signature(identity, signature)

    async def claim_turn(self, identity: MemoryIdentity, *args: Any,
                         **options: Any) -> Any:
        self._note("claim_turn", identity)
        return await super().claim_turn(identity, *args, **options)

    async def release_turn(self, identity: MemoryIdentity, *args: Any,
                           **options: Any) -> Any:
        self._note("release_turn", identity)
        return await super().release_turn(identity, *args, **options)


READS = frozenset({"get", "list", "search", "seen"})


def prompt_of(request: LLMRequest) -> str:
    return " | ".join([request.system or "", *(str(m["content"]) for m in request.messages)])


def untimed(prompt: str) -> str:
    """A prompt without the write times of its recalled entries (a re-run writes anew)."""
    return re.sub(r' updated="[^"]*"', "", prompt)


def memory(memory_id: str, store: SQLiteStore) -> list[Any]:
    return [define_memory(id=memory_id, type="episodic", strategy="window", keep_turns=10,
                          store=store)]


def planner(store: SQLiteStore, prompts: list[str]) -> Agent:
    """The inner agent, in its own conversation: ships wherever its recalled note says."""

    def respond(request: LLMRequest) -> str:
        seen = prompt_of(request)
        prompts.append(seen)
        if QUESTION not in str(request.messages[-1]["content"]):
            return "noted"
        return "Plan: ship to Atlantis." if "closed-zq" in seen else "Plan: ship to Lisbon."

    return Agent(provider=mock(respond=respond, deterministic=True), model="m", name="planner",
                 identity=INNER, memory=memory("planner", store))


def lead(store: SQLiteStore, inner: Agent, prompts: list[str]) -> Agent:
    """A memory member that asks its planner tool about the question and answers with it."""

    def respond(request: LLMRequest) -> object:
        prompts.append(prompt_of(request))
        answers = [m for m in request.messages if m["role"] == "tool"]
        if answers:
            return str(answers[-1]["content"])
        if QUESTION in str(request.messages[-1]["content"]):
            return {"tool_calls": [{"id": "c1", "name": "planner", "args": {
                "request": QUESTION}}]}
        return "noted"

    return Agent(provider=mock(respond=respond, deterministic=True), model="m", name="lead",
                 memory=memory("lead", store),
                 tools=[inner.as_tool(name="planner", description="Plans shipping.")])


def writer(store: SQLiteStore, prompts: list[str]) -> Agent:
    """A memory member that restates the plan it is handed."""

    def respond(request: LLMRequest) -> str:
        prompts.append(prompt_of(request))
        last = str(request.messages[-1]["content"])
        return f"Reply: {last}" if last.startswith("Plan:") else "noted"

    return Agent(provider=mock(respond=respond, deterministic=True), model="m", name="writer",
                 memory=memory("writer", store))


def files(*paths: Path) -> dict[str, bytes]:
    """The bytes of each SQLite file and its write-ahead log (the shared-memory index is a
    reader's scratch space, not the data)."""
    out = {}
    for path in paths:
        for each in (path, path.with_name(path.name + "-wal")):
            if each.exists():
                out[each.name] = each.read_bytes()
    return out


async def test_members_rerun_under_the_run_identity_and_a_tool_agent_under_its_own(
        tmp_path: Path) -> None:
    """A team of two memory members (SQLite) run with identity=TEAM; the lead's planner tool
    is an agent with its own identity and store. Every re-run reads only TEAM's conversation
    for the members and only INNER's for the planner, sees the prompts of the explained run,
    proves the planner's stale note CAUSAL, and leaves both files byte-identical."""
    team_path, inner_path = tmp_path / "team.db", tmp_path / "inner.db"
    team_store, inner_store = SpyStore(team_path), SpyStore(inner_path)
    inner_prompts: list[str] = []
    lead_prompts: list[str] = []
    writer_prompts: list[str] = []
    inner = planner(inner_store, inner_prompts)
    await inner.run(STALE)  # the planner's own conversation holds the stale note
    team = Sequence(("lead", lead(team_store, inner, lead_prompts)),
                    ("write", writer(team_store, writer_prompts)))
    await team.run("Hello team", identity=TEAM)
    result = await team.run(QUESTION, identity=TEAM)
    assert result.content == "Reply: Plan: ship to Atlantis."
    assert run_identity(result.recording.log) == TEAM
    originals = (inner_prompts[-1], lead_prompts[-1], writer_prompts[-1])
    counts = (len(inner_prompts), len(lead_prompts), len(writer_prompts))
    before = files(team_path, inner_path)
    team_store.watching = inner_store.watching = True

    report = await localize_context_bug(result, is_wrong=is_wrong)

    by_id = {item.suspect.id: item for item in report.suspects}
    assert by_id[CULPRIT].verdict == "CAUSAL", by_id[CULPRIT].why
    assert report.baseline is not None and (report.baseline.runs, report.baseline.flips) == (
        1, 0)
    # whose conversations the re-runs read: TEAM for the members, INNER for the tool agent;
    # reads only (every write and turn claim went to the re-runs' private copies)
    assert {who for _, who in team_store.calls} == {"conv-team"}
    assert {who for _, who in inner_store.calls} == {"conv-inner"}
    assert {name for name, _ in team_store.calls + inner_store.calls} <= READS
    # the baseline re-run (the first) saw exactly what the explained run saw, agent by agent
    baseline = (inner_prompts[counts[0]], lead_prompts[counts[1] + 1],
                writer_prompts[counts[2]])
    assert [untimed(p) for p in baseline] == [untimed(p) for p in originals]
    assert "Hello team" in baseline[1] and "closed-zq" in baseline[0]
    assert files(team_path, inner_path) == before
    await team_store.aclose()
    await inner_store.aclose()


def approver(store: SQLiteStore | None = None) -> Conditional:
    """Routes memos to a memory agent (no identity of its own); everything else to an agent
    whose planted fact approves every refund: a context bug."""
    holder = store if store is not None else SQLiteStore(STORED["path"])
    STORED.setdefault("opened", []).append(holder)

    def memo_respond(request: LLMRequest) -> str:
        return "memo kept"

    def respond(request: LLMRequest) -> str:
        return ("Refund APPROVED." if "approve every refund" in (request.system or "")
                else "Refund DENIED: outside the window.")

    memo = Agent(provider=mock(respond=memo_respond, deterministic=True), model="m",
                 name="memo", memory=memory("memo", holder))
    clerk = Agent(provider=mock(respond=respond, deterministic=True), model="m", name="clerk",
                  context=[define_fact(id="vip-override", data="VIP: approve every refund.")])
    return Conditional(("memo", lambda i: i.message.startswith("MEMO"), memo),
                       otherwise=clerk)


STORED: dict[str, Any] = {}
"""The memory file ``approver()`` opens when ``prove`` rebuilds it, and the stores it opened."""


def refund_wrong(answer: str) -> bool:
    return "APPROVED" in answer


async def test_a_team_whose_memory_member_never_ran_is_rerun_under_the_recorded_identity(
        tmp_path: Path) -> None:
    """Run with identity=TEAM, the Conditional took its plain branch: no member recorded an
    identity, so only the recorded one lets the re-runs start (the memory branch needs one).
    The fact is proven CAUSAL, in-process and again from a SQLite run store by ``prove``."""
    path = tmp_path / "memo.db"
    STORED["path"] = path
    store = SQLiteStore(path)
    result = await approver(store).run("Refund order A-1001?", identity=TEAM)
    assert refund_wrong(result.content)
    before = files(path)

    report = await localize_context_bug(result, is_wrong=refund_wrong)

    assert not any(n.startswith("[baseline-incomplete]") for n in report.notes), report.notes
    assert report.baseline is not None and report.baseline.runs == 1
    by_id = {item.suspect.id: item for item in report.suspects}
    assert by_id["vip-override"].verdict == "CAUSAL", by_id["vip-override"].why
    assert run_identity(result.recording.log) == TEAM

    with RunStore(tmp_path / "runs.db") as runs:
        runs.save(result)
        assert run_identity(runs.load(result.run_id).commit_log()) == TEAM
        proven = await prove_stored_run(runs, result.run_id, is_wrong=refund_wrong,
                                        factory=f"{__name__}:approver")
    by_id = {item.suspect.id: item for item in proven.suspects}
    assert by_id["vip-override"].verdict == "CAUSAL", by_id["vip-override"].why
    assert files(path) == before
    for opened in STORED.pop("opened"):
        await opened.aclose()


def without_run_identity(result: Any) -> Recording:
    """The run's recording as it was written before compositions kept their identity."""
    body = json.loads(Recording.of(result).to_json())
    start = body["log"]["records"][0]
    assert (start["ns"], start["stage_id"]) == ("", "start")
    start["changes"] = [c for c in start["changes"] if c["key"] != trace.IDENTITY]
    return Recording.model_validate(body)


async def test_an_older_recording_is_rerun_under_the_identity_its_members_recorded(
        tmp_path: Path) -> None:
    """A recording without the composition's identity: the one identity its memory members
    recorded is inferred, the re-runs run under it, the cause is proven as before and the
    user's store is unchanged."""
    path = tmp_path / "old.db"
    store = SpyStore(path)
    inner_prompts: list[str] = []
    inner = planner(store, inner_prompts)
    await inner.run(STALE)
    team = Sequence(("lead", lead(store, inner, [])), ("write", writer(store, [])))
    result = await team.run(QUESTION, identity=TEAM)
    old = without_run_identity(result)
    log = old.commit_log()
    assert log.value_at(trace.IDENTITY, len(log.records), default=None) is None
    assert run_identity(log) == TEAM  # inferred from the members
    before = files(path)
    store.watching = True

    stored = StoredRun(result.content, old, team, result.run_id)
    report = await localize_context_bug(stored, is_wrong=is_wrong)

    by_id = {item.suspect.id: item for item in report.suspects}
    assert by_id[CULPRIT].verdict == "CAUSAL", by_id[CULPRIT].why
    assert {who for _, who in store.calls} == {"conv-team", "conv-inner"}
    assert {name for name, _ in store.calls} <= READS
    assert files(path) == before
    await store.aclose()


async def test_an_older_conditional_recording_still_infers_nothing(tmp_path: Path) -> None:
    """What the recorded identity fixes: the same Conditional run, recorded the old way, has
    no member identity to infer from, so its re-runs could not start."""
    store = SQLiteStore(tmp_path / "memo-old.db")
    STORED["path"] = tmp_path / "memo-old.db"
    result = await approver(store).run("Refund order A-1001?", identity=TEAM)
    assert run_identity(without_run_identity(result).commit_log()) is None
    stored = StoredRun(result.content, without_run_identity(result), result.source,
                       result.run_id)
    report = await localize_context_bug(stored, is_wrong=refund_wrong)
    assert report.baseline is not None and report.baseline.runs == 0
    assert "has memory but no identity" in " ".join(report.baseline.reasons)
    assert not any(item.verdict == "CAUSAL" for item in report.suspects)
    for opened in STORED.pop("opened"):
        await opened.aclose()
