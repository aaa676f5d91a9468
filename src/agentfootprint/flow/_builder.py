"""The fluent builder: ``flow_chart(...).then(...).decide(...).branch(...).end().build()``.

The builder keeps a cursor on the last stage added. ``then`` chains after it, ``parallel``
attaches children to it (they run after its function, before its ``next``), ``decide`` and
``select`` open a branch list whose ``end()`` puts the cursor back on the decider, so a following
``then`` runs after whichever branch ran. Everything is validated by ``build()`` at the latest,
with errors that name the stage and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NoReturn

from ..errors import ChartBuildError
from ._chart import Chart, Mount, Node, NodeKind, StageFn
from ._decide import Decision, Rule, Selection, check_rules, decide, select
from ._scope import Scope

__all__ = ["BranchBuilder", "FlowBuilder", "ParallelChild", "flow_chart"]

ParallelChild = (tuple[str, StageFn | Chart]
                 | tuple[str, StageFn | Chart, Mapping[str, Any]])
"""A ``parallel()`` child: ``(name, fn[, options])`` or ``(id, chart[, mount options])``."""


class _Draft:
    """A stage being built (a plain slotted class: a dataclass costs exec'd methods at import,
    and nothing compares, replaces or copies a draft)."""

    __slots__ = ("branches", "children", "default", "description", "fail_fast", "fn", "id",
                 "kind", "loop_to", "mount", "name", "next", "resume", "rules")

    def __init__(self, *, id: str, name: str, kind: NodeKind, fn: StageFn | None = None,
                 description: str | None = None, next: str | None = None,
                 loop_to: str | None = None, branches: dict[str, str] | None = None,
                 default: str | None = None, children: list[str] | None = None,
                 fail_fast: bool = False, resume: StageFn | None = None,
                 mount: Mount | None = None, rules: Sequence[Rule] | None = None) -> None:
        self.id = id
        self.name = name
        self.kind = kind
        self.fn = fn
        self.description = description
        self.next = next
        self.loop_to = loop_to
        self.branches: dict[str, str] = {} if branches is None else branches
        self.default = default
        self.children: list[str] = [] if children is None else children
        self.fail_fast = fail_fast
        self.resume = resume
        self.mount = mount
        self.rules = rules


def flow_chart(
    name: str,
    fn: StageFn | None = None,
    *,
    id: str | None = None,
    description: str | None = None,
    resume: StageFn | None = None,
) -> FlowBuilder:
    """Start a chart whose first stage is ``name`` running ``fn(scope)``."""
    builder = FlowBuilder(name)
    builder._add_linear(name, fn, id=id, description=description, resume=resume)
    return builder


class FlowBuilder:
    """Builds one chart; every method returns the builder so calls chain."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._drafts: dict[str, _Draft] = {}
        self._order: list[str] = []
        self._root: str | None = None
        self._cursor: _Draft | None = None
        self._built = False

    # -- linear -----------------------------------------------------------------------------

    def then(
        self,
        name: str,
        fn: StageFn | None = None,
        *,
        id: str | None = None,
        description: str | None = None,
        resume: StageFn | None = None,
    ) -> FlowBuilder:
        """Run ``fn(scope)`` after the current stage. ``resume=`` makes the stage pausable."""
        return self._add_linear(name, fn, id=id, description=description, resume=resume)

    def subflow(
        self,
        id: str,
        chart: Chart,
        *,
        name: str | None = None,
        description: str | None = None,
        input: Callable[[Any], Mapping[str, Any] | None] | None = None,
        output: Callable[[Any], Mapping[str, Any] | None] | None = None,
        propagate_break: bool = False,
        array_merge: Literal["concat", "replace"] = "concat",
    ) -> FlowBuilder:
        """Run ``chart`` next, in its own state; ``input``/``output`` map data across."""
        draft = self._mount_draft(
            id, chart, name=name, description=description, input=input, output=output,
            propagate_break=propagate_break, array_merge=array_merge,
        )
        self._link(draft)
        return self

    def parallel(self, *children: ParallelChild, fail_fast: bool = False) -> FlowBuilder:
        """Run children concurrently after the current stage, before its ``next``.

        Each child is ``(name, fn)``, ``(name, fn, {"id": ..., "description": ...})``,
        ``(id, chart)`` for a subflow, or ``(id, chart, {"input": ..., "output": ...})``.
        Children share the parent's state: what they write, the next stage reads. When two
        children write one key, the last to commit wins and the log keeps both writes in
        commit order.
        """
        cursor = self._require_cursor("parallel()")
        if cursor.kind in ("decider", "selector"):
            raise ChartBuildError(
                f"parallel() cannot follow {cursor.kind} {cursor.name!r}; "
                "add a stage with then() first and attach the children to it"
            )
        if cursor.children:
            raise ChartBuildError(
                f"stage {cursor.name!r} already has parallel children; "
                "add a stage with then() before the next parallel()"
            )
        if not children:
            raise ChartBuildError(f"parallel() after {cursor.name!r} needs at least one child")
        for child in children:
            draft = self._child_draft(child, where=f"parallel() after {cursor.name!r}")
            if draft.id in cursor.children:
                raise ChartBuildError(f"parallel child id {draft.id!r} is used twice")
            cursor.children.append(draft.id)
        cursor.fail_fast = fail_fast
        return self

    def loop_to(self, stage_id: str) -> FlowBuilder:
        """After the current stage (or decider), go back to ``stage_id``."""
        cursor = self._require_cursor("loop_to()")
        self._check_loop_target(stage_id, f"loop_to({stage_id!r}) after {cursor.name!r}")
        if cursor.next is not None or cursor.loop_to is not None:
            raise ChartBuildError(
                f"stage {cursor.name!r} already continues; loop_to() must be its last call")
        cursor.loop_to = stage_id
        return self

    # -- branching --------------------------------------------------------------------------

    def decide(
        self,
        name: str,
        fn: StageFn | None = None,
        *,
        id: str | None = None,
        description: str | None = None,
        rules: Sequence[Rule] | None = None,
        default: str | None = None,
    ) -> BranchBuilder:
        """A decider: ``fn(scope)`` returns one branch id (or ``decide(...)``'s result).

        With ``rules=`` and ``default=`` instead of ``fn`` the decider is declarative, and
        ``build()`` checks that every rule and the default name a branch.
        """
        draft = self._branching("decider", name, fn, id, description, rules, default)
        return BranchBuilder(self, draft)

    def select(
        self,
        name: str,
        fn: StageFn | None = None,
        *,
        id: str | None = None,
        description: str | None = None,
        rules: Sequence[Rule] | None = None,
        fail_fast: bool = False,
    ) -> BranchBuilder:
        """A selector: ``fn(scope)`` returns branch ids; those branches run concurrently."""
        draft = self._branching("selector", name, fn, id, description, rules, None)
        draft.fail_fast = fail_fast
        return BranchBuilder(self, draft)

    # -- build ------------------------------------------------------------------------------

    def build(
        self, *, description: str | None = None, input_schema: Mapping[str, Any] | None = None,
        keyed_scope: bool = False,
    ) -> Chart:
        """Freeze the graph into a ``Chart``; the builder cannot be used afterwards.

        ``keyed_scope=True`` promises that no stage of this chart reads or writes state as
        ``scope.key`` (only ``scope["key"]``): its stages then get a ``KeyedScope``, whose
        attribute loads CPython can specialise (a faster step; see ``flow/_scope.py``)."""
        if self._built:
            raise ChartBuildError(
                f"chart {self._name!r} was already built; start a new flow_chart()")
        if self._root is None:
            raise ChartBuildError("empty chart; start it with flow_chart(name, fn)")
        for draft in self._drafts.values():
            if draft.kind in ("decider", "selector") and not draft.branches:
                raise ChartBuildError(
                    f"{draft.kind} {draft.name!r} has no branches; add .branch(...) before .end()"
                )
        self._built = True
        nodes = {
            d.id: Node(
                id=d.id, name=d.name, kind=d.kind, fn=d.fn, description=d.description,
                next=d.next, loop_to=d.loop_to, branches=dict(d.branches), default=d.default,
                children=tuple(d.children), fail_fast=d.fail_fast, resume=d.resume, mount=d.mount,
                keyed_scope=keyed_scope,
            )
            for d in self._drafts.values()
        }
        return Chart(
            name=self._name, root=self._root, nodes=nodes, description=description,
            input_schema=dict(input_schema) if input_schema else None,
        )

    # -- internals --------------------------------------------------------------------------

    def _add_linear(
        self, name: str, fn: StageFn | None, *, id: str | None, description: str | None,
        resume: StageFn | None,
    ) -> FlowBuilder:
        draft = self._new_draft(id or name, name, "stage", fn, description, resume=resume)
        self._link(draft)
        return self

    def _branching(
        self, kind: NodeKind, name: str, fn: StageFn | None, id: str | None,
        description: str | None, rules: Sequence[Rule] | None, default: str | None,
    ) -> _Draft:
        if fn is not None and rules is not None:
            raise ChartBuildError(f"{kind} {name!r}: pass fn or rules=, not both")
        if fn is None and rules is None:
            raise ChartBuildError(f"{kind} {name!r} needs fn or rules= to choose a branch")
        if rules is not None:
            if kind == "decider" and default is None:
                raise ChartBuildError(
                    f"decider {name!r} has rules but no default; add default='<branch id>' "
                    "for when no rule matches"
                )
            frozen_rules = list(rules)
            if kind == "decider":
                fallback = default or ""

                def by_rules(scope: Scope) -> Decision:
                    return decide(scope, frozen_rules, default=fallback)

                fn = by_rules
            else:

                def by_select_rules(scope: Scope) -> Selection:
                    return select(scope, frozen_rules)

                fn = by_select_rules
        draft = self._new_draft(id or name, name, kind, fn, description, resume=None)
        draft.rules = list(rules) if rules is not None else None
        draft.default = default
        self._link(draft)
        return draft

    def _new_draft(
        self, node_id: str, name: str, kind: NodeKind, fn: StageFn | None,
        description: str | None, *, resume: StageFn | None,
    ) -> _Draft:
        if self._built:
            raise ChartBuildError(
                f"chart {self._name!r} was already built; start a new flow_chart()")
        if not isinstance(node_id, str) or not node_id or "#" in node_id:
            raise ChartBuildError(f"stage id {node_id!r} must be a non-empty string without '#'")
        if node_id in self._drafts:
            raise ChartBuildError(
                f"stage id {node_id!r} is used twice in chart {self._name!r}; "
                "give one of them a different id= (names may repeat, ids may not)"
            )
        if fn is None and kind != "subflow":
            raise ChartBuildError(f"stage {name!r} has no function; pass fn")
        if fn is not None and not callable(fn):
            raise ChartBuildError(f"stage {name!r}: fn must be callable, got {fn!r}")
        if resume is not None and not callable(resume):
            raise ChartBuildError(f"stage {name!r}: resume must be callable, got {resume!r}")
        draft = _Draft(id=node_id, name=name, kind=kind, fn=fn, description=description,
                       resume=resume)
        self._drafts[node_id] = draft
        self._order.append(node_id)
        return draft

    def _link(self, draft: _Draft) -> None:
        cursor = self._cursor
        if cursor is None:
            self._root = draft.id
        else:
            if cursor.loop_to is not None:
                raise ChartBuildError(
                    f"stage {cursor.name!r} loops back to {cursor.loop_to!r}; "
                    f"nothing can follow it, so {draft.name!r} would never run"
                )
            cursor.next = draft.id
        self._cursor = draft

    def _require_cursor(self, what: str) -> _Draft:
        if self._cursor is None:
            raise ChartBuildError(f"{what} needs a stage first; start with flow_chart(name, fn)")
        return self._cursor

    def _check_loop_target(self, target: str, where: str) -> None:
        draft = self._drafts.get(target)
        if draft is None or target not in self._order:
            known = ", ".join(repr(i) for i in self._order if "/" not in i)
            raise ChartBuildError(
                f"{where}: no stage with id {target!r} was declared before it "
                f"(known ids: {known}); loop targets are stage ids, not names"
            )

    def _mount_draft(
        self, id: str, chart: Chart, *, name: str | None, description: str | None,
        input: Callable[[Any], Mapping[str, Any] | None] | None,
        output: Callable[[Any], Mapping[str, Any] | None] | None,
        propagate_break: bool, array_merge: Literal["concat", "replace"],
    ) -> _Draft:
        if not isinstance(chart, Chart):
            raise ChartBuildError(f"subflow {id!r} needs a built Chart, got {type(chart).__name__}")
        if array_merge not in ("concat", "replace"):
            raise ChartBuildError(f"subflow {id!r}: array_merge must be 'concat' or 'replace'")
        prefix = f"{id}/"
        mount = Mount(
            root=prefix + chart.root, title=chart.name, input=input, output=output,
            propagate_break=propagate_break, array_merge=array_merge, chart=chart,
        )
        draft = self._new_draft(id, name or chart.name, "subflow", None,
                                description or chart.description, resume=None)
        draft.mount = mount
        for node in chart.nodes.values():
            inner = _Draft(
                id=prefix + node.id, name=node.name, kind=node.kind, fn=node.fn,
                description=node.description,
                next=prefix + node.next if node.next else None,
                loop_to=prefix + node.loop_to if node.loop_to else None,
                branches={b: prefix + n for b, n in node.branches.items()},
                default=node.default, children=[prefix + c for c in node.children],
                fail_fast=node.fail_fast, resume=node.resume,
                mount=_prefixed_mount(node.mount, prefix),
            )
            if inner.id in self._drafts:
                raise ChartBuildError(f"subflow {id!r} stage id {inner.id!r} collides")
            self._drafts[inner.id] = inner
        return draft

    def _child_draft(self, spec: Any, *, where: str) -> _Draft:
        if isinstance(spec, tuple) and len(spec) in (2, 3) and isinstance(spec[1], Chart):
            mount: Mapping[str, Any] = spec[2] if len(spec) == 3 else {}
            return self._mount_draft(spec[0], spec[1], name=mount.get("name"),
                                     description=mount.get("description"),
                                     input=mount.get("input"), output=mount.get("output"),
                                     propagate_break=bool(mount.get("propagate_break", False)),
                                     array_merge=mount.get("array_merge", "concat"))
        if isinstance(spec, tuple) and len(spec) in (2, 3) and isinstance(spec[0], str):
            options: Mapping[str, Any] = spec[2] if len(spec) == 3 else {}
            return self._new_draft(options.get("id", spec[0]), spec[0], "stage", spec[1],
                                   options.get("description"), resume=options.get("resume"))
        raise ChartBuildError(
            f"{where}: child {spec!r} must be (name, fn), (name, fn, options), (id, chart) or "
            "(id, chart, mount options)"
        )


