"""How packages serve names: loaded on first use, moved for one release, old module paths.

* ``lazy_names`` — a plain agent run should not pay for what it never touches (the code
  runner, governance, the causal walk, a provider SDK): a package lists those names and the
  private submodule each comes from, and gets the ``__getattr__``/``__dir__`` that import it on
  first read (PEP 562).
* ``moved_names`` — a name that left a package's public face still resolves there for one
  release, with a DeprecationWarning naming its home.
* ``serve_moved_modules`` — implementation modules are private (``flow/_engine.py``); an old
  module path still imports for one release, with a DeprecationWarning.

This module imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["lazy_names", "moved_names", "serve_moved_modules"]


def lazy_names(package: str, names: Mapping[str, str]
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

    return __getattr__, __dir__


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
        if any(part.startswith("_") for part in home.split(".")):
            note = "; ".join(filter(None, [note, "it is internal now and may change without "
                                           "notice"]))
        warnings.warn(f"{package}.{name} moved: import it from {home} "
                      f"(`from {home} import {name}`){'; ' + note if note else ''}; "
                      "the old path goes away in the next release",
                      DeprecationWarning, stacklevel=stacklevel)
        return getattr(importlib.import_module(home), name)

    return __getattr__


class _KeepsItsNames(ModuleType):
    """A package for one import: it ignores the binding of a moved module over its function."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == vars(self).get("_moved_module_guard") and isinstance(value, ModuleType):
            del vars(self)["_moved_module_guard"]
            object.__setattr__(self, "__class__", ModuleType)
            return
        super().__setattr__(name, value)


class _MovedModules:  # a meta-path finder and loader by protocol: importlib.abc costs ~2 ms
    """Old module paths of ``package``, served for one release as the module now behind them.

    ``agentfootprint.flow.engine`` became ``agentfootprint.flow._engine`` when implementation
    modules went private: asking for the old path (``import``, ``from ... import``) finds the
    private module, binds it under the old name too, and warns. ``explicit`` maps paths that
    moved elsewhere (not just behind an underscore). Asked last, after every real finder, so it
    never shadows a module that exists.
    """

    def __init__(self, package: str, explicit: Mapping[str, str]) -> None:
        self.package = package
        self.explicit = dict(explicit)

    def _target(self, fullname: str) -> str | None:
        if fullname in self.explicit:
            return self.explicit[fullname]
        if not fullname.startswith(self.package + "."):
            return None
        parent, _, last = fullname.rpartition(".")
        if last.startswith("_") or parent not in sys.modules:
            return None
        private = f"{parent}._{last}"
        try:
            found = importlib.util.find_spec(private)
        except (ImportError, ValueError):
            return None
        return private if found is not None else None

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = self._target(fullname)
        if new is None:
            return None
        loader: Any = self  # a loader by protocol (create_module/exec_module)
        return importlib.util.spec_from_loader(fullname, loader, origin=new)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = spec.origin or ""
        public = new.rsplit("._", 1)[0] if "._" in new else new.rsplit(".", 1)[0]
        while "." in public and not getattr(importlib.import_module(public), "__all__", None):
            public = public.rsplit(".", 1)[0]  # the nearest package that exports names
        warnings.warn(f"{spec.name} moved to {new}: import its public names from {public} "
                      f"(`from {public} import ...`); the old path goes away in the next "
                      "release", DeprecationWarning, stacklevel=2)
        parent_name, _, child = spec.name.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is not None and not isinstance(getattr(parent, child, None), ModuleType) \
                and child in vars(parent):
            # The import system binds the module on its parent next; where the parent has a
            # function of that name (providers.openai), that one binding is skipped.
            vars(parent)["_moved_module_guard"] = child
            parent.__class__ = _KeepsItsNames
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was first imported under its own name."""


def serve_moved_modules(package: str, explicit: Mapping[str, str] | None = None) -> None:
    """Serve ``package``'s old module paths (see ``_MovedModules``), once per process."""
    if not any(isinstance(f, _MovedModules) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(_MovedModules(package, explicit or {}))
