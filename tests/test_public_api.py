"""The public surface: __all__ is sorted, resolves, and lists everything public (like httpx)."""

from __future__ import annotations

import importlib
import inspect
import types
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = sorted(
    ".".join(init.parent.relative_to(SRC).parts)
    for init in (SRC / "agentfootprint").rglob("__init__.py"))
"""Every namespace of the package: one drift test covers them all."""


def _public_members(module: types.ModuleType) -> set[str]:
    """Classes and functions defined in agentfootprint and reachable without an underscore."""
    found = set()
    for name in dir(module):
        if name.startswith("_"):
            continue
        member = getattr(module, name)
        if not (inspect.isclass(member) or inspect.isfunction(member)):
            continue
        if (getattr(member, "__module__", "") or "").split(".")[0] != "agentfootprint":
            continue
        found.add(name)
    return found


def _isort_key(name: str) -> tuple[int, str]:
    """ruff RUF022's isort-style order: CONSTANTS, then Classes, then everything else."""
    if len(name) > 1 and name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted(package: str) -> None:
    """__all__ is sorted isort-style (CONSTANTS, Classes, then functions), easy to review."""
    module = importlib.import_module(package)
    assert list(module.__all__) == sorted(module.__all__, key=_isort_key)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_has_no_duplicates(package: str) -> None:
    """Every exported name is listed once."""
    module = importlib.import_module(package)
    assert len(module.__all__) == len(set(module.__all__))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_in_all_resolves(package: str) -> None:
    """Every name in __all__ is an attribute of the package."""
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("package", PACKAGES)
def test_nothing_public_is_missing_from_all(package: str) -> None:
    """Every public class or function the package exposes is listed in __all__."""
    module = importlib.import_module(package)
    assert _public_members(module) - set(module.__all__) == set()


@pytest.mark.parametrize("package", PACKAGES)
def test_star_import_gives_exactly_all(package: str) -> None:
    """`from package import *` binds exactly the names in __all__."""
    namespace: dict[str, object] = {}
    exec(f"from {package} import *", namespace)
    namespace.pop("__builtins__", None)
    assert set(namespace) == set(importlib.import_module(package).__all__)


def test_exported_members_belong_to_the_package() -> None:
    """Exported classes and functions report a public agentfootprint module path."""
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            member = getattr(module, name)
            if inspect.isclass(member) or inspect.isfunction(member):
                assert member.__module__.startswith("agentfootprint"), (package, name)


def test_error_tree() -> None:
    """The errors exported at the top level form the documented tree."""
    import agentfootprint as af

    assert issubclass(af.ConfigurationError, af.AgentFootprintError)
    assert issubclass(af.ChartBuildError, af.ConfigurationError)
    assert issubclass(af.RunError, af.AgentFootprintError)
    for error in (af.StageError, af.LoopLimitError, af.FlowTimeoutError, af.CheckpointError):
        assert issubclass(error, af.RunError)
    assert issubclass(af.FlowTimeoutError, TimeoutError)


def test_version_is_exported() -> None:
    """__version__ is a string and listed in __all__."""
    import agentfootprint

    assert isinstance(agentfootprint.__version__, str)
    assert "__version__" in agentfootprint.__all__
