"""Re-runs of a composition whose members have memory: the recorded identity, the user's store
untouched.

A team's run is re-run under the identity its memory members recorded; every member of one
re-run reads one private copy of the user's store as it was before the explained run (so a later
member recalls what an earlier member of the same re-run wrote, at the turns of the explained
run), and the user's SQLite store — its entries and its turn claims — is the same before and
after the explanation.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentfootprint import Agent
from agentfootprint.compose import Parallel, Sequence
from agentfootprint.explain import localize_context_bug
from agentfootprint.explain._prove import prove_stored_run
from agentfootprint.explain._whatif import bisect_culprits, rerun_without_sources
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.runs import RunStore

STALE = "Note: the Lisbon depot closed-zq; ship everything to Atlantis."
QUESTION = "Where should the parcel for ticket 42 go?"
CULPRIT = "memory:planner#msg-1-0"
PARALLEL_CULPRITS = frozenset({"memory:planner#msg-1-0", "memory:planner#msg-2-0"})
"""The note as a Parallel's two members both stored it, recalled by the planner."""
IDENTITY = MemoryIdentity("conv-team", principal="user-1")


def is_wrong(answer: str) -> bool:
    return "Atlantis" in answer


def planner(store: SQLiteStore, prompts: list[str] | None = None, *,
            identity: MemoryIdentity | None = None) -> Agent:
    """Ships wherever its recalled memory says (the stale note wins): a context bug."""

    def respond(request: LLMRequest) -> str:
        seen = " | ".join([request.system or "", *(str(m["content"]) for m in request.messages)])
        if prompts is not None:
            prompts.append(seen)
        if QUESTION not in str(request.messages[-1]["content"]):
            return "noted"
        return "Plan: ship to Atlantis." if "closed-zq" in seen else "Plan: ship to Lisbon."

    return Agent(provider=mock(respond=respond, deterministic=True), model="m", name="planner",
                 identity=identity,
                 memory=[define_memory(id="planner", type="episodic", strategy="window",
                                       keep_turns=10, store=store)])


def writer(store: SQLiteStore, prompts: list[str] | None = None, *,
           identity: MemoryIdentity | None = None) -> Agent:
    """Restates the plan it is handed (its own recall never decides the answer)."""

    def respond(request: LLMRequest) -> str:
        if prompts is not None:
            prompts.append(" | ".join([request.system or "",
                                       *(str(m["content"]) for m in request.messages)]))
        last = str(request.messages[-1]["content"])
        return f"Reply: {last}" if last.startswith("Plan:") else "noted"

    return Agent(provider=mock(respond=respond, deterministic=True), model="m", name="writer",
                 identity=identity,
                 memory=[define_memory(id="writer", type="episodic", strategy="window",
                                       keep_turns=10, store=store)])


def untimed(prompt: str) -> str:
    """A prompt without the write times of its recalled entries (a re-run writes anew)."""
    return re.sub(r' updated="[^"]*"', "", prompt)


def rows(path: Path) -> dict[str, list[Any]]:
    """Every row of every table of the user's SQLite store (entries, turns, claims)."""
    with sqlite3.connect(path) as conn:
        tables = [name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}"))) for t in tables}


async def explained_team(path: Path, make: Callable[[SQLiteStore], Any], *,
                         identity: MemoryIdentity | None = IDENTITY) -> tuple[Any, Any]:
    """The team's earlier turn plants the stale note; the next run answers wrong from it."""
    store = SQLiteStore(path)
    team = make(store)
    await team.run(STALE, identity=identity)
    result = await team.run(QUESTION, identity=identity)
    assert is_wrong(result.content), result.content
    return store, result


