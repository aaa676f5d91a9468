"""The rag package's public face and its place in the layers."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import agentfootprint.rag as rag

SRC = Path(rag.__file__).parent
ALLOWED = ("agentfootprint._lazy", "agentfootprint.errors", "agentfootprint.runs",
           "agentfootprint.flow", "agentfootprint.memory",
           "agentfootprint.rag")


def test_all_lists_exactly_the_public_names() -> None:
    """__all__ has no duplicates and names every public class, function and constant."""
    public = {name for name, value in vars(rag).items()
              if not name.startswith("_") and not inspect.ismodule(value)}
    assert len(rag.__all__) == len(set(rag.__all__))
    assert set(rag.__all__) == public


def test_exported_members_live_in_the_package() -> None:
    """Every exported class and function is defined in agentfootprint.rag."""
    for name in rag.__all__:
        member = getattr(rag, name)
        if inspect.isclass(member) or inspect.isfunction(member):
            assert member.__module__.startswith("agentfootprint.rag."), name


def test_rag_imports_only_lower_layers() -> None:
    """rag/ sits beside memory: it never imports the agent, context, tools or explain layers."""
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if node.level:
                    module = "agentfootprint." + ("rag." if node.level == 1 else "") + module
                if module.startswith("agentfootprint"):
                    assert module.startswith(ALLOWED), f"{path.name} imports {module}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("agentfootprint") or alias.name.startswith(
                        ALLOWED), f"{path.name} imports {alias.name}"
