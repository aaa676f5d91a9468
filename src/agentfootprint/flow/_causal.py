"""The causal slice: from one step back to the writes that caused it.

Walks the commit log backwards over read→write edges (each key the step read, linked to the
last record that changed that key before it, in the right namespace) and over control edges
(the first step of a branch, linked to the decider or selector that chose it). Subflow
boundaries are crossed: an enter record reads the parent's keys and writes the subflow's, an
exit record the other way round. Budgets bound the walk and say when they cut it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..errors import ConfigurationError
from ._commitlog import CommitLog, CommitRecord

if TYPE_CHECKING:
    from ._run import FlowRun

__all__ = ["CausalChain", "CausalEdge", "CausalNode", "causal_chain", "format_causal_chain"]


@dataclass(eq=False, slots=True)
class CausalNode:
    """One step in the slice and the edges to the steps it depends on."""

    record: CommitRecord
    depth: int
    linked_by: str | None = None
    causes: list[CausalEdge] = field(default_factory=list)

    @property
    def runtime_stage_id(self) -> str:
        return self.record.runtime_stage_id

    @property
    def keys_written(self) -> list[str]:
        return [c.key for c in self.record.changes]


@dataclass(frozen=True, slots=True)
class CausalEdge:
    """``node`` caused the dependent step through ``key`` (data) or a decision (control)."""

    kind: Literal["data", "control"]
    key: str
    node: CausalNode


@dataclass(slots=True)
class CausalChain:
    """The slice: ``root`` is the step asked about; ``nodes`` lists every step once (BFS)."""

    root: CausalNode
    nodes: list[CausalNode]
    truncated_by_depth: bool = False
    truncated_by_nodes: bool = False
    initial_reads: dict[str, list[str]] = field(default_factory=dict)
    """runtime id -> keys it read that no step wrote (they came from the initial state)."""

    @property
    def truncated(self) -> bool:
        return self.truncated_by_depth or self.truncated_by_nodes

    def __str__(self) -> str:
        return format_causal_chain(self)


def causal_chain(source: FlowRun | CommitLog, from_stage: str, *, max_depth: int = 20,
                 max_nodes: int = 100, control: bool = True) -> CausalChain:
    """The writes (and decisions) that led to ``from_stage`` (a runtime id, stage id or name)."""
    log = source if isinstance(source, CommitLog) else source.log
    start = log.find(from_stage)
    if start is None:
        raise ConfigurationError(
            f"no step {from_stage!r} in this run; pass a runtime id like 'stage#3', a stage id "
            "or a stage name that ran")
    root = CausalNode(start, 0)
    by_idx: dict[int, CausalNode] = {start.idx: root}
    chain = CausalChain(root, [root])
    queue: deque[CausalNode] = deque([root])
    while queue:
        node = queue.popleft()
        record = node.record
        links: list[tuple[Literal["data", "control"], str, int]] = []
        for key in record.reads:
            writer = log.last_writer(key, record.idx, ns=record.read_namespace)
            if writer is None:
                chain.initial_reads.setdefault(record.runtime_stage_id, []).append(key)
            else:
                links.append(("data", key, writer))
        if control and record.control is not None:
            decider = _record_before(log, record.control, record.idx)
            if decider is not None:
                links.append(("control", _decision_label(decider), decider.idx))
        if not links:
            continue
        if node.depth >= max_depth:
            chain.truncated_by_depth = True
            continue
        for kind, key, idx in links:
            target = by_idx.get(idx)
            if target is None:
                if len(by_idx) >= max_nodes:
                    chain.truncated_by_nodes = True
                    continue
                target = CausalNode(log[idx], node.depth + 1, key)
                by_idx[idx] = target
                chain.nodes.append(target)
                queue.append(target)
            if not any(e.node is target and e.key == key and e.kind == kind for e in node.causes):
                node.causes.append(CausalEdge(kind, key, target))
    return chain


def _record_before(log: CommitLog, rid: str, before: int) -> CommitRecord | None:
    for record in reversed(log.records_for(rid)):
        if record.idx < before:
            return record
    return None


def _decision_label(record: CommitRecord) -> str:
    decision = record.decision or {}
    evidence = decision.get("evidence") or {}
    for rule in evidence.get("rules", ()):
        if rule.get("matched") and rule.get("label"):
            return str(rule["label"])
    chosen = decision.get("chosen", decision.get("selected"))
    return f"chose {chosen}"


def format_causal_chain(chain: CausalChain) -> str:
    """Indented text: each step, how it links to the one above, and what it wrote."""
    lines: list[str] = []
    printed: set[int] = set()
    stack: list[tuple[CausalNode, int, CausalEdge | None]] = [(chain.root, 0, None)]
    while stack:
        node, level, edge = stack.pop()
        pad = "  " * level
        rid = node.runtime_stage_id
        if node.record.idx in printed:
            lines.append(f"{pad}↳ {rid} (see above)")
            continue
        printed.add(node.record.idx)
        via = ""
        if edge is not None:
            via = f" ← [control: {edge.key}]" if edge.kind == "control" else f" ← via {edge.key}"
        wrote = f" [wrote: {', '.join(node.keys_written)}]" if node.keys_written else ""
        lines.append(f"{pad}{node.record.stage} ({rid}){via}{wrote}")
        for child in reversed(node.causes):
            stack.append((child.node, level + 1, child))
    if chain.truncated:
        why = ", ".join(w for w, hit in (("max_depth reached", chain.truncated_by_depth),
                                          ("max_nodes reached", chain.truncated_by_nodes)) if hit)
        lines.append(f"⚠ slice truncated ({why}) — older causes exist beyond this horizon")
    return "\n".join(lines)
