"""The leak test: one secret, planted everywhere a run can pick it up, reaches no sink.

The secret enters through a user message, a tool argument, a check-in pause (the run pauses
on a call carrying it), a tool error that quotes it, a flowchart stage that raises with it,
and memory recall (turns 2 and 3 recall turn 1). A sink is anywhere a run's bytes go: the
recording, the run store's file (and PostgreSQL rows when a server is available), checkpoints,
events delivered to listeners and recorders, log records, the narrative, the CLI's output,
the HTML report, audit bundles (bounded and full content) and OpenTelemetry spans (live and
exported, content capture on). Each sink is checked by
:func:`assert_clean` in every form the secret could take there (raw, JSON-escaped,
HTML-escaped, base64 at any alignment).

To add a sink (spans, HTTP responses, session stores, queues): run
:func:`_scenario` (or reuse ``leaks``), collect the new sink's bytes, and add them to
``Sinks`` under a name — every test below then checks them.

What is not a sink, by design: the memory store (it keeps what the user wrote — the user's
data, not a record of the run) and the answer handed to the caller in-process. A paused
checkpoint is checked whole: its resume state (the real values an approved call runs with) is
sealed with the host's key (``RedactionPolicy(seal_key=...)``), and resuming opens it with the
same key. Without a key that resume state is plain JSON, as documented
(``tests/agent/test_sealed_checkpoint.py`` pins both).
"""

from __future__ import annotations

import base64
import html
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from agentfootprint import Agent, Tracing, check_in_approved, tool
from agentfootprint.audit import audit_export
from agentfootprint.errors import StageError
from agentfootprint.explain import backtrack, render_html_report
from agentfootprint.flow import FlowEvent, flow_chart
from agentfootprint.flow._recorders import EVENT_NAMES
from agentfootprint.flow._redact import REDACTED
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RedactionPolicy, RunStore

SECRET = "sk-live-SECRET-0123456789"
POLICY_KINDS = frozenset({"user_text", "tool_args"})
"""The kinds the scenario redacts: what the person typed, and what the model passed to tools.
Tool results, model text and memory content are not redacted by kind: the secret must still
not reach them (a tool error quoting its argument, a recall of a redacted message)."""
SEAL_KEY = Fernet.generate_key()
"""The host's key: a paused checkpoint's resume state is sealed with it."""


# -- the one place that decides whether a blob leaks ---------------------------------------------


def _forms(secret: str) -> dict[str, bytes]:
    """Every encoding under which ``secret`` could sit in a blob of bytes."""
    raw = secret.encode()
    forms = {"raw": raw, "json": json.dumps(secret)[1:-1].encode(),
             "html": html.escape(secret).encode(), "utf-16": secret.encode("utf-16-le")}
    for shift in range(3):  # base64 of a longer text: the secret's part at each alignment
        for name, encode in (("base64", base64.b64encode), ("base64url",
                                                              base64.urlsafe_b64encode)):
            encoded = encode(b"\0" * shift + raw)
            start = (shift * 4 + 2) // 3 + 1
            end = len(raw) * 4 // 3 - 2
            forms[f"{name}+{shift}"] = encoded[start:start + end - 4]
    return forms


FORMS = _forms(SECRET)


def leaked_forms(blob: bytes | str) -> list[str]:
    """The forms of the secret found in ``blob`` (none: the blob is clean)."""
    data = blob.encode("utf-8", "surrogatepass") if isinstance(blob, str) else blob
    return [form for form, needle in FORMS.items() if needle in data]


def assert_clean(sink: str, blob: bytes | str) -> None:
    """Fail naming ``sink`` and the forms when any form of the secret is in ``blob``."""
    found = leaked_forms(blob)
    assert not found, f"the secret leaked into {sink} ({', '.join(found)})"


def test_the_scanner_finds_the_secret_in_every_form() -> None:
    """The helper itself: a blob carrying the secret in any one form is caught."""
    text = f"prefix {SECRET} suffix"
    blobs = [text.encode(), json.dumps({"k": text}).encode(), html.escape(text).encode(),
             text.encode("utf-16-le")]
    blobs += [base64.b64encode(p.encode() + SECRET.encode() + b"tail") for p in ("", "a", "ab")]
    blobs += [base64.urlsafe_b64encode(b"x" + SECRET.encode())]
    for blob in blobs:
        with pytest.raises(AssertionError, match="leaked"):
            assert_clean("a blob", blob)
    assert_clean("a clean blob", f"prefix {REDACTED} suffix")


