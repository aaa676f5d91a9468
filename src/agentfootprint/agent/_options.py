"""What an agent is told beyond its prompt and tools, in four small option objects.

``Agent`` had grown to 22 keywords. The ones that belong together now travel together, so the
simple call stays short (``Agent(provider=..., system=..., tools=[...])``) and the rest reads
as what it is:

* ``limits=Limits(max_iterations=10, max_tool_result_chars=None, wrap_up=True)`` — how far one
  turn may go;
* ``settings=ModelSettings(temperature=None, max_tokens=None)`` — sampling asked of the model;
* ``governance=Governance(act=[...], permissions=...)`` — the rules and the checker that judge
  the run;
* ``tracing=Tracing(redaction=..., run_store=..., watch=[...], observer_delivery="inline",
  observe=otel())`` — what the run leaves behind and who watches it.

The old flat keywords still work for one release: each one warns (``DeprecationWarning``) with
the grouped spelling. Giving a group both ways is refused, never merged silently.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from .._record import Value, assign, record_class
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ..flow._recorders import Recorder
    from ..flow._redact import RedactionPolicy
    from ..runs._store import RunStorePort
    from ._moments import ActRule
    from ._permissions import PermissionChecker

__all__ = ["Governance", "Limits", "ModelSettings", "Tracing", "grouped_options"]


# The four are frozen dataclasses whose methods are written once (``_record.py``): generating
# them per class cost a cold start ~1 ms each.


@record_class(kw_only=True)
class Limits(Value):
    """How far one turn may go."""

    max_iterations: int = 10
    """Model calls a turn may make; the budget's last call is asked to answer (``wrap_up``)."""
    max_tool_result_chars: int | None = None
    """Longer tool results are cut (with a note) before the model reads them."""
    wrap_up: bool = True
    """When the budget runs out with tools pending, ask once more for an answer without tools."""

    def __init__(self, *, max_iterations: int = 10, max_tool_result_chars: int | None = None,
                 wrap_up: bool = True) -> None:
        if type(max_iterations) is not int or max_iterations < 1:
            raise ConfigurationError(f"max_iterations={max_iterations!r} must be an int >= 1")
        assign(self, max_iterations=max_iterations, max_tool_result_chars=max_tool_result_chars,
               wrap_up=wrap_up)


@record_class(kw_only=True)
class ModelSettings(Value):
    """Sampling asked of the model on every call (None: the provider's default)."""

    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    """A reproducible draw where the server takes a seed (an explanation seeds each re-run)."""

    def __init__(self, *, temperature: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None) -> None:
        assign(self, temperature=temperature, max_tokens=max_tokens, seed=seed)


@record_class(kw_only=True)
class Governance(Value):
    """The ``act(...)`` rules of the five moments, and a permission checker for tool calls."""

    act: Sequence[ActRule] = ()
    permissions: PermissionChecker | None = None

    def __init__(self, *, act: Sequence[ActRule] = (),
                 permissions: PermissionChecker | None = None) -> None:
        assign(self, act=act, permissions=permissions)


@record_class(kw_only=True)
class Tracing(Value):
    """What a run leaves behind and who watches it while it happens."""

    redaction: RedactionPolicy | None = None
    """Kinds of content (or keys) never recorded in the clear."""
    run_store: RunStorePort | None = None
    """Every run is saved here as it ends (a failed one too), for the CLI and explain."""
    watch: Sequence[Recorder] = field(default=())
    """Recorders that see every event of the run as it happens."""
    observer_delivery: Literal["inline", "deferred"] = "inline"
    """``deferred``: listeners get events after each step instead of inside it."""
    observe: Observer | None = None
    """Sends every run out as it happens, e.g. as OpenTelemetry spans:
    ``observe=otel()`` (``agentfootprint.observe``)."""

    def __init__(self, *, redaction: RedactionPolicy | None = None,
                 run_store: RunStorePort | None = None, watch: Sequence[Recorder] = (),
                 observer_delivery: Literal["inline", "deferred"] = "inline",
                 observe: Observer | None = None) -> None:
        assign(self, redaction=redaction, run_store=run_store, watch=watch,
               observer_delivery=observer_delivery, observe=observe)


class Observer(Protocol):
    """What ``Tracing(observe=...)`` takes: it gives each run a recorder of its own."""

    def recorder(self, name: str) -> Recorder:
        """A recorder for one run of the agent (or composition) called ``name``."""
        ...


_MOVED: Final[Mapping[str, str]] = {
    "max_iterations": "limits", "max_tool_result_chars": "limits", "wrap_up": "limits",
    "temperature": "settings", "max_tokens": "settings",
    "act": "governance", "permissions": "governance",
    "redaction": "tracing", "run_store": "tracing", "watch": "tracing",
    "observer_delivery": "tracing",
}
_CLASSES: Final[Mapping[str, type[Any]]] = {
    "limits": Limits, "settings": ModelSettings, "governance": Governance, "tracing": Tracing}


def grouped_options(owner: str, groups: Mapping[str, Any], moved: Mapping[str, Any], *,
                    allowed: Iterable[str] = ()) -> dict[str, Any]:
    """The option object of each group, the old flat keywords folded in (with a warning).

    ``groups`` maps a group keyword (``limits``) to what the caller gave (or None); ``moved``
    holds the old flat keywords the caller used. ``allowed`` names the groups ``owner``
    takes (an ``LLMCall`` has no limits or governance).
    """
    taken = set(allowed) or set(_CLASSES)
    out = {name: value if value is not None else _CLASSES[name]()
           for name, value in groups.items()}
    for name, value in groups.items():
        if value is not None and not isinstance(value, _CLASSES[name]):
            raise ConfigurationError(
                f"{owner}({name}={value!r}) takes a {_CLASSES[name].__name__}(...)")
    for keyword, value in moved.items():
        group = _MOVED.get(keyword)
        if group is None or group not in taken:
            raise TypeError(f"{owner}() got an unexpected keyword argument {keyword!r}")
        spelled = f"{_CLASSES[group].__name__}({keyword}=...)"
        if groups.get(group) is not None:
            raise ConfigurationError(
                f"{owner}({keyword}=...) and {group}= were both given; put {keyword} in "
                f"{group}={spelled} and drop the flat keyword")
        warnings.warn(f"{owner}({keyword}=...) moved: pass {group}={spelled} "
                      f"(from agentfootprint); the flat keyword goes away in the next release",
                      DeprecationWarning, stacklevel=3)
        out[group] = replace(out[group], **{keyword: value})
    return out
