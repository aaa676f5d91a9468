"""``RunResult``: the outcome of one turn, what ``agent.run`` returns.

It carries the answer, the token counts and the run's complete recording; what is derived
from the recording (the conversation ``history``, ``usage``, the ``checkpoint``) is computed
when read, so a run nobody inspects pays for none of it.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, Generic, Literal

from .._record import assign, record_class
from ..flow import FlowRun
from ..flow._values import copy_value
from ..providers._base import Message
from ..runs import trace
from ..tools._script_keys import LEDGER_KEY
from ._display import result_html, result_repr
from ._output import OutputT

if TYPE_CHECKING:
    from ..runs._usage import RunUsage
    from ._checkin import CheckInRequest

__all__ = ["HISTORY_FROM_RECORDING", "RunResult"]


HISTORY_FROM_RECORDING: Any = object()  # ``RunResult(history=...)``: read it from the recording


@record_class  # methods written here (_record.py)
class RunResult(Generic[OutputT]):
    """The outcome of one turn."""

    content: str
    """The final answer (may be empty when the budget ran out; see ``stopped_early``)."""
    run_id: str
    turn: int
    recording: FlowRun = field(repr=False)
    """The run's complete record: chart, commit log, state."""
    input_tokens: int = 0
    output_tokens: int = 0
    iterations: int = 0
    stopped_early: str | None = None
    history: list[Message] = field(default_factory=list)
    """The conversation as the loop left it (without the final answer)."""
    status: Literal["done", "paused"] = "done"
    """``paused``: a tool asked a person (``pause`` says what); ``agent.resume`` continues."""
    pause: dict[str, Any] | None = None
    """For a paused run: ``{kind, tool_name, tool_call_id, iteration, data}``."""
    output: OutputT = None  # type: ignore[assignment]
    """The answer as the agent's ``output_type`` (validated); None without one (``content``
    then is the text; with one it is the JSON text). See ``agent/_output.py``."""
    source: Any = field(default=None, repr=False, compare=False)
    """The agent or composition that produced this run (what an explanation re-runs)."""

    def __init__(self, content: str, run_id: str, turn: int, recording: FlowRun,
                 input_tokens: int = 0, output_tokens: int = 0, iterations: int = 0,
                 stopped_early: str | None = None, history: list[Message] | None = None,
                 status: Literal["done", "paused"] = "done",
                 pause: dict[str, Any] | None = None, output: OutputT = None,  # type: ignore[assignment]
                 source: Any = None) -> None:
        assign(self, content=content, run_id=run_id, turn=turn, recording=recording,
               input_tokens=input_tokens, output_tokens=output_tokens, iterations=iterations,
               stopped_early=stopped_early, status=status, pause=pause, output=output,
               source=source)
        if history is not HISTORY_FROM_RECORDING:
            self.history = [] if history is None else history

    if not TYPE_CHECKING:  # (a ``__getattr__`` mypy saw would accept any attribute name)
        def __getattr__(self, name: str) -> Any:
            # ``history`` left unset is copied from the recording on first read: a run that
            # never reads it does not copy its whole conversation
            if name == "history":
                history = self.history = copy_value(self.recording.final(trace.HISTORY, []))
                return history
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def paused(self) -> bool:
        return self.status == "paused"

    def __repr__(self) -> str:  # fixed size, however long the run (see agent/_display.py)
        return result_repr(self)

    def _repr_html_(self) -> str:
        return result_html(self)

    @property
    def usage(self) -> RunUsage:
        """Per LLM call: model, provider, latency, input/output/cached tokens, cost; the sum."""
        from ..runs._usage import usage_of  # on first read: a plain run never loads it

        return usage_of(self.recording.log)

    @property
    def check_in(self) -> CheckInRequest | None:
        """When the run paused for consent: the tool, its arguments and the evidence pack."""
        if self.pause is None or self.pause.get("kind") != "check_in":
            return None
        from ._checkin import CheckInRequest  # only a consent pause builds one

        pack = self.pause.get("data") or {}
        will = pack.get("will_do") or {}
        return CheckInRequest(tool=str(will.get("tool", self.pause.get("tool_name", ""))),
                              args=dict(will.get("args") or {}), evidence=dict(pack))

    def narrative(self) -> str:
        """The turn in plain English, stage by stage."""
        return self.recording.narrative()

    @property
    def checkpoint(self) -> dict[str, Any]:
        """The conversation after this turn, final answer included, as plain JSON.

        Under a redaction policy it holds the conversation as recorded (the redacted kinds
        masked, a history redacted whole left out): keep a conversation in a memory store to
        continue it in full.

        For a paused run: the engine checkpoint ``agent.resume(checkpoint, answer)`` continues
        from, in this process or another one. Its log and pause data are recorded (masked);
        its resume state (``flow.state``, ``flow.args``, ``flow.frames``) holds the run's real
        values, the paused call's arguments included, because approving the call runs it with
        them. With ``RedactionPolicy(seal_key=KEY)`` that resume state is one Fernet token
        (``flow.sealed``) only an agent holding KEY can open; without a key it is plain JSON:
        keep such a checkpoint as you would keep the secrets in it.
        """
        if self.paused:
            flow = self.recording.checkpoint
            assert flow is not None
            shown = flow.model_dump(mode="json")
            policy = self.recording.redaction
            if policy is not None and policy.seal_key is not None:
                from ..flow._seal import seal_resume_state

                shown = seal_resume_state(shown, policy.seal_key)
            return {"version": 1, "status": "paused", "run_id": self.run_id, "turn": self.turn,
                    "pause": copy_value(self.pause), "flow": shown}
        history: list[Any] = [dict(m) for m in self.history]
        history.append({"role": "assistant", "content": self.content})
        ledger = self.recording.state.get(LEDGER_KEY)
        policy = self.recording.redaction
        if policy is not None:  # a checkpoint leaves the process: it is a record too
            if policy.is_redacted(trace.HISTORY):
                shown = policy.redact_value(trace.HISTORY, history)
                history = shown if isinstance(shown, list) else []
            if ledger and policy.is_redacted(LEDGER_KEY):
                ledger = None
        saved: dict[str, Any] = {"version": 1, "run_id": self.run_id, "turn": self.turn,
                                 "history": history}
        if ledger:
            saved[LEDGER_KEY] = copy_value(ledger)
        secrets = self.recording.secrets  # no kept text repeats what the run masked
        return secrets.scrub(saved) if secrets is not None else saved
