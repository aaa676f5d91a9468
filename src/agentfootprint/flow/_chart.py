"""The built chart: an immutable graph of stages that describes itself and can be run.

A chart is shareable: many runs (and many concurrent runs) may walk one chart, because the
graph is frozen and all run state lives in the engine. Subflows are inlined at build time
under their mount id (``sf/stage``), so one node table covers the whole chart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal

from .._record import Frozen, assign, record_class

if TYPE_CHECKING:
    from ._checkpoint import Checkpoint
    from ._recorders import Recorder
    from ._redact import RedactionPolicy
    from ._run import FlowRun

__all__ = ["Chart", "Mount", "Node", "NodeKind"]

NodeKind = Literal["stage", "decider", "selector", "subflow"]
StageFn = Callable[..., Any]


class Mount:
    """How a subflow is attached: its inlined root, and how data crosses the boundary.

    A plain class, not a dataclass (cold start: the builder only constructs and reads it)."""

    __slots__ = ("array_merge", "chart", "input", "output", "propagate_break", "root", "title")

    root: str
    """Prefixed id of the subflow's first stage."""
    title: str
    """The mounted chart's name, for descriptions and the narrative."""
    input: Callable[[Any], Mapping[str, Any] | None] | None
    """Maps a read-only view of the parent's state to the subflow's input (tracked reads)."""
    output: Callable[[Any], Mapping[str, Any] | None] | None
    """Maps a read-only view of the subflow's final state to writes on the parent."""
    propagate_break: bool
    """When the subflow breaks, stop the parent too."""
    array_merge: Literal["concat", "replace"]
    """How a list returned by ``output`` lands on an existing parent list."""
    chart: Chart
    """The chart that was mounted (for its spec and description)."""

    def __init__(self, *, root: str, title: str,
                 input: Callable[[Any], Mapping[str, Any] | None] | None,
                 output: Callable[[Any], Mapping[str, Any] | None] | None,
                 propagate_break: bool, array_merge: Literal["concat", "replace"],
                 chart: Chart) -> None:
        self.root = root
        self.title = title
        self.input = input
        self.output = output
        self.propagate_break = propagate_break
        self.array_merge = array_merge
        self.chart = chart

    def __repr__(self) -> str:
        return f"Mount(root={self.root!r}, title={self.title!r})"


# Node and Chart are frozen dataclasses whose methods are written once (``_record.py``):
# generating them per class is paid by every cold start.


@record_class
class Node(Frozen):
    """One stage of a chart. ``kind`` says how the engine treats it."""

    id: str
    name: str
    kind: NodeKind
    fn: StageFn | None = None
    description: str | None = None
    next: str | None = None
    loop_to: str | None = None
    branches: Mapping[str, str] = field(default_factory=dict)
    """Decider/selector: branch id -> node id."""
    default: str | None = None
    children: tuple[str, ...] = ()
    """Parallel children (node ids) run after this stage's own function."""
    fail_fast: bool = False
    resume: StageFn | None = None
    mount: Mount | None = None
    keyed_scope: bool = False
    """Its function reads state by key only: it gets a ``KeyedScope`` (see ``flow/_scope.py``)."""

    def __init__(self, id: str, name: str, kind: NodeKind, fn: StageFn | None = None,
                 description: str | None = None, next: str | None = None,
                 loop_to: str | None = None, branches: Mapping[str, str] | None = None,
                 default: str | None = None, children: tuple[str, ...] = (),
                 fail_fast: bool = False, resume: StageFn | None = None,
                 mount: Mount | None = None, keyed_scope: bool = False) -> None:
        assign(self, id=id, name=name, kind=kind, fn=fn, description=description, next=next,
               loop_to=loop_to, branches={} if branches is None else branches,
               default=default, children=children, fail_fast=fail_fast, resume=resume,
               mount=mount, keyed_scope=keyed_scope)

    @property
    def pausable(self) -> bool:
        return self.resume is not None


