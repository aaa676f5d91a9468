"""The memory package's public face and its place in the layers."""

from __future__ import annotations

import ast
from pathlib import Path

import agentfootprint.memory as memory

SRC = Path(memory.__file__).parent
ALLOWED = (
    "agentfootprint._lazy",
    "agentfootprint._postgres",
    "agentfootprint.errors",
    "agentfootprint.flow",
    "agentfootprint.memory",
    "agentfootprint.providers",
    "agentfootprint.runs",
)


def test_all_is_sorted_and_matches_public_names() -> None:
    """__all__ is sorted and lists exactly the public names the package defines."""
    public = {n for n in vars(memory) if not n.startswith("_")} - {
        "causal",
        "define",
        "embedding",
        "narrative",
        "stages",
        "strategies",
        "summary",
        "entry",
        "errors",
        "identity",
        "store",
        "stores",
        "turn",
    }
    assert memory.__all__ == sorted(memory.__all__)
    assert set(memory.__all__) == public


def test_architecture_names_exported() -> None:
    """The names ARCHITECTURE §5 promises are importable from agentfootprint.memory."""
    for name in ("SQLiteStore", "InMemoryStore", "MemoryIdentity", "resolve_turn_number"):
        assert name in memory.__all__


def test_memory_imports_only_errors_flow_and_itself() -> None:
    """memory/ imports only root modules, flow, providers (the summarizer's port), runs, itself."""
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("agentfootprint")
            ):
                assert node.module.startswith(ALLOWED), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("agentfootprint") or alias.name.startswith(
                        ALLOWED
                    )
