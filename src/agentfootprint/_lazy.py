"""Names a package serves from a submodule loaded on first use (PEP 562).

A plain agent run should not pay for what it never touches: the code runner, governance, the
causal walk, a provider SDK. A package lists those names and the submodule each comes from;
``lazy_names`` gives it the module ``__getattr__`` and ``__dir__`` that import the submodule
the first time a name is read and cache the value in the package's namespace.

Where a lazy name is also a submodule's name (``flow.narrative`` the function and
``flow/narrative.py``), the import system would bind the module over the function the moment
the submodule loads; ``keep`` names the attributes the package must not let it replace.

This module imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Collection, Mapping
from types import ModuleType
from typing import Any

__all__ = ["keep_bound", "lazy_names", "moved_module", "moved_names"]


def lazy_names(package: str, names: Mapping[str, str], *, keep: Collection[str] = ()
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``names`` maps a public name to the
    submodule (relative to the package) that defines it."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    if keep:
        keep_bound(package, keep)
    return __getattr__, __dir__


def keep_bound(package: str, names: Collection[str]) -> None:
    """Give ``package`` a module type that ignores a submodule bound over one of ``names``."""
    kept = frozenset(names)

    class Package(ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in kept and isinstance(value, ModuleType):
                return
            super().__setattr__(name, value)

    sys.modules[package].__class__ = Package


def moved_names(package: str, moved: Mapping[str, str], *,
                notes: Mapping[str, str] | None = None, stacklevel: int = 2
                ) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving names that moved: ``moved`` maps a name to the module
    it lives in now. Reading one works for one release, with a ``DeprecationWarning`` naming
    the new import (and ``notes[name]``, when a user likely wants something else).

    ``stacklevel`` points the warning at the reader's line: 2 when this is the package's
    ``__getattr__``, 3 when the package's own ``__getattr__`` calls it."""

    def __getattr__(name: str) -> Any:
        home = moved.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        note = (notes or {}).get(name)
        warnings.warn(f"{package}.{name} moved: import it from {home} "
                      f"(`from {home} import {name}`){'; ' + note if note else ''}; "
                      "the old path goes away in the next release",
                      DeprecationWarning, stacklevel=stacklevel)
        return getattr(importlib.import_module(home), name)

    return __getattr__


def moved_module(old: str, new: str) -> None:
    """Warn that the module ``old`` moved to ``new`` (call it at the top of the old module)."""
    warnings.warn(f"{old} moved to {new}: import from {new}; the old path goes away in the "
                  "next release", DeprecationWarning, stacklevel=3)