@record_class
class Chart(Frozen):
    """A built flowchart. Run it with ``await chart.run(args)``."""

    name: str
    root: str
    nodes: Mapping[str, Node]
    description: str | None = None
    input_schema: Mapping[str, Any] | None = None

    def __init__(self, name: str, root: str, nodes: Mapping[str, Node],
                 description: str | None = None,
                 input_schema: Mapping[str, Any] | None = None) -> None:
        assign(self, name=name, root=root, nodes=nodes, description=description,
               input_schema=input_schema)

    def node(self, node_id: str) -> Node:
        return self.nodes[node_id]

    async def run(
        self,
        args: Mapping[str, Any] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        env: Mapping[str, Any] | None = None,
        recorders: tuple[Recorder, ...] | list[Recorder] = (),
        redaction: RedactionPolicy | None = None,
        timeout: float | None = None,
        max_loop_iterations: int = 1000,
        max_depth: int = 500,
        run_id: str | None = None,
    ) -> FlowRun:
        """Walk the chart once. Returns the run (paused runs return too, with a checkpoint)."""
        from ._run import RunOptions, run_chart

        options = RunOptions.make(
            recorders=recorders,
            redaction=redaction,
            timeout=timeout,
            max_loop_iterations=max_loop_iterations,
            max_depth=max_depth,
        )
        return await run_chart(self, args=args, state=state, env=env, options=options,
                               run_id=run_id)

    def run_sync(self, args: Mapping[str, Any] | None = None, **kwargs: Any) -> FlowRun:
        """``run`` for scripts (inside a running loop, a notebook, it runs on a worker loop)."""
        from ._run import run_sync

        return run_sync(self.run(args, **kwargs))

    async def resume(
        self,
        checkpoint: Checkpoint | Mapping[str, Any] | str,
        input: object = None,
        *,
        env: Mapping[str, Any] | None = None,
        recorders: tuple[Recorder, ...] | list[Recorder] = (),
        redaction: RedactionPolicy | None = None,
        timeout: float | None = None,
        max_loop_iterations: int = 1000,
        max_depth: int = 500,
    ) -> FlowRun:
        """Continue a paused run from its checkpoint, in this process or another one."""
        from ._run import RunOptions, resume_chart

        options = RunOptions.make(
            recorders=recorders,
            redaction=redaction,
            timeout=timeout,
            max_loop_iterations=max_loop_iterations,
            max_depth=max_depth,
        )
        return await resume_chart(self, checkpoint, input, env=env, options=options)

    def resume_sync(self, checkpoint: Checkpoint | Mapping[str, Any] | str, input: object = None,
                    **kwargs: Any) -> FlowRun:
        from ._run import run_sync

        return run_sync(self.resume(checkpoint, input, **kwargs))

    # -- self-description -------------------------------------------------------------------

    def spec(self) -> dict[str, Any]:
        """The chart as JSON: nested stages, no functions."""
        return _spec(self, self.root, set())

    def describe(self) -> str:
        """A numbered step list, the same text ``to_mcp_tool`` gives a model."""
        head = f"FlowChart: {self.name}"
        if self.description:
            head += f" — {self.description}"
        return "\n".join([head, "Steps:", *_steps(self, self.root, "")])

    def fingerprint(self) -> str:
        """A short hash of the chart's shape; a checkpoint refuses a chart that differs."""
        import hashlib
        import json

        rows = [
            [n.id, n.name, n.kind, n.description, n.next, n.loop_to, sorted(n.branches.items()),
             n.default, list(n.children), n.fail_fast, n.pausable,
             [n.mount.root, n.mount.propagate_break, n.mount.array_merge] if n.mount else None]
            for n in sorted(self.nodes.values(), key=lambda n: n.id)
        ]
        text = json.dumps([self.root, rows], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_mcp_tool(self) -> dict[str, Any]:
        """An MCP tool definition that runs this chart."""
        name = re.sub(r"[^A-Za-z0-9_\-.]", "_", self.root).strip("_") or "execute"
        schema = dict(self.input_schema) if self.input_schema else {
            "type": "object", "properties": {}, "additionalProperties": False,
        }
        return {"name": name, "description": self.describe(), "inputSchema": schema}


def _spec(chart: Chart, node_id: str | None, seen: set[str]) -> dict[str, Any]:
    """Nested spec; the ``next`` chain is walked in a loop so long charts do not recurse."""
    head: dict[str, Any] = {}
    previous: dict[str, Any] | None = None
    while node_id is not None:
        node = chart.nodes[node_id]
        out = _node_spec(chart, node, seen)
        if previous is None:
            head = out
        else:
            previous["next"] = out
        previous = out
        node_id = node.next
    return head


def _node_spec(chart: Chart, node: Node, seen: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": node.id, "name": node.name, "type": node.kind}
    if node.description:
        out["description"] = node.description
    if node.pausable:
        out["pausable"] = True
    seen.add(node.id)
    if node.branches:
        out["branches"] = {b: _spec(chart, n, seen) for b, n in node.branches.items()}
        if node.default is not None:
            out["default"] = node.default
    if node.children:
        out["parallel"] = [_spec(chart, c, seen) for c in node.children]
        if node.fail_fast:
            out["fail_fast"] = True
    if node.mount is not None:
        out["subflow"] = _spec(chart, node.mount.root, seen)
        if node.mount.propagate_break:
            out["propagate_break"] = True
    if node.loop_to is not None:
        out["loop_to"] = node.loop_to
    return out


def _steps(chart: Chart, start: str | None, indent: str) -> list[str]:
    lines: list[str] = []
    node_id = start
    n = 0
    while node_id is not None:
        node = chart.nodes[node_id]
        n += 1
        label = f"{indent}{n}. "
        desc = f" — {node.description}" if node.description else ""
        if node.kind == "subflow" and node.mount is not None:
            lines.append(f"{label}[Sub-Execution: {node.name}]{desc}")
            lines.extend(_steps(chart, node.mount.root, indent + "   "))
        elif node.kind in ("decider", "selector"):
            verb = "Decides between" if node.kind == "decider" else "Selects from"
            lines.append(f"{label}{node.name}{desc} ({verb}: {', '.join(node.branches)})")
            for branch_id, child_id in node.branches.items():
                child = chart.nodes[child_id]
                text = f"{indent}   → {branch_id}: {child.description or child.name}"
                if child.loop_to is not None:
                    text += f" (loops back to {child.loop_to})"
                lines.append(text)
        else:
            lines.append(f"{label}{node.name}{desc}")
        if node.children:
            names = ", ".join(chart.nodes[c].name for c in node.children)
            lines.append(f"{indent}   then in parallel: {names}")
        if node.loop_to is not None:
            lines.append(f"{indent}   → loops back to {node.loop_to}")
        node_id = node.next
    return lines
