"""Imports go down the layers of ARCHITECTURE.md, for every package, lazy imports included.

    cli · demo · serve                           (apps; the CLI runs the demo; serve: MCP)
    explain · audit · observe · lint             (analysis & export)
    compose
    agent
    context · tools · memory · rag               (context may use tools; rag is built on memory)
    providers · events · runs                    (a recording rebuilds requests in the
                                                  provider port's wire format)
    flow
    errors · _lazy · _postgres · _refs · _record (the root: anyone may import them)

A module may import its own package and any package of a lower layer, never one above or beside
it (except the sideways uses named above). ``agentfootprint/__init__.py`` is the public face
and re-exports from every layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "agentfootprint"

LAYER = {
    "errors": 0, "_lazy": 0, "_postgres": 0, "_refs": 0, "_record": 0,
    "flow": 1,
    "providers": 2, "events": 2, "runs": 2,
    "context": 3, "tools": 3, "memory": 3, "rag": 3,
    "agent": 4,
    "compose": 5,
    "explain": 6, "audit": 6, "observe": 6, "lint": 6,
    "cli": 7, "_demo": 7, "serve": 7, "distributed": 7,
}
SIDEWAYS = {("context", "tools"), ("rag", "memory"), ("cli", "_demo"), ("runs", "providers"),
            ("_postgres", "errors"), ("_refs", "errors"), ("cli", "serve")}


def _package(relative: Path) -> str:
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _imported(path: Path) -> set[str]:
    """The top-level packages of ``agentfootprint`` that ``path`` imports, anywhere in it."""
    relative = path.relative_to(PACKAGE)
    here = ["agentfootprint", *relative.with_suffix("").parts]
    if relative.name == "__init__.py":
        here.append("__init__")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level]
                names = [".".join([*base, node.module] if node.module else base)]
            else:
                names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "agentfootprint" and len(parts) > 1:
                found.add(parts[1])
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def test_every_package_has_a_layer() -> None:
    """A new package must be placed in the map before it can be imported from."""
    packages = {_package(p.relative_to(PACKAGE)) for p in MODULES}
    assert packages - {"__main__"} <= set(LAYER), sorted(packages - set(LAYER))


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_down(module: Path) -> None:
    """``module`` imports its own package and lower layers only."""
    mine = _package(module.relative_to(PACKAGE))
    upward = sorted(
        other for other in _imported(module) - {mine}
        if other in LAYER and LAYER[other] >= LAYER[mine] and (mine, other) not in SIDEWAYS)
    assert not upward, f"{module.relative_to(PACKAGE)} imports {upward} (layer {LAYER[mine]})"
