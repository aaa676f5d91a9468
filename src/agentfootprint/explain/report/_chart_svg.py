"""The run's chart as inline SVG, laid out from ``Chart.spec()``, with the executed path lit.

Why our own layout: the report is one file that works offline, so no layout library or CDN.
The chart spec is already nested the way people read a flowchart, so a small recursive layout
is enough: a chain of stages runs top to bottom; a decider's branches and a fork's parallel
children sit side by side under it; a subflow is a box around its own chain; a loop is an edge
back up the left margin. Every node carries ``data-stage-id`` (and ``data-runs``), so the
page's script and the browser test can tie it to the timeline; all text is escaped.

A composition's chart shows the composition: each member agent (a subflow whose own chain
holds an LLM call) is drawn as one box (``g.node.member`` with ``data-member``), and its
internal stages sit in a ``<details class="member-chart">`` below the chart, closed by default
(:func:`member_charts`), so a pipeline's view is the pipeline, not the framework's stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Literal

from ._data import ChartRun

__all__ = ["member_charts", "render_chart_svg"]

NODE_W = 176.0
NODE_H = 36.0
GAP_Y = 32.0
GAP_X = 22.0
PAD = 12.0
HEADER = 30.0
LANE = 14.0
MARGIN = 12.0

EdgeKind = Literal["next", "merge", "branch", "fork", "loop"]


@dataclass(frozen=True, slots=True)
class _Rect:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def bottom(self) -> float:
        return self.y + self.h


@dataclass(frozen=True, slots=True)
class _Edge:
    src: str
    dst: str
    kind: EdgeKind
    label: str = ""


def render_chart_svg(spec: dict[str, Any], run: ChartRun, *,
                     svg_id: str | None = "chart-svg") -> str:
    """The SVG markup of ``spec``; stages in ``run.runs`` and edges in ``run.taken`` are lit.
    Member agents nested in it are drawn collapsed, one box each."""
    if not spec:
        return '<p class="empty">This run recorded no chart.</p>'
    collapsed, _ = _collapse(spec)
    layout = _Layout()
    layout.place_chain(collapsed, 0.0, layout.measure_chain(collapsed)[0], 0.0)
    return layout.svg(run, svg_id)


def member_charts(spec: dict[str, Any], run: ChartRun) -> str:
    """One closed ``<details>`` per member agent drawn collapsed in ``spec``'s chart, holding
    that member's own chart (its internal stages, lit as they ran)."""
    if not spec:
        return ""
    _, members = _collapse(spec)
    out = []
    for member in members:
        inner = member["subflow"]
        stages = _count(inner)
        ran = sum(1 for sid in _ids(inner) if run.runs.get(sid))
        name = str(member.get("name") or member["id"])
        out.append(
            f'<details class="member-chart" data-member="{escape(str(member["id"]))}">'
            f"<summary><b>{escape(name)}</b> — its {stages} internal stage(s), {ran} ran"
            "</summary>"
            f'<div class="chart-wrap">{render_chart_svg(inner, run, svg_id=None)}</div>'
            f"{member_charts(inner, run)}</details>")
    return "".join(out)


def _is_member(node: dict[str, Any]) -> bool:
    """A subflow whose own chain (not a nested subflow's) holds an LLM call: an agent."""
    inner = node.get("subflow")
    if not isinstance(inner, dict):
        return False
    todo = [inner]
    while todo:
        current = todo.pop()
        if str(current.get("id", "")).rsplit("/", 1)[-1] == "call_llm":
            return True
        if current.get("next"):
            todo.append(current["next"])
        todo.extend(child for _, child in _fan(current))
    return False