async def test_localize_proves_a_stale_memory_entry_of_a_sequence_member(
        tmp_path: Path) -> None:
    """A Sequence of two memory agents on SQLite: the planner's recall of the stale note is
    proven CAUSAL (without it the answer flips; the unchanged team never does), each re-run
    sees exactly the prompts of the explained run, and the user's store is unchanged."""
    path = tmp_path / "team.db"
    prompts: list[str] = []
    store, result = await explained_team(path, lambda s: Sequence(
        ("plan", planner(s)), ("write", writer(s, prompts))))
    assert result.turn == 4  # planner turn 3, writer turn 4 (turns 1-2: the earlier run)
    original = prompts[-1]
    assert "Plan: ship to Atlantis." in original  # the writer recalls the planner's turn 3
    before, size = rows(path), path.stat().st_size
    assert before["af_memory_turn_holders"] == []

    report = await localize_context_bug(result, is_wrong=is_wrong)

    assert not any(n.startswith("[baseline-incomplete]") for n in report.notes), report.notes
    assert report.baseline is not None and report.baseline.flips == 0
    assert report.baseline.runs == 1 and report.deterministic
    by_id = {item.suspect.id: item for item in report.suspects}
    assert by_id[CULPRIT].verdict == "CAUSAL", by_id[CULPRIT].why
    assert [c.members for c in report.causes if c.verdict == "CAUSAL"] == [(CULPRIT,)]
    assert "Lisbon" in (by_id[CULPRIT].answers[0] if by_id[CULPRIT].answers else "")
    # the baseline re-run's writer saw what the explained run's writer saw: the planner's
    # turn-3 entry of the same re-run, at the same turns (one private copy per re-run)
    assert len(prompts) == 2 + report.runs_used
    assert untimed(prompts[2]) == untimed(original)
    assert '<memory role="assistant" turn="3"' in prompts[2]
    # the user's store: same rows (entries, turn numbers, no claims held), same size
    assert rows(path) == before
    assert path.stat().st_size == size
    await store.aclose()


async def test_a_parallel_teams_stale_memory_is_proven_without_touching_the_store(
        tmp_path: Path) -> None:
    """The same bug side by side: members of one re-run share its private copy and claim
    distinct turns in it; the culprit is CAUSAL and the user's store is unchanged."""
    path = tmp_path / "par.db"
    store, result = await explained_team(path, lambda s: Parallel(
        ("plan", planner(s)), ("write", writer(s))))
    before = rows(path)

    report = await localize_context_bug(result, is_wrong=is_wrong)

    assert not any(n.startswith("[baseline-incomplete]") for n in report.notes), report.notes
    # side by side, both members stored the note (turns 1 and 2): only both copies together
    # carry it to the planner's recall, so the proven cause is the pair
    causal = [frozenset(c.members) for c in report.causes if c.verdict == "CAUSAL"]
    assert causal == [PARALLEL_CULPRITS], report.causes
    assert report.baseline is not None and report.baseline.flips == 0
    assert rows(path) == before
    await store.aclose()


async def test_a_rebuilt_team_is_rerun_isolated_under_the_recorded_identity(
        tmp_path: Path) -> None:
    """``rebuild`` returning a fresh team (another process's) is run under the identity the
    members recorded and isolated the same way: the what-if flips, the store is unchanged."""
    path = tmp_path / "rebuilt.db"
    store, result = await explained_team(path, lambda s: Sequence(
        ("plan", planner(s)), ("write", writer(s))))
    before = rows(path)
    fresh = SQLiteStore(path)  # the rebuilt team's own store object on the same file

    def rebuild(without: frozenset[str]) -> Sequence:
        return Sequence(("plan", planner(fresh)), ("write", writer(fresh))).without(without)

    found = await rerun_without_sources(result, rebuild=rebuild, is_wrong=is_wrong,
                                        sources=[CULPRIT], reruns=1)
    assert found.verdict == "CAUSAL", found.why
    assert found.baseline.runs == 1 and found.baseline.flips == 0
    assert rows(path) == before
    await fresh.aclose()
    await store.aclose()


async def test_members_under_their_own_identities_are_rerun_under_them(tmp_path: Path) -> None:
    """No run identity, each member its own conversation: a re-run hands none, so each member
    reads its own conversation's copy again; the culprit is CAUSAL, the store unchanged."""
    path = tmp_path / "own.db"
    store, result = await explained_team(path, lambda s: Sequence(
        ("plan", planner(s, identity=MemoryIdentity("conv-plan"))),
        ("write", writer(s, identity=MemoryIdentity("conv-write")))), identity=None)
    before = rows(path)

    report = await localize_context_bug(result, is_wrong=is_wrong)

    assert not any(n.startswith("[baseline-incomplete]") for n in report.notes), report.notes
    by_id = {item.suspect.id: item for item in report.suspects}
    assert by_id[CULPRIT].verdict == "CAUSAL", by_id[CULPRIT].why
    assert rows(path) == before
    await store.aclose()


