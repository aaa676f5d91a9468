"""Standard-library ``logging`` of agent runs: one recorder on the run's event path.

Loggers and levels:

* ``agentfootprint.agent``: a run's start, message, end, pause and failure (INFO); every
  other event of the catalogue (DEBUG, name and payload).
* ``agentfootprint.providers``: each LLM call's outcome, retries and recoveries (INFO), a
  fallback or a circuit changing state (WARNING), the call's shape and answer text (DEBUG).
* ``agentfootprint.tools``: each tool call's outcome (INFO), its arguments and result (DEBUG).

Everything logged comes from the events and run-level values the run has already recorded, so
it is masked exactly as the recording is (the run's ``RedactionPolicy`` and ``RunSecrets``):
this module never sees a raw value. A run gets the recorder only when one of these loggers is
enabled for INFO, so with logging off a run pays a few ``isEnabledFor`` checks and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..flow import FlowEvent
from ..flow._display import clip
from ._dispatcher import PREFIX

__all__ = ["RunLogger", "run_loggers"]

AGENT = logging.getLogger("agentfootprint.agent")
PROVIDERS = logging.getLogger("agentfootprint.providers")
TOOLS = logging.getLogger("agentfootprint.tools")
_LOGGERS = (AGENT, PROVIDERS, TOOLS)
_CLIP = 200
_PAYLOAD_CLIP = 500


def run_loggers(name: str) -> list[RunLogger]:
    """``[RunLogger(name)]`` when any ``agentfootprint`` run logger would log INFO, else ``[]``."""
    for logger in _LOGGERS:
        if logger.isEnabledFor(logging.INFO):
            return [RunLogger(name)]
    return []


def _clip(text: object, limit: int = _CLIP) -> str:
    import json  # loaded on first use: a plain run never writes JSON

    shown = text if isinstance(text, str) else json.dumps(text, default=repr,
                                                          ensure_ascii=False)
    return clip(shown, limit)


class RunLogger:
    """A flow recorder that writes one run's events to the ``agentfootprint.*`` loggers.

    Made per run (it remembers the current LLM call's provider and model, and the turn's
    totals, to say them once at the end).
    """

    id = "agentfootprint-logging"

    def __init__(self, name: str) -> None:
        self.name = name
        self.call: Mapping[str, Any] = {}
        self.totals: Mapping[str, Any] = {}

    # -- the run as a whole ---------------------------------------------------------------

    def on_run_start(self, event: FlowEvent) -> None:
        if AGENT.isEnabledFor(logging.INFO):
            resumed = bool(event.data and event.data.get("resumed"))
            AGENT.info("%s run %s %s", self.name, event.run_id,
                       "resumed" if resumed else "started")

    def on_run_end(self, event: FlowEvent) -> None:
        if AGENT.isEnabledFor(logging.INFO):
            totals = self.totals
            AGENT.info("%s run %s ended after %s iteration(s), %s input / %s output tokens%s",
                       self.name, event.run_id, totals.get("iterations", "?"),
                       totals.get("input_tokens", "?"), totals.get("output_tokens", "?"),
                       f" (stopped early: {totals['stopped_early']})"
                       if totals.get("stopped_early") else "")
        if AGENT.isEnabledFor(logging.DEBUG):
            AGENT.debug("%s run %s answer: %r", self.name, event.run_id,
                        _clip(self.totals.get("content", event.value)))

    def on_pause(self, event: FlowEvent) -> None:
        if AGENT.isEnabledFor(logging.INFO):
            AGENT.info("%s run %s paused at %s", self.name, event.run_id, event.runtime_stage_id)

    def on_run_failed(self, event: FlowEvent) -> None:
        if AGENT.isEnabledFor(logging.INFO):
            error = (event.data or {}).get("error", "")
            AGENT.info("%s run %s failed: %s", self.name, event.run_id, _clip(error))

    # -- what happened inside it ----------------------------------------------------------

    def on_emit(self, event: FlowEvent) -> None:
        name = event.key or ""
        if not name.startswith(PREFIX):
            return
        short = name[len(PREFIX):]
        payload = event.value if isinstance(event.value, Mapping) else {}
        handler = _HANDLERS.get(short)
        if handler is not None:
            handler(self, event.run_id, payload)
        elif AGENT.isEnabledFor(logging.DEBUG):
            AGENT.debug("%s run %s %s %s", self.name, event.run_id, short,
                        _clip(dict(payload), _PAYLOAD_CLIP))

    def _turn_start(self, run_id: str, payload: Mapping[str, Any]) -> None:
        if AGENT.isEnabledFor(logging.INFO):
            AGENT.info("%s run %s turn %s: %r", self.name, run_id, payload.get("turn"),
                       _clip(payload.get("user_message", "")))

    def _turn_end(self, run_id: str, payload: Mapping[str, Any]) -> None:
        self.totals = payload

    def _llm_start(self, run_id: str, payload: Mapping[str, Any]) -> None:
        self.call = payload
        if PROVIDERS.isEnabledFor(logging.DEBUG):
            PROVIDERS.debug(
                "run %s LLM call %s to %s (model %s): %s messages, %s tools, system prompt "
                "%s chars", run_id, payload.get("iteration"), payload.get("provider"),
                payload.get("model"), payload.get("messages_count"),
                payload.get("tools_count"), payload.get("system_prompt_chars"))

    def _llm_end(self, run_id: str, payload: Mapping[str, Any]) -> None:
        if PROVIDERS.isEnabledFor(logging.INFO):
            usage = payload.get("usage") or {}
            PROVIDERS.info(
                "run %s LLM call %s to %s (model %s) answered: stop %s, %s tool call(s), "
                "%s input / %s output tokens", run_id, payload.get("iteration"),
                self.call.get("provider"), self.call.get("model"), payload.get("stop_reason"),
                payload.get("tool_call_count"), usage.get("input"), usage.get("output"))
        if PROVIDERS.isEnabledFor(logging.DEBUG):
            PROVIDERS.debug("run %s LLM call %s text: %r", run_id, payload.get("iteration"),
                            _clip(payload.get("content", "")))

    def _retried(self, run_id: str, payload: Mapping[str, Any]) -> None:
        if PROVIDERS.isEnabledFor(logging.INFO):
            PROVIDERS.info(
                "run %s provider %s failed (status %s: %s); attempt %s of %s in %.2fs",
                run_id, payload.get("provider"), payload.get("status"),
                _clip(payload.get("error", "")), payload.get("attempt"),
                payload.get("max_attempts"), float(payload.get("backoff") or 0.0))

    def _recovered(self, run_id: str, payload: Mapping[str, Any]) -> None:
        if PROVIDERS.isEnabledFor(logging.INFO):
            PROVIDERS.info("run %s provider %s answered on attempt %s", run_id,
                           payload.get("provider"), payload.get("attempt"))

    def _fell_back(self, run_id: str, payload: Mapping[str, Any]) -> None:
        PROVIDERS.warning("run %s provider %s failed (%s); falling back to %s", run_id,
                          payload.get("primary"), _clip(payload.get("error", "")),
                          payload.get("fallback"))

    def _circuit(self, run_id: str, payload: Mapping[str, Any]) -> None:
        PROVIDERS.warning("run %s circuit for provider %s is now %s (%s)", run_id,
                          payload.get("provider"), payload.get("state"), payload.get("reason"))

    def _tool_start(self, run_id: str, payload: Mapping[str, Any]) -> None:
        if TOOLS.isEnabledFor(logging.DEBUG):
            TOOLS.debug("run %s tool %s (%s) called with %s", run_id, payload.get("tool_name"),
                        payload.get("tool_call_id"), _clip(payload.get("args", {})))

    def _tool_end(self, run_id: str, payload: Mapping[str, Any]) -> None:
        if TOOLS.isEnabledFor(logging.INFO):
            TOOLS.info("run %s tool %s (%s) %s%s", run_id, payload.get("tool_name"),
                       payload.get("tool_call_id"), payload.get("status"),
                       " with an error" if payload.get("error") else "")
        if TOOLS.isEnabledFor(logging.DEBUG):
            TOOLS.debug("run %s tool %s (%s) result: %r", run_id, payload.get("tool_name"),
                        payload.get("tool_call_id"), _clip(payload.get("result", "")))


_HANDLERS = {
    "agent.turn_start": RunLogger._turn_start,
    "agent.turn_end": RunLogger._turn_end,
    "stream.llm_start": RunLogger._llm_start,
    "stream.llm_end": RunLogger._llm_end,
    "stream.tool_start": RunLogger._tool_start,
    "stream.tool_end": RunLogger._tool_end,
    "error.retried": RunLogger._retried,
    "error.recovered": RunLogger._recovered,
    "fallback.triggered": RunLogger._fell_back,
    "error.circuit_changed": RunLogger._circuit,
}