def _prefixed_mount(mount: Mount | None, prefix: str) -> Mount | None:
    if mount is None:
        return None
    return Mount(
        root=prefix + mount.root, title=mount.title, input=mount.input, output=mount.output,
        propagate_break=mount.propagate_break, array_merge=mount.array_merge, chart=mount.chart,
    )


class BranchBuilder:
    """The branch list of a decider or selector; ``end()`` returns to the chart."""

    def __init__(self, parent: FlowBuilder, draft: _Draft) -> None:
        self._parent = parent
        self._draft = draft

    def branch(
        self,
        branch_id: str,
        name: str | None = None,
        fn: StageFn | Chart | None = None,
        *,
        id: str | None = None,
        description: str | None = None,
        loop_to: str | None = None,
        resume: StageFn | None = None,
        input: Callable[[Any], Mapping[str, Any] | None] | None = None,
        output: Callable[[Any], Mapping[str, Any] | None] | None = None,
        propagate_break: bool = False,
    ) -> BranchBuilder:
        """A branch ``branch_id`` running ``fn(scope)``, or a subflow when ``fn`` is a Chart."""
        owner = self._draft
        if branch_id in owner.branches:
            raise ChartBuildError(f"{owner.kind} {owner.name!r} already has branch {branch_id!r}")
        node_id = id or branch_id
        if isinstance(fn, Chart):
            draft = self._parent._mount_draft(
                node_id, fn, name=name, description=description, input=input, output=output,
                propagate_break=propagate_break, array_merge="concat",
            )
        else:
            draft = self._parent._new_draft(node_id, name or branch_id, "stage", fn, description,
                                            resume=resume)
        if loop_to is not None and owner.kind == "selector":
            raise ChartBuildError(
                f"branch {branch_id!r} of selector {owner.name!r} cannot loop_to: selected "
                "branches run in parallel; put the loop after the selector with .end().loop_to()"
            )
        if loop_to is not None:
            self._parent._check_loop_target(
                loop_to, f"branch {branch_id!r} of {owner.kind} {owner.name!r}"
            )
            if loop_to == draft.id:
                raise ChartBuildError(f"branch {branch_id!r} cannot loop to itself")
            draft.loop_to = loop_to
        owner.branches[branch_id] = draft.id
        return self

    def default(self, branch_id: str) -> BranchBuilder:
        """The branch to take when the decider's answer matches no branch."""
        if self._draft.kind != "decider":
            raise ChartBuildError(f"selector {self._draft.name!r} has no default; deciders do")
        self._draft.default = branch_id
        return self

    def end(self) -> FlowBuilder:
        """Close the branch list; a following ``then`` runs after the chosen branch."""
        owner = self._draft
        if not owner.branches:
            raise ChartBuildError(
                f"{owner.kind} {owner.name!r} requires at least one branch; add .branch(...)"
            )
        known = list(owner.branches)
        if owner.default is not None and owner.default not in owner.branches:
            raise ChartBuildError(
                f"decider {owner.name!r} default {owner.default!r} is not one of its branches "
                f"({', '.join(known)}); add .branch({owner.default!r}, ...) or fix the default"
            )
        if owner.rules is not None:
            check_rules(owner.rules, known, where=f"{owner.kind} {owner.name!r}")
        return self._parent

    def build(self, *args: object, **kwargs: object) -> NoReturn:
        """Not here: the branch list is still open (a common slip, so it gets its own message)."""
        raise ChartBuildError(
            f"{self._draft.kind} {self._draft.name!r} still has its branch list open; "
            "call .end() before .build()")
