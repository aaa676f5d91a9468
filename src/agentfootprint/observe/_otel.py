"""OpenTelemetry export, live (``Tracing(observe=otel())``) and of a stored recording.

``otel()`` is an observer an agent is given in its tracing options; each run gets its own
recorder (``OtelRecorder``) that opens the run's root span when the run starts, writes each
step's spans as the step commits (with the times it ran) and closes the root when the run ends,
fails or pauses. ``export_otel(recording)`` writes the same spans from a stored run, its LLM
calls laid end to end with their recorded latencies from the recording's time.

The ``opentelemetry`` packages are the ``[otel]`` extra and are imported only here, when an
observer or an export is made. Spans go to ``tracer_provider`` when given, else to the
process's global tracer provider (``opentelemetry.trace.set_tracer_provider``); an export with
``endpoint=`` sends them over OTLP/HTTP itself.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ConfigurationError
from ..flow import FlowEvent
from ..flow._commitlog import CommitRecord
from ._spans import SCHEMA_URL, SpanWriter, StepTimes, laid_out

__all__ = ["OtelObserver", "OtelRecorder", "export_otel", "otel"]

_INSTALL = 'pip install "agentfootprint[otel]"'


def _require() -> None:
    try:
        import opentelemetry.sdk
        import opentelemetry.trace  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"OpenTelemetry export needs the opentelemetry packages; {_INSTALL}") from exc


def _tracer(provider: Any) -> Any:
    from opentelemetry import trace as otel_trace

    from .. import __version__

    get = provider.get_tracer if provider is not None else otel_trace.get_tracer
    return get("agentfootprint", __version__, schema_url=SCHEMA_URL)


class OtelObserver:
    """Live OpenTelemetry spans for every run of an agent: ``Tracing(observe=otel())``."""

    def __init__(self, *, tracer_provider: Any = None, capture_content: bool = False) -> None:
        _require()
        if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer",
                                                                None)):
            raise ConfigurationError(
                f"otel(tracer_provider={tracer_provider!r}) is not a tracer provider; pass an "
                "opentelemetry.sdk.trace.TracerProvider (or None for the global one)")
        self.tracer_provider = tracer_provider
        self.capture_content = bool(capture_content)
        self._tracer: Any = None

    def __repr__(self) -> str:
        return f"otel(capture_content={self.capture_content})"

    def recorder(self, name: str) -> OtelRecorder:
        """A recorder for one run of ``name`` (the agent's or composition's name)."""
        if self._tracer is None:  # once: a global provider set later is still used (a proxy)
            self._tracer = _tracer(self.tracer_provider)
        return OtelRecorder(self._tracer, name=name, capture_content=self.capture_content)


def otel(*, tracer_provider: Any = None, capture_content: bool = False) -> OtelObserver:
    """Send every run's spans to OpenTelemetry as it happens (GenAI semantic conventions).

    ``tracer_provider``: where spans go (None: the global provider). ``capture_content``: also
    record messages, tool arguments and results (off by default, as the conventions advise;
    when on, values the run's redaction policy masks stay masked).
    """
    return OtelObserver(tracer_provider=tracer_provider, capture_content=capture_content)


class OtelRecorder:
    """A flow recorder writing one run's spans as the run commits its steps."""

    id = "agentfootprint-otel"

    def __init__(self, tracer: Any, *, name: str, capture_content: bool) -> None:
        self.tracer = tracer
        self.name = name
        self.capture_content = capture_content
        self.writer: SpanWriter | None = None
        self._starts: dict[str, int] = {}
        self._emits: dict[str, list[int]] = {}

    def on_run_start(self, event: FlowEvent) -> None:
        self.writer = SpanWriter(self.tracer, run_id=event.run_id, name=self.name,
                                 capture_content=self.capture_content)
        self.writer.begin(time.time_ns())
        if event.data and event.data.get("resumed"):
            self.writer.root.set_attribute("agentfootprint.resumed", True)

    def on_stage_start(self, event: FlowEvent) -> None:
        self._starts[event.runtime_stage_id] = time.time_ns()

    def on_emit(self, event: FlowEvent) -> None:
        self._emits.setdefault(event.runtime_stage_id, []).append(time.time_ns())

    def on_commit(self, event: FlowEvent) -> None:
        record = event.value
        if self.writer is None or not isinstance(record, CommitRecord):
            return
        now = time.time_ns()
        rid = record.runtime_stage_id
        self.writer.step(record, StepTimes(self._starts.pop(rid, now), now,
                                           self._emits.pop(rid, ())))

    def on_run_end(self, event: FlowEvent) -> None:
        self._end("done")

    def on_pause(self, event: FlowEvent) -> None:
        self._end("paused")

    def on_run_failed(self, event: FlowEvent) -> None:
        error = (event.data or {}).get("error")
        self._end("failed", str(error) if error is not None else "RunError")

    def _end(self, status: str, error: str | None = None) -> None:
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.end(time.time_ns(), status=status, error=error)


def export_otel(recording: Any, *, tracer_provider: Any = None, endpoint: str | None = None,
                capture_content: bool = False) -> int:
    """Write a recorded run's spans (the same tree ``otel()`` writes live); the span count.

    ``recording`` is a ``Recording``, a ``RunResult`` or a ``FlowRun``. Spans go to
    ``tracer_provider``, or with ``endpoint`` (an OTLP/HTTP traces URL such as
    ``http://127.0.0.1:6006/v1/traces``) straight there, flushed before this returns, or else
    to the global provider.
    """
    _require()
    from ..runs._recording import Recording

    if not isinstance(recording, Recording):
        try:
            recording = Recording.of(recording)
        except TypeError as exc:
            raise ConfigurationError(
                f"export_otel() takes a Recording, RunResult or FlowRun, not {recording!r}"
            ) from exc
    own: tuple[Any, list[bool]] | None = None
    if endpoint is not None:
        if tracer_provider is not None:
            raise ConfigurationError(
                "export_otel() got both endpoint= and tracer_provider=; give one")
        own = _otlp_provider(endpoint)
        tracer_provider = own[0]
    counter = _Counting(_tracer(tracer_provider))
    writer = SpanWriter(counter, run_id=recording.run_id, name=recording.name,
                        capture_content=capture_content)
    start = int(recording.created_at * 1_000_000_000)
    writer.begin(start)
    at = start
    records = recording.commit_log().records
    for record, times in laid_out(records, start):
        writer.step(record, times)
        at = times.end
    error = None
    if recording.status == "failed":
        error = next((r.error for r in reversed(records) if r.error), "RunError")
    writer.end(at, status=recording.status, error=error)
    if own is not None:
        provider, sent = own
        flushed = provider.force_flush()
        provider.shutdown()
        if not flushed or not all(sent):
            raise ConfigurationError(
                f"the spans of run {recording.run_id!r} could not be sent to {endpoint!r} in "
                "time; check that an OTLP/HTTP collector listens there")
    return counter.count


def _otlp_provider(endpoint: str) -> tuple[Any, list[bool]]:
    """A tracer provider sending to ``endpoint`` over OTLP/HTTP, and the list each batch's
    outcome is appended to (True: the collector took it)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

    sent: list[bool] = []
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10)
    export = exporter.export

    def noting(spans: Any) -> Any:
        result = export(spans)
        sent.append(result == SpanExportResult.SUCCESS)
        return result

    exporter.export = noting  # type: ignore[method-assign]
    provider = TracerProvider(resource=Resource.create({"service.name": "agentfootprint"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider, sent


class _Counting:
    """A tracer that counts the spans it starts."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.count = 0

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.tracer.start_span(*args, **kwargs)
