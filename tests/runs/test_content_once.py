"""Content stored once (runs/_content.py): a run's large strings are kept once per run in its
store and referenced elsewhere, addressed after redaction, and read back as they were.

The PostgreSQL twin of the 10 MB case is ``test_content_once_postgres.py`` (e2e).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, Tracing, tool
from agentfootprint.errors import RunError
from agentfootprint.memory import InMemoryStore, MemoryIdentity, define_memory, window
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RedactionPolicy, RunStore
from agentfootprint.runs import _content as content
from agentfootprint.runs._chain import check_chain_head, rfc8785_available
from agentfootprint.runs._content import address_of

MB = 1024 * 1024


def big_text(size: int, seed: bytes = b"") -> str:
    """``size`` characters no compressor or dedupe can shrink (base64 of random bytes)."""
    return (seed.decode() + base64.b64encode(os.urandom(size * 3 // 4 + 3)).decode())[:size]


def files_of(path: Path) -> list[Path]:
    return [p for p in (path, Path(f"{path}-wal")) if p.exists()]


def store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in files_of(path))


@tool
async def fetch_report(name: str) -> str:
    """A long report, as a tool might return one."""
    return REPORT


REPORT = big_text(50_000, b"REPORT-")


def memory_agent(store: RunStore, memory: InMemoryStore, script: list[Any]) -> Agent:
    chat = define_memory(id="chat", type="episodic", strategy=window(5), store=memory)
    return Agent(provider=mock(script=script), name="Big", memory=[chat], tools=[fetch_report],
                 identity=MemoryIdentity("c-1"), tracing=Tracing(run_store=store))


def test_a_10_mb_user_message_grows_a_sqlite_store_by_at_most_12_mb(tmp_path: Path) -> None:
    """The message sits in user_message, history, turn_start, the memory's read and write:
    six places in the run, one row in the store (63 MB without memory before, 126 MB with)."""
    path = tmp_path / "runs.db"
    memory = InMemoryStore()
    with RunStore(path) as store:
        memory_agent(store, memory, ["ok"]).run_sync("hi")
    before = store_bytes(path)
    message = big_text(10 * MB)
    with RunStore(path) as store:
        result = memory_agent(store, memory, ["ok"]).run_sync(message)
    grown = store_bytes(path) - before
    assert grown <= 12 * MB, f"a 10 MB message grew the run store by {grown / MB:.1f} MB"
    with RunStore(path) as store:
        loaded = store.load(result.run_id)
    assert loaded.log == Recording.of(result).log  # every copy is back in its place
    assert message in json.dumps(loaded.log["records"][0])


def test_tool_results_and_recalled_entries_are_kept_once(tmp_path: Path) -> None:
    """A 50 KB tool result (in history, its tool_end event, the memory's write) and a turn's
    message recalled by the next turn (the entry, and the recall's text in three places): one
    contents row per distinct string, no body or progress entry holding the text."""
    path = tmp_path / "runs.db"
    memory = InMemoryStore()
    first = big_text(20_000, b"FIRST-")
    with RunStore(path) as store:
        turn_1 = memory_agent(store, memory, [
            {"tool_calls": [{"name": "fetch_report", "args": {"name": "q3"}}]}, "Read it."]
        ).run_sync(first)
        turn_2 = memory_agent(store, memory, ["Recalled."]).run_sync("What did I send?")
        loaded = [store.load(turn_1.run_id), store.load(turn_2.run_id)]
    db = sqlite3.connect(path)
    rows = db.execute("SELECT run_id, address, body FROM contents").fetchall()
    kept_1 = {address: json.loads(body) for run, address, body in rows if run == turn_1.run_id}
    kept_2 = {address: json.loads(body) for run, address, body in rows if run == turn_2.run_id}
    assert kept_1 == {address_of(first): first, address_of(REPORT): REPORT}
    assert address_of(first) in kept_2  # the recalled entry, kept again for turn 2's run
    (body_2,) = db.execute("SELECT body FROM runs WHERE run_id = ?", (turn_2.run_id,)).fetchone()
    refs = [address for _, address in json.loads(body_2)[content.REFS]]
    assert sorted(set(refs)) == sorted(kept_2) and len(refs) > len(kept_2)  # repeats: one row
    bodies = [body for (body,) in db.execute("SELECT body FROM runs UNION ALL "
                                             "SELECT body FROM progress")]
    assert db.execute("SELECT count(*) FROM progress").fetchone()[0] >= 2  # the tool's entries
    for body in bodies:
        assert "FIRST-" not in body and "REPORT-" not in body
    db.close()
    assert json.dumps(loaded[1].log).count(first[:64]) >= 2  # every place has it back
    assert loaded[0].log == Recording.of(turn_1).log
    assert loaded[1].log == Recording.of(turn_2).log


SECRET = "sk-7f3a9c0e5b1d42a8b6e09d1c"


def test_a_redacted_secret_is_never_stored_nor_its_hash(tmp_path: Path) -> None:
    """Redaction runs before addressing: the long message and tool result are kept by the
    address of their redacted text; the secret, its SHA-256 and the addresses of the
    unredacted values appear in no byte of the store."""
    path = tmp_path / "runs.db"
    message = f"Keep my key {SECRET} safe. " + big_text(6000, b"MSG-")
    leaked_result = f"The key on file is {SECRET}. " + REPORT

    @tool
    async def lookup(name: str) -> str:
        """Quotes the key back."""
        return leaked_result

    policy = RedactionPolicy(text_patterns=[r"sk-[0-9a-f]{24}"])
    with RunStore(path) as store:
        agent = Agent(provider=mock(script=[
            {"tool_calls": [{"name": "lookup", "args": {"name": "k"}}]}, "Done."]),
            tools=[lookup], tracing=Tracing(redaction=policy, run_store=store))
        result = agent.run_sync(message)
        loaded = store.load(result.run_id)
        written = b"".join(p.read_bytes() for p in files_of(path))  # the open store, WAL too
    closed = b"".join(p.read_bytes() for p in files_of(path))
    for data in (written, closed):
        for form in (SECRET, hashlib.sha256(SECRET.encode()).hexdigest(),
                     address_of(SECRET).split(":")[1], address_of(message).split(":")[1],
                     address_of(leaked_result).split(":")[1]):
            assert form.encode() not in data, f"{form} reached the store"
    kept = {address: json.loads(body) for address, body in sqlite3.connect(path).execute(
        "SELECT address, body FROM contents")}
    masked = message.replace(SECRET, "[REDACTED]")
    assert kept[address_of(masked)] == masked  # the long text was addressed as redacted
    assert SECRET not in json.dumps(loaded.log) and masked in json.dumps(loaded.log)


def test_progress_entries_and_a_started_run_share_the_runs_contents(tmp_path: Path) -> None:
    """begin (its start input), each progress entry and the saved body reference one row."""
    text = big_text(9000)
    with RunStore(tmp_path / "runs.db") as store:
        opening = Recording(run_id="r-1", kind="agent", name="a", status="running",
                            created_at=1.0, chart={}, log={"initial": {}, "records": []},
                            meta={"start": {"user_message": text}})
        store.begin(opening)
        entries = [{"phase": "started", "records": [{"idx": 0, "note": text}], "n": float(i)}
                   for i in range(3)]
        for entry in entries:
            store.append_progress("r-1", entry)
        assert store.progress("r-1") == entries
        assert store.load("r-1").meta == opening.meta
        rows = store._db.execute("SELECT address FROM contents").fetchall()
    assert rows == [(address_of(text),)]


def test_a_run_saved_again_is_recognised_through_its_references(tmp_path: Path) -> None:
    """Saving the same run again compares with the stored body resolved, not its markers."""
    text = big_text(9000)
    with RunStore(tmp_path / "runs.db") as store:
        result = Agent(provider=mock(script=["ok"]), tracing=Tracing(run_store=store)
                       ).run_sync(text)
        store.save(result)  # the same run: accepted
        store.save(Recording.of(result))
        assert store.load(result.run_id).log == Recording.of(result).log


def test_a_kept_string_altered_in_the_store_is_refused_by_address(tmp_path: Path) -> None:
    """A contents row whose text no longer hashes to its address is an error naming it."""
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        result = Agent(provider=mock(script=["ok"]), tracing=Tracing(run_store=store)
                       ).run_sync(big_text(9000))
    db = sqlite3.connect(path)
    (address,) = db.execute("SELECT address FROM contents").fetchone()
    db.execute("UPDATE contents SET body = ?", (json.dumps("edited " + big_text(9000)),))
    db.commit()
    db.close()
    with RunStore(path) as store, pytest.raises(RunError, match=address):
        store.load(result.run_id)


def test_a_body_written_inline_before_schema_6_still_loads(tmp_path: Path) -> None:
    """A body holding its large strings inline (every body before) is read as it is."""
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        result = Agent(provider=mock(script=["ok"]), tracing=Tracing(run_store=store)
                       ).run_sync(big_text(9000))
        recording = store.load(result.run_id)
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET body = ?", (recording.to_json(),))
    db.execute("DELETE FROM contents")
    db.commit()
    db.close()
    with RunStore(path) as store:
        assert store.load(result.run_id).to_json() == recording.to_json()


@pytest.mark.skipif(not rfc8785_available(), reason="the audit chain needs rfc8785")
def test_the_audit_chain_hashes_the_resolved_recording(tmp_path: Path) -> None:
    """The head kept at save is the head of the recording as read back (references resolved),
    so it verifies; a kept string edited at its address breaks it before anyone reads it."""
    with RunStore(tmp_path / "runs.db") as store:
        result = Agent(provider=mock(script=["ok"]), tracing=Tracing(run_store=store)
                       ).run_sync(big_text(9000))
        loaded = store.load(result.run_id)
        assert check_chain_head(loaded, store.chain_head(result.run_id)).status == "intact"
    assert content.has_refs(content.kept(loaded.to_json()).text)


def test_small_bodies_are_written_byte_for_byte_as_before() -> None:
    """No string of LARGE bytes: the body is the recording's own JSON, unchanged."""
    text = json.dumps({"format": "x", "log": {"records": [{"v": "a" * (content.LARGE - 1)}]}})
    assert content.kept(text).text == text and not content.kept(text).contents
    multibyte = "é" * (content.LARGE // 2)  # LARGE bytes in UTF-8, half as many characters
    assert content.kept(json.dumps({"v": multibyte})).contents


def test_a_recalled_entry_is_kept_once_with_the_blocks_built_from_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn 2 recalls an 80 KB entry (chunked from 4 KB here; from 128 KB by default, where a
    recall budget would drop it): the entry, the recall's prompt text and its piece (both wrap
    it in a <memory> block) share its chunks, so the run keeps it about once (3.04x without)."""
    monkeypatch.setattr(content, "CHUNKED", 4096)
    monkeypatch.setattr(content, "CHUNK_MIN", 2048)
    monkeypatch.setattr(content, "CHUNK_MAX", 32768)
    draw = random.Random(7)  # the same text every run, so the same cuts
    entry = "\n".join(f"{n:06d}" + base64.b64encode(draw.randbytes(56)).decode()
                      for n in range(1000))
    memory = InMemoryStore()
    with RunStore(tmp_path / "runs.db") as store:
        memory_agent(store, memory, ["ok"]).run_sync(entry)
        recalled = memory_agent(store, memory, ["Recalled."]).run_sync("What did I send?")
        loaded = store.load(recalled.run_id)
        (kept,) = store._db.execute("SELECT sum(length(body)) FROM contents WHERE run_id = ?",
                                    (recalled.run_id,)).fetchone()
    assert json.dumps(loaded.log).count(entry[:60]) >= 3  # the entry and its two blocks
    assert loaded.log == Recording.of(recalled).log
    assert kept <= 1.6 * len(entry), f"turn 2 kept {kept / len(entry):.2f}x the entry"