# -- the scenario -------------------------------------------------------------------------------


@dataclass
class Sinks:
    """Every byte the scenario's runs left behind, by sink name."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    results: list[Any] = field(default_factory=list)
    """The turns' RunResults (for the checks that the secret really went through)."""
    tool_saw: list[str] = field(default_factory=list)

    def add(self, name: str, blob: bytes | str) -> None:
        data = blob.encode("utf-8", "surrogatepass") if isinstance(blob, str) else blob
        self.blobs[name] = self.blobs.get(name, b"") + data + b"\n"

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        return iter(self.blobs.items())


class _Everything:
    """A recorder on every flow event; each event is kept as JSON."""

    id = "leak-watch"

    def __init__(self, sinks: Sinks) -> None:
        self.sinks = sinks
        for name in EVENT_NAMES:
            setattr(self, f"on_{name}", self._keep)

    def _keep(self, event: FlowEvent) -> None:
        value = event.value
        value = value.to_json() if hasattr(value, "to_json") else value
        self.sinks.add("recorder events", json.dumps(
            [event.name, event.key, value, event.data], default=repr))


def _otel_sink() -> tuple[Callable[[], str], Callable[[Any], str], Any]:
    """Spans as an OTLP collector would get them, content capture on: the live spans so far,
    a recording's exported spans (each as the SDK's JSON), and the live observer."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentfootprint.observe import export_otel, otel

    def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
        exporter = InMemorySpanExporter()
        made = TracerProvider()
        made.add_span_processor(SimpleSpanProcessor(exporter))
        return made, exporter

    live, live_spans = provider()

    def exported(recording: Any) -> str:
        made, spans = provider()
        export_otel(recording, tracer_provider=made, capture_content=True)
        return "\n".join(span.to_json() for span in spans.get_finished_spans())

    return (lambda: "\n".join(span.to_json() for span in live_spans.get_finished_spans()),
            exported, otel(tracer_provider=live, capture_content=True))


def _turns(sinks: Sinks, tmp: Path, run_store: Any) -> None:
    """Three turns of one conversation, a fresh agent per request, as a host would run them."""
    live_spans, exported_spans, observer = _otel_sink()

    @tool(check_in=True)
    def save_key(key: str) -> str:
        """Save an API key in the vault."""
        sinks.tool_saw.append(key)
        raise RuntimeError(f"the vault rejected {key}: quota exceeded")

    @tool
    def check_key(key: str) -> str:
        """Check whether an API key works."""
        sinks.tool_saw.append(key)
        return "the key works"

    def saw(request: Any) -> str:
        return (request.system or "") + " ".join(str(m.get("content")) for m in request.messages)

    def model(turn: int) -> Any:
        calls = {"n": 0}

        def respond(request: Any) -> Any:
            calls["n"] += 1
            if turn == 1 and calls["n"] == 1:
                return {"tool_calls": [{"name": "save_key", "args": {"key": SECRET}}]}
            if turn == 2 and calls["n"] == 1:
                assert SECRET in saw(request), "turn 2 did not recall turn 1"
                return {"tool_calls": [{"name": "check_key", "args": {"key": SECRET}}]}
            return "Done." if turn < 3 else "I keep your key but will not repeat it."
        return respond

    with SQLiteStore(tmp / "memory.db") as memory:
        messages = [f"Please save my API key {SECRET} in the vault.", "Check my key works.",
                    "Which key did I give you?"]
        for turn, message in enumerate(messages, start=1):
            chat = define_memory(id="chat", type="episodic", strategy="window", keep_turns=10,
                                 store=memory)
            agent = Agent(provider=mock(respond=model(turn)), model="mock",
                          tools=[save_key, check_key], memory=[chat],
                          identity=MemoryIdentity("conv-1"),
                          tracing=Tracing(redaction=RedactionPolicy(kinds=POLICY_KINDS,
                                                                    seal_key=SEAL_KEY),
                                          run_store=run_store, watch=[_Everything(sinks)],
                                          observe=observer))
            agent.on("*", lambda event: sinks.add("agent events", json.dumps(
                [event.type, event.payload], default=repr)))
            result = agent.run_sync(message)
            if result.paused:
                checkpoint = result.checkpoint
                assert "sealed" in checkpoint["flow"]
                sinks.add("paused checkpoint", json.dumps(checkpoint))
                sinks.add("pause handed to the host", json.dumps(result.pause))
                sinks.add("recording", Recording.of(result).to_json())
                again = Agent(provider=mock(respond=model(turn)), model="mock",
                              tools=[save_key, check_key], memory=[chat],
                              identity=MemoryIdentity("conv-1"),
                              tracing=Tracing(redaction=RedactionPolicy(kinds=POLICY_KINDS,
                                                                        seal_key=SEAL_KEY),
                                              run_store=run_store, watch=[_Everything(sinks)],
                                              observe=observer))
                again.spec.provider = agent.spec.provider  # the same model, mid-conversation
                result = again.resume_sync(json.loads(json.dumps(checkpoint)),
                                           check_in_approved(by="ops"))
            sinks.results.append(result)
            recording = Recording.of(result)
            sinks.add("recording", recording.to_json())
            sinks.add("audit bundle", audit_export(recording))
            sinks.add("audit bundle, full content", audit_export(recording, full_content=True))
            sinks.add("narrative", result.narrative())
            sinks.add("finished checkpoint", json.dumps(result.checkpoint))
            sinks.add("backtrack", str(backtrack(result)))
            sinks.add("reprs", repr(result) + repr(backtrack(result)))
            sinks.add("notebook html", result._repr_html_() + backtrack(result)._repr_html_())
            sinks.add("report html", render_html_report(recording, backtrack=backtrack(result)))
            sinks.add("otel spans, exported", exported_spans(recording))
    sinks.add("otel spans", live_spans())


def _failing_flow(sinks: Sinks, run_store: Any) -> None:
    """A plain flowchart whose stage raises with the secret in its message (d04's shape).

    Its input key is redacted too: an input is recorded (and announced to recorders at the
    start) as given, before any stage could say it is secret."""

    def load(scope: Any) -> None:
        scope["api_key"] = scope.args["key"]

    def call(scope: Any) -> None:
        raise RuntimeError(f"upstream rejected {scope['api_key']}")

    chart = flow_chart("Load", load).then("Call", call).build()
    with pytest.raises(StageError) as raised:
        chart.run_sync({"key": SECRET}, redaction=RedactionPolicy(keys=["key", "api_key"]),
                       recorders=[_Everything(sinks)])
    run = raised.value.run
    sinks.add("stage error raised to the caller", str(raised.value))
    sinks.add("failed run's error", str(run.error))
    sinks.add("recording", Recording.of(run).to_json())
    sinks.add("audit bundle", audit_export(Recording.of(run), full_content=True))
    sinks.add("narrative", run.narrative())
    run_store.save(run)


def _cli(sinks: Sinks, tmp: Path, store: Path, run_ids: list[str]) -> None:
    """The command line over the run store: list, explain and report every run."""
    exe = Path(sys.executable).with_name("agentfootprint")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "agentfootprint.cli"]
    env = {**os.environ, "NO_COLOR": "1"}

    def run(*args: str) -> None:
        done = subprocess.run([*command, *args], capture_output=True, cwd=tmp, env=env,
                              check=False, timeout=120)
        sinks.add(f"cli {args[0]} output", done.stdout + done.stderr)
        assert done.returncode == 0, (args, done.stderr.decode(errors="replace")[-500:])

    run("runs", "list", "--store", str(store))
    for run_id in run_ids:
        run("explain", run_id, "--store", str(store))
        out = tmp / f"report-{run_id}.html"
        run("report", run_id, "--store", str(store), "-o", str(out))
        sinks.add("cli report file", out.read_bytes())
        run("audit", "export", run_id, "--store", str(store), "--full-content")


@pytest.fixture(scope="module")
def leaks(tmp_path_factory: pytest.TempPathFactory) -> Sinks:
    """The scenario run once, with every sink collected (logs at DEBUG included)."""
    tmp = tmp_path_factory.mktemp("leaks")
    sinks = Sinks()
    handler = _Collect(sinks)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        store_path = tmp / "runs.db"
        with RunStore(store_path) as run_store:
            _turns(sinks, tmp, run_store)
            _failing_flow(sinks, run_store)
            run_ids = [r.run_id for r in run_store.list(limit=50)]
        for path in sorted(tmp.glob("runs.db*")):  # the file, and its WAL if one is left
            sinks.add("run store file", path.read_bytes())
        _cli(sinks, tmp, store_path, run_ids)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    return sinks


class _Collect(logging.Handler):
    def __init__(self, sinks: Sinks) -> None:
        super().__init__(logging.DEBUG)
        self.sinks = sinks
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.sinks.add("logs", self.format(record))


# -- the checks ---------------------------------------------------------------------------------


def test_the_secret_really_went_through_the_run(leaks: Sinks) -> None:
    """Not a vacuous pass: the tools got the secret, turn 2 recalled it, the memory keeps it,
    and every sink was collected and shows the mask where the secret would be."""
    assert leaks.tool_saw == [SECRET, SECRET]
    assert [r.turn for r in leaks.results] == [1, 2, 3]
    expected = {"recording", "run store file", "paused checkpoint",
                "pause handed to the host", "finished checkpoint", "agent events",
                "recorder events", "narrative", "report html", "backtrack", "logs", "reprs",
                "notebook html",
                "stage error raised to the caller", "failed run's error", "cli runs output",
                "cli explain output", "cli report output", "cli report file", "audit bundle",
                "audit bundle, full content", "cli audit output", "otel spans",
                "otel spans, exported"}
    assert expected <= set(leaks.blobs), expected - set(leaks.blobs)
    for name in ("recording", "paused checkpoint", "agent events",
                 "stage error raised to the caller", "narrative", "logs",
                 "audit bundle, full content", "otel spans", "otel spans, exported"):
        assert REDACTED.encode() in leaks.blobs[name], name
    logs = leaks.blobs["logs"]  # the run loggers spoke at DEBUG: start, calls, tools, end
    for needle in (b"agentfootprint.agent INFO Agent run", b"agentfootprint.providers INFO",
                   b"agentfootprint.tools DEBUG", b"tool save_key", b"tool check_key",
                   b"agentfootprint.agent DEBUG"):
        assert needle in logs, needle


def test_no_sink_holds_the_secret(leaks: Sinks) -> None:
    """Recording, run store file, checkpoints, events, logs, CLI output and report: clean."""
    leaked = {sink: found for sink, blob in leaks if (found := leaked_forms(blob))}
    assert not leaked, f"the secret leaked into: {leaked}"


def test_postgres_run_store_rows_hold_no_secret(tmp_path: Path, pg_url: str,
                                                pg_schema: str) -> None:
    """The same three turns with PostgreSQL as the agents' run store (recordings, query
    tables, the run journal): no row of any table holds the secret."""
    import psycopg
    from psycopg import sql

    from agentfootprint.runs import PostgresRunStore

    sinks = Sinks()
    with PostgresRunStore(pg_url, schema=pg_schema) as store:
        _turns(sinks, tmp_path, store)
    assert sinks.tool_saw == [SECRET, SECRET]
    with psycopg.connect(pg_url) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (pg_schema,))]
        assert tables
        dumped = ""
        for table in tables:
            rows = conn.execute(sql.SQL("SELECT * FROM {}").format(
                sql.Identifier(pg_schema, table))).fetchall()
            assert_clean(f"postgres table {table}", repr(rows))
            dumped += repr(rows)
    assert REDACTED in dumped  # the recordings are there, masked


def test_the_redacted_runs_stay_explainable(leaks: Sinks) -> None:
    """backtrack, the report and the CLI all worked above; the answer walks back to a step."""
    answer = str(backtrack(leaks.results[2]))
    assert "ANSWER" in answer or "NOT PROVEN" in answer
    assert REDACTED in leaks.blobs["backtrack"].decode() or "BORN" in answer

