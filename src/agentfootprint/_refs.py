"""References by name: ``"module:attr"`` strings another process (or the CLI) resolves again.

A job that crosses a process boundary names what does the work instead of carrying it: an
agent factory (``"myapp:make_agent"``), an agent defined at module level (``"myapp:agent"``),
a predicate (``"myapp.checks:wrong"``). Every layer that hands work on — ``distributed``,
``serve``, ``explain`` — resolves such names, so the two directions live here, at the root:

* :func:`callable_path` — a function as the name :func:`load_callable` finds again;
* :func:`load_callable` — the name imported; a built agent found there is loaded as a
  function returning a fresh copy of it, so a module-level agent serves wherever a factory
  does (each run gets its own);
* :func:`load_ref` — the object itself, whatever it is;
* :func:`defined_in` / :func:`name_in` — the module that built an object, and the top-level
  name it has there (how a built agent is found by reference);
* :func:`live_ref` — a name for an object only this process can resolve (an in-process
  executor's jobs), kept weakly.

It imports nothing from the package but the errors.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import weakref
from typing import Any, Final

from .errors import ConfigurationError

__all__ = ["LIVE_PREFIX", "callable_path", "defined_in", "live_ref", "load_callable",
           "load_ref", "name_in"]

LIVE_PREFIX: Final = "live_"
"""Attribute names of this module that :func:`live_ref` hands out (this process only)."""

_live: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_counter = itertools.count(1)


def load_ref(path: str) -> Any:
    """Import ``"module:attr"`` (``attr`` may be dotted) and return what is there; a clear
    error names what could not be found."""
    module_name, sep, attr = path.partition(":") if isinstance(path, str) else ("", "", "")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"{path!r} must be 'module:function' (e.g. 'myapp.checks:wrong')")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r} for {path!r}: {exc}; run from "
                                 "the directory that holds it or install it") from None
    found: Any = module
    for part in attr.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise ConfigurationError(f"{module_name!r} has no {attr!r} (from {path!r})")
    return found


def _built_agent(found: object) -> bool:
    return hasattr(found, "_init_kwargs") and callable(getattr(found, "_replace", None))


def load_callable(path: str) -> Any:
    """Import ``"module:function"``; a clear error names what could not be found.

    A built agent at that name (``agent = Agent(...)`` at module level) is loaded as a
    function returning a fresh copy of it, built from the same arguments.
    """
    found = load_ref(path)
    if _built_agent(found):
        return found._replace
    if not callable(found):
        raise ConfigurationError(f"{path!r} is not callable")
    return found


def callable_path(fn: object, *, what: str = "factory") -> str:
    """``fn`` as ``"module:function"`` that ``load_callable`` finds again (a string is taken as
    it is). ``__main__`` is kept: it loads in this process, never in another one. A built
    agent is named by its top-level name in the module that built it (``"myapp:agent"``)."""
    if isinstance(fn, str):
        return fn
    if _built_agent(fn):
        module = getattr(fn, "_defined_in", None)
        name = name_in(module, fn) if isinstance(module, str) else None
        if name is None:
            raise ConfigurationError(
                f"{what}={fn!r} is an agent without a top-level name in an importable module; "
                "assign it at module level (agent = Agent(...)) or pass a factory "
                "'module:make_agent'")
        return f"{module}:{name}"
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if callable(fn) and module and name and "<" not in name:
        return f"{module}:{name}"
    raise ConfigurationError(
        f"{what}={fn!r} must be importable by name: a 'module:function' string, or a "
        "function defined at the top level of a module (not a lambda or a nested function)")


def defined_in(*, skip: tuple[str, ...] = ("agentfootprint.", "typing")) -> str | None:
    """The module of the nearest caller outside this package (and ``typing``, whose generic
    aliases call constructors): the module that is building the object being constructed."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if isinstance(name, str) and not (name == "typing" or name.startswith(skip)):
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return None


def name_in(module: str, obj: object) -> str | None:
    """The top-level name ``obj`` has in the already-imported ``module`` (a public one
    preferred), or ``None``."""
    found = sys.modules.get(module)
    if found is None:
        return None
    names = [name for name, value in list(vars(found).items()) if value is obj]
    names.sort(key=lambda name: name.startswith("_"))
    return names[0] if names else None


def live_ref(obj: object) -> str:
    """A ``"module:attr"`` name for ``obj`` that only this process resolves (while ``obj``
    lives): what an in-process executor's job names when ``obj`` has no importable name."""
    for name, value in list(_live.items()):
        if value is obj:
            return f"{__name__}:{name}"
    name = f"{LIVE_PREFIX}{next(_counter)}"
    _live[name] = obj
    return f"{__name__}:{name}"


def __getattr__(name: str) -> Any:
    if name.startswith(LIVE_PREFIX):
        found = _live.get(name)
        if found is not None:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
