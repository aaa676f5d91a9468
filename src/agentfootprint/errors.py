"""The one exception tree of agentfootprint.

    AgentFootprintError
    ├── ConfigurationError          a user mistake, found before anything ran
    │   ├── ChartBuildError         a flowchart that cannot be built as written
    │   └── SessionStateError       a session not in the state the call needs (paused / not)
    ├── SessionNotFound (KeyError)  no such session for this principal (serve's sessions)
    └── RunError                    something failed while a run was under way
        ├── StageError              a stage raised; the partial run is attached
        ├── LoopLimitError          a back edge was taken more often than allowed
        ├── FlowTimeoutError        the run's time budget ran out
        ├── CheckpointError         a checkpoint that cannot be resumed
        ├── OutputValidationError   the answers never matched output_type within the retries
        ├── SessionBusy             another turn of the session is under way (any process)
        ├── SessionStoreError       a session store failed, or holds a row it cannot read
        └── ProviderError           an LLM provider failed (``status`` kept when there was one)
            ├── ContextWindowExceededError   the request was too long for the model
            ├── ProviderUnavailableError     the server is not there or lacks the model
            ├── MalformedResponseError       the server answered, but not in the API's format
            ├── StreamIncompleteError        a stream ended before its finish signal
            └── CircuitOpenError             a circuit breaker is refusing calls for now

Pausing is not an error: a paused run returns normally with ``paused=True``.
As with Python's own containers, a lookup by id that finds nothing (a run in a store, a suspect
in a report) raises ``KeyError``, and a value of the wrong kind where an object is expected
``TypeError``; their messages name the fix too.
This module imports nothing from the package, so every layer may import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

__all__ = [
    "AgentFootprintError",
    "ChartBuildError",
    "CheckpointError",
    "CircuitOpenError",
    "ConfigurationError",
    "ContextWindowExceededError",
    "FlowTimeoutError",
    "LoopLimitError",
    "MalformedResponseError",
    "McpServerError",
    "OutputValidationError",
    "ProviderError",
    "ProviderUnavailableError",
    "RunError",
    "SessionBusy",
    "SessionNotFound",
    "SessionStateError",
    "SessionStoreError",
    "StageError",
    "StreamIncompleteError",
]


class AgentFootprintError(Exception):
    """Root of every error this package raises on purpose."""


class ConfigurationError(AgentFootprintError):
    """The caller asked for something that cannot work; the message names the fix."""


class ChartBuildError(ConfigurationError):
    """A flowchart builder call that cannot produce a valid chart."""


class RunError(AgentFootprintError):
    """A failure during a run. ``run`` holds what was recorded up to the failure."""

    def __init__(self, message: str, *, run: Any = None) -> None:
        super().__init__(message)
        self.run = run


class StageError(RunError):
    """A stage raised. The original exception is ``__cause__``; its writes were committed."""

    def __init__(
        self, message: str, *, stage_id: str, runtime_stage_id: str, run: Any = None
    ) -> None:
        super().__init__(message, run=run)
        self.stage_id = stage_id
        self.runtime_stage_id = runtime_stage_id


class LoopLimitError(RunError):
    """A loop target was re-entered more than ``max_loop_iterations`` times."""


class FlowTimeoutError(RunError, TimeoutError):
    """The run's ``timeout`` elapsed; the stage under way committed what it had written."""


class CheckpointError(RunError):
    """A checkpoint is malformed, from another version, or does not fit the chart."""


class OutputValidationError(RunError):
    """Every answer the model gave failed validation against the agent's ``output_type``
    (the first answer and each re-ask of the ``output_retries`` budget). ``errors`` are the
    last answer's ``{field, message}`` rows; ``attempts`` how many answers were checked."""

    def __init__(self, message: str, *, errors: list[dict[str, str]], attempts: int,
                 run: Any = None) -> None:
        super().__init__(message, run=run)
        self.errors = errors
        self.attempts = attempts


class SessionNotFound(AgentFootprintError, KeyError):
    """No session with this id exists for this principal: it was never made, was deleted by
    retention, or belongs to someone else (told apart from "not yours" nowhere, on purpose).
    ``session_id`` is the id asked for."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class SessionBusy(RunError):
    """Another turn of this session (a send or a resume) is under way, in this process or
    another sharing the store; try again when it has finished. ``session_id`` names it."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class SessionStateError(ConfigurationError):
    """The session is not in the state the call needs: a send to a paused session (resume it),
    a resume of a session that is not paused (send to it). ``session_id`` names it."""

    def __init__(self, message: str, *, session_id: str, status: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.status = status


class SessionStoreError(RunError):
    """A session store failed (its driver's error is ``__cause__``) or holds a session it cannot
    read; never answered with a fresh session in its place. ``store`` names the store."""

    def __init__(self, message: str, *, store: str) -> None:
        super().__init__(message)
        self.store = store


class McpServerError(RunError):
    """An MCP server (``agentfootprint.tools.mcp_server``) could not be started or reached, or
    a call to it failed: the tool reported an error, the server refused the call, died or
    stopped answering, or its session was closed. The message names the server and the tool.
    Raised inside a tool call, it becomes that call's error result, which the model reads."""


class ProviderError(RunError):
    """An LLM call failed. ``status`` is the HTTP status when the server answered;
    ``retry_after`` the seconds the server asked to wait before trying again, when it said."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retry_after = retry_after
        self.retryable = (
            retryable
            if retryable is not None
            else status is None or status == 429 or status >= 500
        )


class ContextWindowExceededError(ProviderError):
    """The prompt does not fit the model's context window; retrying cannot help."""

    def __init__(self, message: str, *, provider: str, status: int | None = None) -> None:
        super().__init__(message, provider=provider, status=status, retryable=False)


class ProviderUnavailableError(ProviderError):
    """The provider's server cannot be reached, or does not have the model asked for."""


class MalformedResponseError(ProviderError):
    """The server answered (``status`` kept, usually 200) with a body that is not the API's
    JSON; ``body_excerpt`` is the start of what it sent. Retryable: a proxy or an overloaded
    server sends these, and the next answer is usually whole."""

    def __init__(self, message: str, *, provider: str, status: int | None,
                 body_excerpt: str) -> None:
        super().__init__(message, provider=provider, status=status, retryable=True)
        self.body_excerpt = body_excerpt


class StreamIncompleteError(ProviderError):
    """A streamed answer ended (closed, reset or unreadable) before the provider's finish
    signal. ``partial`` is the text received until then, kept as evidence, never as the answer.
    Retryable unless said otherwise: ``with_retry`` asks again from the start."""

    def __init__(self, message: str, *, provider: str, partial: str,
                 status: int | None = None, retryable: bool = True) -> None:
        super().__init__(message, provider=provider, status=status, retryable=retryable)
        self.partial = partial


class CircuitOpenError(ProviderError):
    """The circuit breaker is open after repeated failures; calls are refused until it cools."""

    def __init__(self, message: str, *, provider: str) -> None:
        super().__init__(message, provider=provider, retryable=False)


_T = TypeVar("_T")


def listed(value: Iterable[_T], *, argument: str, example: str) -> tuple[_T, ...]:
    """``value`` as a tuple, refusing what would iterate into nonsense.

    A string is iterable, so ``tools="refund"`` would otherwise arrive as ``'r', 'e', ...``, and
    a single item (``tools=my_tool``) would fail deep inside with a bare ``TypeError``, and a
    dict would give its keys.
    """
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ConfigurationError(
            f"{argument}={shown} must be a list, e.g. {argument}=[{example}]")
    return tuple(value)
