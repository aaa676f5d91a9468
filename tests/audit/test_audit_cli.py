"""``agentfootprint audit verify|export`` and the chain head a run store keeps with each run.

``verify`` prints one line and exits 0 (ok), 1 (broken, naming the record) or 2 (bad input),
never a traceback. A run saved to the store carries its chain head; editing the stored answer
in the SQLite file directly makes ``explain`` lead with TAMPERED (and ``report`` refuse).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentfootprint import Agent, tool
from agentfootprint.audit import audit_export, verify_audit_bundle
from agentfootprint.cli import main
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RunStore
from agentfootprint.runs._chain import AUDIT_FORMAT, check_chain_head

ANSWER = "Order A-1 shipped on Monday."


@tool(name="lookup")
async def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped Monday"


def _stored(tmp_path: Path) -> tuple[Path, str]:
    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "lookup", "args": {"order_id": "A-1"}}]}, ANSWER]),
        model="mock", tools=[lookup])
    result = asyncio.run(agent.run("Where is order A-1?"))
    store = tmp_path / "runs.db"
    with RunStore(store) as runs:
        runs.save(result)
    return store, result.run_id


def _one_line(text: str) -> str:
    assert "Traceback" not in text
    assert text.count("\n") == 1 and text.endswith("\n"), text
    return text


def test_verify_exit_codes_and_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = _stored(tmp_path)
    bundle = tmp_path / "run.jsonl"
    assert main(["audit", "export", run_id, "--store", str(store), "-o", str(bundle)]) == 0
    assert f"7 record(s) of run {run_id}" in _one_line(capsys.readouterr().out)

    assert main(["audit", "verify", str(bundle)]) == 0
    out = _one_line(capsys.readouterr().out)
    assert out.startswith("ok: all 7 record(s)")

    data = bytearray(bundle.read_bytes())
    data[data.index(b'"type":"tool_call"') + 9] ^= 0x01  # inside record 4, the tool call
    bundle.write_bytes(bytes(data))
    assert main(["audit", "verify", str(bundle)]) == 1
    out = _one_line(capsys.readouterr().out)
    assert out.startswith("broken at record 4:") and "3 record(s) verified" in out

    assert main(["audit", "verify", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in _one_line(capsys.readouterr().err)
    empty = tmp_path / "empty.key"
    empty.write_bytes(b"")
    assert main(["audit", "verify", str(bundle), "--key-file", str(empty)]) == 2
    assert "is empty" in _one_line(capsys.readouterr().err)


def test_keyed_export_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = _stored(tmp_path)
    key, other = tmp_path / "audit.key", tmp_path / "other.key"
    key.write_bytes(b"\x00secret audit key\n")
    other.write_bytes(b"another key")
    bundle = tmp_path / "keyed.jsonl"
    assert main(["audit", "export", run_id, "--store", str(store), "--key-file", str(key),
                 "-o", str(bundle)]) == 0
    capsys.readouterr()
    assert main(["audit", "verify", str(bundle), "--key-file", str(key)]) == 0
    assert main(["audit", "verify", str(bundle), "--key-file", str(other)]) == 1
    assert main(["audit", "verify", str(bundle)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ok:") and "key is wrong" in out[1] and "pass its key" in out[2]


def test_export_to_stdout_as_a_command(tmp_path: Path) -> None:
    """In a fresh interpreter: the bundle's bytes on stdout, exactly what audit_export gives."""
    store, run_id = _stored(tmp_path)
    done = subprocess.run([sys.executable, "-m", "agentfootprint.cli", "audit", "export",
                           run_id, "--store", str(store), "--full-content"],
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    with RunStore(store) as runs:
        expected = audit_export(runs.load(run_id), full_content=True, proofs=runs.proofs(run_id))
    assert done.stdout == expected and ANSWER.encode() in done.stdout
    bad = subprocess.run([sys.executable, "-m", "agentfootprint.cli", "audit", "verify",
                          str(tmp_path / "runs.db")], capture_output=True, text=True,
                         timeout=120, check=False)
    assert bad.returncode == 1 and "broken at record 0" in _one_line(bad.stdout)
    assert "Traceback" not in bad.stderr


def test_export_of_an_unknown_run_or_store(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = _stored(tmp_path)
    assert main(["audit", "export", "nope", "--store", str(store)]) == 1
    assert "no run 'nope'" in _one_line(capsys.readouterr().err)
    assert main(["audit", "export", "nope", "--store", str(tmp_path / "none.db")]) == 1
    assert "no run store" in _one_line(capsys.readouterr().err)


# -- the chain head kept by the run store ---------------------------------------------------


def test_the_store_keeps_the_default_bundles_head(tmp_path: Path) -> None:
    store, run_id = _stored(tmp_path)
    with RunStore(store) as runs:
        head = runs.chain_head(run_id)
        recording = runs.load(run_id)
        runs.add_proof(run_id, {"kind": "rerun", "verdict": "CAUSAL"})
        with_proof = audit_export(recording, proofs=runs.proofs(run_id))
    bundle = audit_export(recording)
    final = json.loads(bundle.split(b"\n")[0])["final_hash"]
    assert head == f"{AUDIT_FORMAT}:{final}"
    assert check_chain_head(recording, head).status == "intact"
    # a proof kept later extends the chain: the stored head is the hash of the answer record
    assert verify_audit_bundle(with_proof).ok
    assert json.loads(with_proof.split(b"\n")[7])["hash"] == head.split(":", 1)[1]


def test_an_edited_answer_is_not_explained_as_genuine(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    store, run_id = _stored(tmp_path)
    assert main(["--store", str(store), "explain", run_id]) == 0
    assert "TAMPERED" not in capsys.readouterr().out
    with sqlite3.connect(store) as db:  # someone edits the stored answer in the file
        db.execute("UPDATE runs SET body = replace(body, ?, ?)",
                   ("shipped on Monday", "was cancelled"))
    with RunStore(store) as runs:
        assert "was cancelled" in str(runs.load(run_id).output)
    assert main(["--store", str(store), "explain", run_id]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"TAMPERED: run {run_id!r} no longer matches the chain head kept "
                          "when it was saved")
    assert "explains the edited run, not the run as it happened" in out
    report = tmp_path / "r.html"
    assert main(["--store", str(store), "report", run_id, "-o", str(report)]) == 1
    assert "TAMPERED" in _one_line(capsys.readouterr().err) and not report.exists()


def test_a_save_without_rfc8785_keeps_no_head_and_never_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A core-only install: the run is saved, with no head; explain says nothing is wrong."""
    monkeypatch.setitem(sys.modules, "rfc8785", None)
    monkeypatch.setattr("agentfootprint.runs._chain._said", [])
    with caplog.at_level(logging.WARNING, logger="agentfootprint.runs"):
        store, run_id = _stored(tmp_path)
    assert "saved without an audit chain head" in caplog.text
    with RunStore(store) as runs:
        assert runs.chain_head(run_id) is None
        check = check_chain_head(runs.load(run_id), None)
    assert check.status == "absent" and not check.broken


def test_a_recording_round_trip_keeps_the_head() -> None:
    """What a store hashes at save is what it hashes after loading: a recording read back
    from its JSON gives the same head, so an untouched run is never called tampered."""
    agent = Agent(provider=mock(script=["plain answer"]), model="mock")
    recording = Recording.of(asyncio.run(agent.run("hi")))
    again = Recording.from_json(recording.to_json())
    assert audit_export(again) == audit_export(recording)


def test_postgres_keeps_and_checks_the_chain_head(pg_url: str, pg_schema: str) -> None:
    """The PostgreSQL run store keeps the same head; an answer edited in its row is caught."""
    import psycopg
    from psycopg import sql

    from agentfootprint.runs import PostgresRunStore

    agent = Agent(provider=mock(script=[ANSWER]), model="mock")
    result = asyncio.run(agent.run("Where is order A-1?"))
    with PostgresRunStore(pg_url, schema=pg_schema) as store:
        store.save(result)
        head = store.chain_head(result.run_id)
        recording = store.load(result.run_id)
        assert head is not None and check_chain_head(recording, head).status == "intact"
        final = json.loads(audit_export(recording).split(b"\n")[0])["final_hash"]
        assert head == f"{AUDIT_FORMAT}:{final}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("UPDATE {} SET body = replace(body, %s, %s)").format(
            sql.Identifier(pg_schema, "af_runs")), ("shipped on Monday", "was cancelled"))
    with PostgresRunStore(pg_url, schema=pg_schema) as store:
        edited = store.load(result.run_id)
        assert check_chain_head(edited, store.chain_head(result.run_id)).broken