def lead(tools: list[Any]) -> Agent:
    """Asks its planner tool and answers with what the tool said."""

    def respond(request: LLMRequest) -> object:
        answers = [m for m in request.messages if m["role"] == "tool"]
        if not answers:
            return {"tool_calls": [{"id": "c1", "name": "planner", "args": {
                "request": str(request.messages[-1]["content"])}}]}
        return str(answers[-1]["content"])

    return Agent(provider=mock(respond=respond, deterministic=True), model="m", name="lead",
                 tools=tools)


async def test_a_memory_agent_used_as_a_members_tool_is_rerun_isolated(tmp_path: Path) -> None:
    """A team member calls a memory agent as a tool (its own conversation): the inner agent
    runs again on the re-run's private copy, cut at the turn it had in the explained run (its
    recording is inside the caller's), so it sees the prompt it saw then; CAUSAL, store
    unchanged."""
    path = tmp_path / "tool.db"
    prompts: list[str] = []

    def team(store: SQLiteStore) -> Sequence:
        inner = planner(store, prompts, identity=MemoryIdentity("conv-planner"))
        caller = lead([inner.as_tool(name="planner", description="Plans shipping.")])
        return Sequence(("lead", caller), ("write", writer(store)))

    store, result = await explained_team(path, team)
    original = prompts[-1]
    before = rows(path)

    report = await localize_context_bug(result, is_wrong=is_wrong)

    by_id = {item.suspect.id: item for item in report.suspects}
    assert by_id[CULPRIT].verdict == "CAUSAL", by_id[CULPRIT].why
    assert report.baseline is not None and report.baseline.flips == 0
    assert untimed(prompts[2]) == untimed(original)  # the baseline's inner run: same recall
    assert "turn=\"2\"" not in prompts[2]  # not the explained run's own writes
    assert rows(path) == before
    await store.aclose()


STORED: dict[str, Any] = {}
"""Where ``stored_team`` finds the user's memory store (set by the test that uses it), and
the store objects it opened (closed by that test)."""


def stored_team() -> Sequence:
    """The factory ``prove`` rebuilds the team from, in what could be another process."""
    store = SQLiteStore(STORED["path"])
    STORED.setdefault("opened", []).append(store)
    return Sequence(("plan", planner(store)), ("write", writer(store)))


async def test_prove_rebuilds_a_stored_team_and_reruns_it_isolated(tmp_path: Path) -> None:
    """``prove`` of a team's stored run: the factory's team is re-run under the identity its
    members recorded, the culprit is CAUSAL, the proof is kept, and the memory store is
    unchanged."""
    path = tmp_path / "memory.db"
    STORED["path"] = path
    store, result = await explained_team(path, lambda s: Sequence(
        ("plan", planner(s)), ("write", writer(s))))
    before = rows(path)
    with RunStore(tmp_path / "runs.db") as runs:
        runs.save(result)
        report = await prove_stored_run(runs, result.run_id, is_wrong=is_wrong,
                                        factory=f"{__name__}:stored_team")
        kept = runs.proofs(result.run_id)
    by_id = {item.suspect.id: item for item in report.suspects}
    assert by_id[CULPRIT].verdict == "CAUSAL", by_id[CULPRIT].why
    assert len(kept) == 1
    assert rows(path) == before
    for opened in STORED.pop("opened"):
        await opened.aclose()
    await store.aclose()


async def test_bisect_finds_the_stale_entry_of_a_parallel_team(tmp_path: Path) -> None:
    """Bisection over a Parallel team's re-runs names the two stored copies of the note (and
    nothing else); the user's store is unchanged (every probe ran on private copies)."""
    path = tmp_path / "bisect.db"
    store, result = await explained_team(path, lambda s: Parallel(
        ("plan", planner(s)), ("write", writer(s))))
    before = rows(path)

    found = await bisect_culprits(result, is_wrong=is_wrong, reruns=1)

    assert found.verdict == "CAUSAL", found.reason
    assert found.culprits == [PARALLEL_CULPRITS]
    assert rows(path) == before
    await store.aclose()
