"""OpenTelemetry export: a run as GenAI spans, for Phoenix, Langfuse, Datadog or any collector.

* ``otel(tracer_provider=None, capture_content=False)`` — live spans for every run of an agent:
  ``Agent(..., tracing=Tracing(observe=otel()))``;
* ``export_otel(recording, endpoint=...)`` — the same spans from a stored run
  (``agentfootprint export otel RUN_ID`` on the command line).

Spans follow the OpenTelemetry GenAI semantic conventions 1.44.0 (``invoke_agent``, ``chat``,
``execute_tool``, ``retrieval``; see ``observe/_spans.py``), carry ``agentfootprint.run_id`` on
the root, and hold no message or tool content unless ``capture_content=True`` (and then only as
the run recorded it: redacted values stay masked). Needs ``pip install "agentfootprint[otel]"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ._otel import OtelObserver, export_otel, otel

__all__ = ["OtelObserver", "export_otel", "otel"]

_LAZY = {"OtelObserver": "_otel", "export_otel": "_otel", "otel": "_otel"}

_lazy, __dir__ = _lazy_names(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    """A public name, imported on first use."""
    return _lazy(name)