def _collapse(spec: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A copy of ``spec`` with every member agent replaced by one box; the members, in order."""
    members: list[dict[str, Any]] = []

    def copy(node: dict[str, Any] | None) -> dict[str, Any] | None:
        if not node:
            return node
        out = dict(node)
        if _is_member(node):
            members.append(node)
            out.pop("subflow", None)
            out["member"] = _count(node["subflow"])
        elif node.get("subflow"):
            out["subflow"] = copy(node["subflow"])
        if node.get("next"):
            out["next"] = copy(node["next"])
        if node.get("branches"):
            out["branches"] = {label: copy(child) for label, child in node["branches"].items()}
        if node.get("parallel"):
            out["parallel"] = [copy(child) for child in node["parallel"]]
        return out

    return copy(spec) or {}, members


def _ids(spec: dict[str, Any] | None) -> list[str]:
    found: list[str] = []
    todo = [spec] if spec else []
    while todo:
        node = todo.pop()
        found.append(str(node.get("id")))
        for child in (node.get("next"), node.get("subflow")):
            if child:
                todo.append(child)
        todo.extend(child for _, child in _fan(node))
    return list(dict.fromkeys(found))


def _count(spec: dict[str, Any] | None) -> int:
    return len(_ids(spec))


def _chain(spec: dict[str, Any] | None) -> list[dict[str, Any]]:
    nodes = []
    while spec:
        nodes.append(spec)
        spec = spec.get("next")
    return nodes


def _fan(node: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if node.get("branches"):
        return list(node["branches"].items())
    return [("", child) for child in node.get("parallel", ()) if child]


class _Layout:
    """Two passes over the spec: measure every block, then place it and collect the edges."""

    def __init__(self) -> None:
        self.rects: dict[str, _Rect] = {}
        self.nodes: list[tuple[dict[str, Any], _Rect]] = []
        self.edges: list[_Edge] = []
        self._sizes: dict[int, tuple[float, float]] = {}

    # -- measure ----------------------------------------------------------------------------

    def measure_chain(self, spec: dict[str, Any]) -> tuple[float, float]:
        sizes = [self.measure_node(node) for node in _chain(spec)]
        return (max(w for w, _ in sizes),
                sum(h for _, h in sizes) + GAP_Y * (len(sizes) - 1))

    def head_size(self, node: dict[str, Any]) -> tuple[float, float]:
        if node.get("subflow"):
            width, height = self.measure_chain(node["subflow"])
            return max(NODE_W, width + 2 * PAD), HEADER + height + PAD
        return NODE_W, NODE_H

    def measure_node(self, node: dict[str, Any]) -> tuple[float, float]:
        known = self._sizes.get(id(node))
        if known is not None:
            return known
        width, height = self.head_size(node)
        fan = _fan(node)
        if fan:
            sizes = [self.measure_chain(child) for _, child in fan]
            row_w = sum(w for w, _ in sizes) + GAP_X * (len(sizes) - 1)
            width = max(width, row_w)
            height += GAP_Y + max(h for _, h in sizes)
        self._sizes[id(node)] = (width, height)
        return width, height

    # -- place ------------------------------------------------------------------------------

    def place_chain(self, spec: dict[str, Any], x: float, width: float,
                    y: float) -> tuple[str, list[str]]:
        """Place a chain in a column; returns its entry id and the ids that flow out of it."""
        nodes = _chain(spec)
        exits: list[str] = []
        for position, node in enumerate(nodes):
            w, h = self.measure_node(node)
            if position > 0:
                previous = nodes[position - 1]["id"]
                for source in exits:
                    kind: EdgeKind = "next" if source == previous else "merge"
                    self.edges.append(_Edge(source, node["id"], kind))
            exits = self.place_node(node, x + (width - w) / 2, y)
            y += h + GAP_Y
        return nodes[0]["id"], exits

    def place_node(self, node: dict[str, Any], x: float, y: float) -> list[str]:
        width, _ = self.measure_node(node)
        head_w, head_h = self.head_size(node)
        rect = _Rect(x + (width - head_w) / 2, y, head_w, head_h)
        node_id = str(node["id"])
        self.rects[node_id] = rect
        self.nodes.append((node, rect))
        if node.get("subflow"):
            self.place_chain(node["subflow"], rect.x + PAD, head_w - 2 * PAD, y + HEADER)
        loop_to = node.get("loop_to")
        if loop_to:
            self.edges.append(_Edge(node_id, str(loop_to), "loop"))
        fan = _fan(node)
        if not fan:
            return [] if loop_to else [node_id]
        sizes = [self.measure_chain(child) for _, child in fan]
        row_w = sum(w for w, _ in sizes) + GAP_X * (len(sizes) - 1)
        row_x, row_y = x + (width - row_w) / 2, y + head_h + GAP_Y
        kind: EdgeKind = "branch" if node.get("branches") else "fork"
        exits: list[str] = []
        for (label, child), (child_w, _) in zip(fan, sizes, strict=True):
            entry, child_exits = self.place_chain(child, row_x, child_w, row_y)
            self.edges.append(_Edge(node_id, entry, kind, label))
            exits.extend(child_exits)
            row_x += child_w + GAP_X
        return exits

    # -- draw -------------------------------------------------------------------------------

    def svg(self, run: ChartRun, svg_id: str | None = "chart-svg") -> str:
        loops = [e for e in self.edges if e.kind == "loop" and e.dst in self.rects]
        shift = MARGIN + LANE * (len(loops) + 1)
        width = max(r.x + r.w for r in self.rects.values()) + shift + MARGIN
        height = max(r.bottom for r in self.rects.values()) + MARGIN * 2 + 6 * len(loops) + 12
        drawn_edges: list[tuple[bool, str]] = []
        into: dict[str, list[_Edge]] = {}
        for edge in loops:
            into.setdefault(edge.dst, []).append(edge)
        for edge in self.edges:
            if edge.src not in self.rects or edge.dst not in self.rects:
                continue
            lit = (edge.src, edge.dst) in run.taken or (
                edge.kind == "merge" and edge.src in run.runs and edge.dst in run.runs)
            if edge.kind == "loop":
                path = self._loop_path(edge, loops.index(edge), into[edge.dst].index(edge),
                                       len(into[edge.dst]), shift)
            else:
                path = self._path(edge, shift)
            drawn_edges.append((lit, self._edge_markup(edge, path, lit, shift)))
        clusters: list[str] = []
        boxes: list[str] = []
        for node, rect in self.nodes:
            markup = self._node_markup(node, rect, run, shift)
            (clusters if node.get("subflow") else boxes).append(markup)
        body = "".join([
            *clusters,
            *(markup for lit, markup in drawn_edges if not lit),
            *(markup for lit, markup in drawn_edges if lit),
            *boxes,
        ])
        ident = f'id="{svg_id}" ' if svg_id else ""
        return (f'<svg {ident}class="chart" viewBox="0 0 {width:.0f} {height:.0f}" '
                f'width="{width:.0f}" height="{height:.0f}" role="img" '
                f'aria-label="the run\'s flowchart; stages that ran are lit">'
                f"<defs>{_marker('af-arrow', 'arrow')}{_marker('af-arrow-lit', 'arrow lit')}"
                f'</defs>{body}</svg>')

    def _path(self, edge: _Edge, shift: float) -> str:
        src, dst = self.rects[edge.src], self.rects[edge.dst]
        sx, sy = src.cx + shift, src.bottom + MARGIN
        dx, dy = dst.cx + shift, dst.y + MARGIN
        if abs(sx - dx) < 0.5:
            return f"M{sx:.1f},{sy:.1f} V{dy:.1f}"
        bend = sy + GAP_Y / 2 if edge.kind in ("branch", "fork") else dy - GAP_Y / 2
        return f"M{sx:.1f},{sy:.1f} V{bend:.1f} H{dx:.1f} V{dy:.1f}"

    def _loop_path(self, edge: _Edge, lane: int, slot: int, slots: int, shift: float) -> str:
        src, dst = self.rects[edge.src], self.rects[edge.dst]
        sx, sy = src.cx + shift, src.bottom + MARGIN
        below = sy + 8 + 6 * lane
        lane_x = shift - LANE * (lane + 1)
        ty = dst.y + MARGIN + dst.h * (slot + 1) / (slots + 1)
        return (f"M{sx:.1f},{sy:.1f} V{below:.1f} H{lane_x:.1f} V{ty:.1f} "
                f"H{dst.x + shift:.1f}")

    def _edge_markup(self, edge: _Edge, path: str, lit: bool, shift: float) -> str:
        css = f"edge {edge.kind}" + (" lit" if lit else "")
        marker = "af-arrow-lit" if lit else "af-arrow"
        out = (f'<path class="{css}" d="{path}" data-from="{escape(edge.src)}" '
               f'data-to="{escape(edge.dst)}" marker-end="url(#{marker})"/>')
        if edge.label:
            dst = self.rects[edge.dst]
            out += (f'<text class="edge-label{" lit" if lit else ""}" text-anchor="end" '
                    f'x="{dst.cx + shift - 6:.1f}" y="{dst.y + MARGIN - 5:.1f}">'
                    f"{escape(_clip(edge.label, 22))}</text>")
        return out

    def _node_markup(self, node: dict[str, Any], rect: _Rect, run: ChartRun,
                     shift: float) -> str:
        node_id = str(node["id"])
        kind = str(node.get("type", "stage"))
        runs = run.runs.get(node_id, 0)
        name = str(node.get("name") or node_id)
        x, y = rect.x + shift, rect.y + MARGIN
        state = "ran" if runs else "idle"
        about = f"{name} ({node_id})"
        if node.get("description"):
            about += f" — {node['description']}"
        about += f" · ran {runs}×" if runs else " · did not run"
        member = node.get("member")
        if member is not None:
            about += f" · an agent of {member} internal stages, collapsed: open it below"
        head = (f'<g class="node {escape(kind)} {state}{" member" if member is not None else ""}"'
                f' data-stage-id="{escape(node_id)}" data-runs="{runs}"'
                + (f' data-member="{escape(node_id)}"' if member is not None else "")
                + f' tabindex="0"><title>{escape(about)}</title>')
        if node.get("subflow"):
            shape = (f'<rect class="cluster" x="{x:.1f}" y="{y:.1f}" width="{rect.w:.1f}" '
                     f'height="{rect.h:.1f}" rx="10"/>'
                     f'<text class="cluster-title" x="{x + 10:.1f}" y="{y + 19:.1f}">'
                     f"{escape(_clip(name, int(rect.w / 7.5)))}</text>")
            badge_x = x + rect.w - 16
        else:
            if kind in ("decider", "selector"):
                inset = 12.0
                points = " ".join(f"{px:.1f},{py:.1f}" for px, py in (
                    (x + inset, y), (x + rect.w - inset, y), (x + rect.w, y + rect.h / 2),
                    (x + rect.w - inset, y + rect.h), (x + inset, y + rect.h),
                    (x, y + rect.h / 2)))
                shape = f'<polygon class="box" points="{points}"/>'
            else:
                shape = (f'<rect class="box" x="{x:.1f}" y="{y:.1f}" width="{rect.w:.1f}" '
                         f'height="{rect.h:.1f}" rx="7"/>')
            label = f"▸ {_clip(name, 18)}" if member is not None else _clip(name, 22)
            shape += (f'<text class="label" x="{x + rect.w / 2:.1f}" y="{y + rect.h / 2 + 4:.1f}" '
                      f'text-anchor="middle">{escape(label)}</text>')
            badge_x = x + rect.w - 6
        if runs > 1:
            shape += (f'<text class="runs" x="{badge_x:.1f}" y="{y - 3:.1f}" '
                      f'text-anchor="end">×{runs}</text>')
        return head + shape + "</g>"


def _marker(marker_id: str, css: str) -> str:
    return (f'<marker id="{marker_id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
            'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" class="{css}"/></marker>')


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"
