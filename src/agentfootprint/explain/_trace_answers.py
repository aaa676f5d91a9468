"""The answers of the trace tools: each one question about a recorded run, as plain text.

``TraceAnswers`` builds the full text of every answer (the toolpack pages and caps it). It
reads values only through ``TraceView``, so they come from the commit log, scrubbed. Lookups
that fail raise ``TraceLookupError`` with the sentence the model reads instead; every answer
ends by naming the next useful call, so a model can walk the trace a slice at a time.
"""

from __future__ import annotations

from typing import Any, Final

from ..flow._causal import CausalChain, CausalNode, causal_chain
from ..flow._commitlog import Change, CommitRecord
from ..flow._values import MISSING
from ._failure import failure_of
from ._paused import pause_of
from ._trace_view import TraceLookupError, TraceView, descend, preview, render

__all__ = ["Answer", "TraceAnswers", "clamp"]

_PREVIEW: Final = 160
_SCAN_BUDGET: Final = 5000
_LISTED: Final = 40

Answer = tuple[str, str]
"""(full text, the call that fetches its next part)."""


def clamp(value: object, default: int, low: int, high: int | None) -> int:
    """``value`` as an int in ``[low, high]``; ``default`` when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return default
    if value in (float("inf"), float("-inf")):
        return default if high is None else high
    number = max(int(value), low)
    return number if high is None else min(number, high)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _change_of(record: CommitRecord, key: str) -> Change:
    return next(c for c in reversed(record.changes) if c.key == key)


def _verb(change: Change) -> str:
    if change.op == "append":
        n = len(change.value) if isinstance(change.value, list) else 1
        return f"append {n} item{'s' if n != 1 else ''}"
    return change.op


class TraceAnswers:
    """The seven answers over one view, each the full text before paging."""

    def __init__(self, view: TraceView) -> None:
        self.view = view
        self.log = view.log

    # -- run_overview ---------------------------------------------------------------------

    def overview(self) -> str:
        view, log, rec = self.view, self.log, self.view.recording
        subflows = [ns for ns in view.keys if ns]
        lines = [f'RUN {rec.run_id} — "{rec.name}" ({rec.kind} run) · status: {rec.status}',
                 f"STEPS: {len(view.steps)} executed, {len(view.runs_of)} distinct stages, "
                 f"{len(log)} commit records"
                 + (f", {len(subflows)} subflow namespace(s)" if subflows else ""),
                 "STAGES (run order · executions · step ids):"]
        failure = failure_of(rec)
        if failure is not None:
            step = failure.runtime_stage_id
            lines.insert(1, f"FAILED: {failure.error[:300]} — raised by {failure.where}; the run "
                            "gave no answer, so explain the error"
                            + (f": trace_node('{step}') shows that step" if step else ""))
        if failure is None and (paused := pause_of(rec)) is not None:
            lines.insert(1, paused.overview_line())
        for stage_id, rids in list(view.runs_of.items())[:_LISTED]:
            info = view.stage(view.steps[rids[0]][0])
            kind = f" [{info.kind}]" if info.kind in ("decider", "selector", "subflow") else ""
            about = f" — {info.description[:140]}" if info.description else ""
            ids = rids if len(rids) <= 3 else [rids[0], "…", rids[-1]]
            lines.append(f'  - {stage_id} "{info.name}"{kind} ×{len(rids)}{about}: '
                         f'{", ".join(ids)}')
        if len(view.runs_of) > _LISTED:
            lines.append(f"  … {len(view.runs_of) - _LISTED} more stages; find_in_trace('<name>')"
                         " finds them")
        loops = sorted(((len(r), s) for s, r in view.runs_of.items() if len(r) > 1),
                       reverse=True)[:5]
        if loops:
            lines.append("LOOPS: " + ", ".join(f"{s} ×{n}" for n, s in loops))
        decisions = [r for r in log.records if r.decision is not None]
        if decisions:
            lines.append(f"DECISIONS ({len(decisions)}"
                         + (", last 5" if len(decisions) > 5 else "") + "):")
            for record in decisions[-5:]:
                lines.append(f"  - {record.runtime_stage_id} → {self._chose(record)}")
        errors = [r for r in log.records if r.error]
        if errors:
            lines.append(f"ERRORS ({len(errors)}):")
            lines.extend(f"  - {r.runtime_stage_id}: {(r.error or '')[:200]}" for r in errors[:10])
        keys = list(view.keys.get("", {}))
        lines.append(f"STATE KEYS ({len(keys)}): " + ", ".join(keys[:_LISTED])
                     + (" …" if len(keys) > _LISTED else ""))
        if subflows:
            lines.append("SUBFLOW NAMESPACES: " + ", ".join(subflows[:10]))
        lines.extend(self._links())
        secret = view.secret_keys
        if secret:
            lines.append(f"REDACTED KEYS: {', '.join(secret[:20])} — their values read "
                         "[REDACTED] in every answer")
        lines.append(self._output_line())
        lines.append("⚠ NOT RECORDED: run args, env, and anything a stage computed from them "
                     "without writing it to state.")
        lines.append("NEXT: who_wrote('<key>') for a wrong value · find_in_trace('<text>') · "
                     "trace_slice('<step id>') · trace_node('<step id>')")
        return "\n".join(lines)

    def _links(self) -> list[str]:
        """Members (name → subflow) and agent-tools (call → inner run), to cross into."""
        lines = []
        members = list(self.view.run.members.values())
        if members:
            shown = ", ".join(f"{m.name} → {m.ns}" for m in members[:10])
            more = f" … {len(members) - 10} more" if len(members) > 10 else ""
            lines.append(f"MEMBERS ({len(members)}; each ran as a subflow, its steps prefixed "
                         f"by its name): {shown}{more}")
        subs = list(self.view.run.sub_runs.values())
        if subs:
            shown = ", ".join(f"{s.tool_call_id} ({s.tool}) → run {s.run_id}"
                              + ("" if s.recording is not None else " (recording not kept)")
                              for s in subs[:10])
            lines.append(f"AGENT TOOLS ({len(subs)}; each an agent run of its own, kept under "
                         f"'sub_recordings'): {shown}")
        return lines

    def _chose(self, record: CommitRecord) -> str:
        decision = self.view.scrub(record.decision or {})
        chosen = decision.get("chosen", decision.get("selected"))
        text = render(chosen)
        for rule in (decision.get("evidence") or {}).get("rules", ()):
            if isinstance(rule, dict) and rule.get("matched") and rule.get("label"):
                return f'{text} (rule "{str(rule["label"])[:100]}")'
        if decision.get("fallback") is not None:
            return f"{text} (no branch matched; default '{decision['fallback']}')"
        return text

    def _output_line(self) -> str:
        view, log = self.view, self.log
        output = view.recording.output
        if output is None:
            return "OUTPUT: none recorded"
        last = len(log) - 1
        same = [(view.writes.get(("", key), [-1])[-1], key) for key in view.keys.get("", {})
                if not view.is_secret(key)
                and log.value_at(key, last, default=MISSING) == output]
        if same:
            idx, key = max(same)
            by = f", last written by {log[idx].runtime_stage_id}" if idx >= 0 else ""
            return f"OUTPUT: the value of '{key}'{by} → get_value('{key}')"
        return ("OUTPUT: not served — the run's return value never entered the commit log, so "
                "its redaction cannot be checked; read the last steps' writes instead")

    # -- find_in_trace --------------------------------------------------------------------

    def find(self, args: dict[str, Any]) -> Answer:
        query = _text(args.get("query"))
        if len(query) < 2:
            raise TraceLookupError(
                "find_in_trace needs a query of at least 2 characters: a stage name, a key or "
                "some text from a value.")
        low = query[:200].lower()
        max_hits = clamp(args.get("max_hits"), 10, 1, 25)
        view, log = self.view, self.log
        hits: list[str] = []
        total = 0

        def hit(line: str) -> None:
            nonlocal total
            total += 1
            if len(hits) < max_hits:
                hits.append(line)

        for stage_id, rids in view.runs_of.items():
            info = view.stage(view.steps[rids[0]][0])
            if low in f"{stage_id}\n{info.name}\n{info.description}".lower():
                hit(f'- stage {stage_id} "{info.name}" ran ×{len(rids)} → '
                    f"trace_node('{rids[-1]}')")
        for ns, keys in view.keys.items():
            for key in keys:
                if low in key.lower():
                    n = len(view.writes.get((ns, key), ()))
                    hit(f"- key '{key}' ({view.namespace_label(ns)}, {n} write(s)) → "
                        f"who_wrote('{key}')")
        for ns, state in log.initial.items():
            for key in state:
                window = _window(render(view.value(key, -1, ns)), low)
                if window:
                    hit(f"- initial state {key}: {window} → get_value('{key}', at='initial')")
        scanned = 0
        exhausted = False
        for record in log.records:
            rid = record.runtime_stage_id
            for change in record.changes:
                scanned += 1
                window = _window(render(view.written(change)), low)
                if window:
                    hit(f"- {rid} wrote {change.key}: {window} → "
                        f"get_value('{change.key}', at='{rid}')")
            extra = render(view.scrub(record.decision)) if record.decision else ""
            window = _window(f"{extra} {record.error or ''}", low)
            if window:
                hit(f"- {rid} decision/error: {window} → trace_node('{rid}')")
            if scanned >= _SCAN_BUDGET:
                exhausted = record.idx < len(log) - 1
                break
        cut = (f"⚠ scan budget reached after {scanned} committed values; later steps were not "
               "searched (not found so far) — narrow with who_wrote('<key>').") if exhausted \
            else ""
        if not total:
            lines = ["No hit for your query in stage names, key names, committed values, "
                     "decisions or errors. Not recorded at all: run args, env, the run's "
                     "return value; redacted values read [REDACTED]. Try another word, or "
                     "run_overview for the keys."]
        else:
            lines = [f"{total} hit(s) for your query"
                     + (f" (showing the first {len(hits)})" if total > len(hits) else "") + ":",
                     *hits]
            if total > len(hits):
                lines.append(f"… {total - len(hits)} more: narrow the query or raise max_hits "
                             "(at most 25).")
        if cut:
            lines.append(cut)
        return "\n".join(lines), "find_in_trace (same query)"

    # -- trace_node -----------------------------------------------------------------------

    def node(self, args: dict[str, Any]) -> Answer:
        view = self.view
        rid, records, note = view.resolve(args.get("runtime_stage_id"))
        first = records[0]
        info = view.stage(first)
        lines = [note] if note else []
        lines.append(f'STEP {rid} — "{first.stage}" ({info.kind}) · execution '
                     f"{first.loop_pass + 1} of stage '{first.stage_id}'")
        if info.description:
            lines.append(f"about: {info.description[:140]}")
        if first.control:
            decider = next((r for r in reversed(view.steps.get(first.control, ()))
                            if r.idx < first.idx), None)
            why = f" — chose {self._chose(decider)}" if decider is not None else ""
            lines.append(f"routed here by {first.control}{why}")
        elif first.parent:
            lines.append(f"after: {first.parent}")
        for record in records:
            if len(records) > 1:
                lines.append(f"[{record.kind} record, {view.namespace_label(record.ns)}]")
            lines.extend(self._record_lines(record))
        written = [c.key for r in records for c in r.changes]
        nxt = f"NEXT: trace_slice('{rid}') for what it depends on"
        if written:
            nxt += f" · get_value('{written[0]}', at='{rid}') for a full value"
        lines.append(nxt)
        return "\n".join(lines), f"trace_node('{rid}')"

    def _record_lines(self, record: CommitRecord) -> list[str]:
        view, log = self.view, self.log
        rid = record.runtime_stage_id
        ns = record.read_namespace
        lines = [f"READ ({len(record.reads)}):" if record.reads else "READ: no tracked state"]
        for key in record.reads[:30]:
            writer = log.last_writer(key, record.idx, ns=ns)
            if writer is not None:
                source = f"← {view.label(log[writer].runtime_stage_id)}"
            elif key in log.initial.get(ns, {}):
                source = "← initial state (run input)"
            else:
                source = "← absent when read ⚠"
            shown = preview(view.value(key, record.idx - 1, ns), 60)
            lines.append(f"  - {key} = {shown} {source}")
        if len(record.reads) > 30:
            lines.append(f"  … {len(record.reads) - 30} more reads")
        lines.append(f"WROTE ({len(record.changes)}):" if record.changes else "WROTE: nothing")
        for change in record.changes[:20]:
            shown = "" if change.op == "delete" else ": " + preview(
                view.written(change), _PREVIEW, more=f"get_value('{change.key}', at='{rid}')")
            lines.append(f"  - {change.key} ({_verb(change)}){shown}")
        if len(record.changes) > 20:
            lines.append(f"  … {len(record.changes) - 20} more writes")
        if record.decision is not None:
            lines.extend(self._decision_lines(record))
        if record.emits:
            names = list(dict.fromkeys(name for name, _ in record.emits))
            lines.append(f"EMITTED ({len(record.emits)}): " + ", ".join(names[:8])
                         + (" …" if len(names) > 8 else ""))
        if record.error:
            lines.append(f"ERROR: {record.error[:400]}")
        if record.break_reason is not None:
            lines.append(f"BREAK: stopped the run here {record.break_reason[:200]!r}")
        if record.paused:
            lines.append("PAUSED: the run paused at this step")
        if not record.reads and record.changes and record.kind == "stage":
            lines.append("⚠ read no tracked state: what it wrote came from run args, env, "
                         "constants or code, which the trace does not record.")
        secret = [k for k in record.reads if view.is_secret(k)]
        if secret:
            lines.append(f"⚠ read redacted key(s) {', '.join(secret[:8])}: what it wrote may "
                         "carry data derived from them.")
        return lines

    def _decision_lines(self, record: CommitRecord) -> list[str]:
        decision = self.view.scrub(record.decision or {})
        lines = [f"DECISION: chose {self._chose(record)}"]
        for rule in (decision.get("evidence") or {}).get("rules", ())[:10]:
            if not isinstance(rule, dict):
                continue
            mark = "✓" if rule.get("matched") else "✗"
            name = f'"{rule["label"]}"' if rule.get("label") else f"rule {rule.get('rule')}"
            parts = [f"{c.get('key')} {c.get('op')} {render(c.get('threshold'))} "
                     f"(actual {c.get('actual')})"
                     for c in rule.get("conditions", ()) if isinstance(c, dict)]
            parts += [f"{i.get('key')}={i.get('value')}"
                      for i in rule.get("inputs", ()) if isinstance(i, dict)]
            if rule.get("error"):
                parts.append(f"error: {rule['error']}")
            lines.append(f"  {mark} {name} → {rule.get('branch')}: {'; '.join(parts)}"[:300])
        return lines

    # -- trace_slice ----------------------------------------------------------------------

    def slice(self, args: dict[str, Any]) -> Answer:
        view, log = self.view, self.log
        rid, records, note = view.resolve(args.get("runtime_stage_id"))
        depth = clamp(args.get("max_depth"), 6, 1, 20)
        nodes = clamp(args.get("max_nodes"), 25, 2, 100)
        key = _text(args.get("key"))
        root = records[-1]
        lines = [note] if note else []
        lines.append(f"SLICE of {rid}: the steps whose writes (via key) or decisions ([control])"
                     f" it depends on · max_depth {depth}, max_nodes {nodes}")
        again = f"trace_slice('{rid}'" + (f", key='{key}')" if key else ")")
        if not key:
            lines.extend(self._chain_lines(causal_chain(log, rid, max_depth=depth,
                                                        max_nodes=nodes), 0, ""))
        else:
            if key not in root.reads:
                reads = ", ".join(root.reads[:30]) or "nothing tracked"
                raise TraceLookupError(
                    f"{rid} did not read a key by that name; it read: {reads}. Drop key= to "
                    "slice all its inputs, or who_wrote('<key>') for any key's writer.")
            ns = root.read_namespace
            lines.append(f'{root.stage} ({rid}) — only its read of \'{key}\'')
            writer = log.last_writer(key, root.idx, ns=ns)
            if writer is None:
                lines.append(f"  ← via {key}: no step wrote it before {rid}; it came from the "
                             "initial state (run input) or was absent ⚠")
            else:
                chain = causal_chain(log, log[writer].runtime_stage_id, max_depth=depth,
                                     max_nodes=nodes)
                lines.extend(self._chain_lines(chain, 1, f"via {key}"))
        lines.append("NEXT: trace_node('<step id>') shows a step's values · key= follows one "
                     "input")
        return "\n".join(lines), again

    def _chain_lines(self, chain: CausalChain, level: int, via: str) -> list[str]:
        """The slice as an indented tree; edges to one cause are merged into one line."""
        initial = self.log.initial
        lines: list[str] = []
        printed: set[int] = set()
        stack: list[tuple[CausalNode, int, str]] = [(chain.root, level, via)]
        while stack:
            node, depth, link = stack.pop()
            pad = "  " * depth
            rid = node.runtime_stage_id
            arrow = f" ← {link}" if link else ""
            if node.record.idx in printed:
                lines.append(f"{pad}↳ {rid}{arrow} (see above)")
                continue
            printed.add(node.record.idx)
            keys = node.keys_written
            wrote = f" [wrote: {', '.join(keys[:8])}{', …' if len(keys) > 8 else ''}]" \
                if keys else ""
            lines.append(f"{pad}{node.record.stage} ({rid}){arrow}{wrote}")
            unwritten = chain.initial_reads.get(rid)
            if unwritten:
                seeded = initial.get(node.record.read_namespace, {})
                named = [f"{k} ({'initial state' if k in seeded else 'absent'})"
                         for k in unwritten[:8]]
                lines.append(f"{pad}  ⚠ read with no writer before it: {', '.join(named)}")
            elif not node.record.reads and node.record.kind == "stage" and keys:
                lines.append(f"{pad}  ⚠ read no tracked state — its inputs were run args, env "
                             "or code")
            links: dict[int, tuple[CausalNode, list[str]]] = {}
            for edge in node.causes:
                text = f"[control: {edge.key}]" if edge.kind == "control" else edge.key
                links.setdefault(edge.node.record.idx, (edge.node, []))[1].append(text)
            for cause, texts in reversed(links.values()):
                data = [t for t in texts if not t.startswith("[control: ")]
                control = [t for t in texts if t.startswith("[control: ")]
                parts = ([f"via {', '.join(data[:6])}{', …' if len(data) > 6 else ''}"]
                         if data else []) + control
                stack.append((cause, depth + 1, "; ".join(parts)))
        if chain.truncated:
            why = " and ".join(w for w, cut in (("max_depth", chain.truncated_by_depth),
                                                ("max_nodes", chain.truncated_by_nodes)) if cut)
            lines.append(f"⚠ slice cut by {why}: older causes exist beyond it; raise them or "
                         "slice from a deeper step")
        return lines

    # -- who_wrote / get_value ------------------------------------------------------------

    def who_wrote(self, args: dict[str, Any]) -> Answer:
        view, log = self.view, self.log
        at = _text(args.get("at"))
        before: int | None = None
        prefer: str | None = None
        lines: list[str] = []
        rid = ""
        if at:
            rid, records, note = view.resolve(at)
            before, prefer = records[0].idx, records[0].read_namespace
            if note:
                lines.append(note)
        ns, top, path = view.locate(args.get("key"), prefer)
        name = self._dotted(top, path, ns, len(log) - 1 if before is None else before - 1)
        where = f" before {rid}" if rid else ""
        if path:
            lines.append(f"(writes are recorded per top-level key: '{top}' holds '{name}')")
        every = view.writes.get((ns, top), [])
        idxs = [i for i in every if before is None or i < before]
        if not idxs:
            if top in log.initial.get(ns, {}):
                lines.append(f"'{top}' was not written by any step{where}; it was in the initial "
                             f"state (run input): {preview(view.value(top, -1, ns), _PREVIEW)}")
            else:
                lines.append(f"no step wrote '{top}'{where} ({view.namespace_label(ns)}).")
            later = [i for i in every if before is not None and i >= before]
            if later:
                lines.append(f"It is first written later, by "
                             f"{view.label(log[later[0]].runtime_stage_id)}.")
            return "\n".join(lines), f"who_wrote('{top}')"
        last = log[idxs[-1]]
        change = _change_of(last, top)
        value = self._wrote(last, top, ns, path)
        writer = last.runtime_stage_id
        more = f"get_value('{name}', at='{writer}')"
        shown = "(deleted)" if change.op == "delete" else preview(value, _PREVIEW, more=more)
        lines.append(f"'{name}'{where} ({view.namespace_label(ns)}) was last written by "
                     f"{view.label(writer)} ({_verb(change)}): {shown}")
        if len(idxs) > 1:
            earlier = idxs[:-1][-5:]
            lines.append(f"earlier writes ({len(earlier)} of {len(idxs) - 1}, latest first):")
            for idx in reversed(earlier):
                record = log[idx]
                old = self._wrote(record, top, ns, path)
                lines.append(f"  - {view.label(record.runtime_stage_id)} "
                             f"({_verb(_change_of(record, top))}): {preview(old, 60)}")
        elif top in log.initial.get(ns, {}):
            lines.append(f"before that it held its initial value: "
                         f"{preview(descend(view.value(top, -1, ns), path), 60)}")
        if not last.reads and last.kind == "stage":
            lines.append(f"⚠ {writer} read no tracked state: its inputs (run args, env, "
                         "constants) are not recorded.")
        secret = [k for k in last.reads if view.is_secret(k)]
        if secret:
            lines.append(f"⚠ {writer} read redacted key(s) {', '.join(secret[:8])}.")
        lines.append(f"NEXT: trace_node('{writer}') · trace_slice('{writer}')")
        return "\n".join(lines), f"who_wrote('{name}')"

    def _wrote(self, record: CommitRecord, key: str, ns: str, path: list[str]) -> Any:
        """What ``record`` wrote: an append's tail (for a whole key), else the value after."""
        change = _change_of(record, key)
        if change.op == "append" and not path:
            return self.view.written(change)
        return descend(self.view.value(key, record.idx, ns), path)

    def get_value(self, args: dict[str, Any]) -> Answer:
        view, log = self.view, self.log
        at = _text(args.get("at"))
        prefer: str | None = None
        note = ""
        if not at:
            idx, where, at_arg = len(log) - 1, "at the end of the run", ""
        elif at == "initial":
            idx, where, at_arg = -1, "in the initial state (run input)", ", at='initial'"
        else:
            rid, records, note = view.resolve(at)
            idx, prefer = records[-1].idx, records[-1].ns
            where, at_arg = f"once {rid} committed", f", at='{rid}'"
        ns, top, path = view.locate(args.get("key"), prefer)
        value = view.value(top, idx, ns)
        head = [note] if note else []
        if value is MISSING:
            later = [i for i in view.writes.get((ns, top), ()) if i > idx]
            text = f"'{top}' had no value {where} ({view.namespace_label(ns)})."
            if later:
                first = log[later[0]].runtime_stage_id
                text += f" It is first written by {first} → get_value('{top}', at='{first}')"
            return "\n".join([*head, text]), f"get_value('{top}'{at_arg})"
        name = self._dotted(top, path, ns, idx)
        body = render(descend(value, path))
        writers = [i for i in view.writes.get((ns, top), ()) if i <= idx]
        source = f"last written by {log[writers[-1]].runtime_stage_id}" if writers \
            else "initial value"
        head.append(f"'{name}' {where} ({view.namespace_label(ns)}; {source}; "
                    f"{len(body)} chars):")
        return "\n".join([*head, body]), f"get_value('{name}'{at_arg})"

    def _dotted(self, top: str, path: list[str], ns: str, idx: int) -> str:
        """``top.path`` after checking the path exists (so nothing made up is echoed)."""
        if not path:
            return top
        value = self.view.value(top, max(idx, -1), ns)
        for cut in range(len(path)):
            if descend(value, path[: cut + 1]) is MISSING:
                inner = descend(value, path[:cut])
                fields = list(inner)[:12] if isinstance(inner, dict) else \
                    [f"0..{len(inner) - 1}"] if isinstance(inner, list) and inner else []
                where = ".".join([top, *path[:cut]])
                raise TraceLookupError(
                    f"'{where}' has no field by that name there"
                    + (f"; its fields: {', '.join(map(str, fields))}" if fields else "")
                    + f". get_value('{where}') shows the whole value.")
        return ".".join([top, *path])

    # -- inspect_tool_call ----------------------------------------------------------------

    def tool_call(self, args: dict[str, Any]) -> Answer:
        calls = self.view.tool_calls()
        wanted = _text(args.get("tool_call_id"))
        call = calls.get(wanted)
        if call is None:
            if not calls and self.view.is_secret("llm_tool_calls"):
                raise TraceLookupError("this run's tool calls are redacted ('llm_tool_calls' is "
                                       "a redacted key), so they cannot be inspected.")
            if not calls:
                kind = " (a flow run: tool call ids exist in agent runs)" \
                    if self.view.recording.kind == "flow" else ""
                raise TraceLookupError(f"this run recorded no tool calls{kind}.")
            known = [f"{cid} ({c['name']}) at {c['proposed_by']}" for cid, c in calls.items()]
            near = self.view.near(wanted, list(calls))
            raise TraceLookupError(
                "unknown tool_call_id."
                + (f" Closest: {', '.join(near)}." if near else "")
                + f" This run's tool calls ({len(calls)}): {'; '.join(known[:8])}"
                + (" …" if len(known) > 8 else "") + ".")
        return self._tool_call_text(wanted, call), f"inspect_tool_call('{wanted}')"

    def _tool_call_text(self, cid: str, call: dict[str, Any]) -> str:
        view = self.view
        lines = [f"TOOL CALL {cid} — tool '{call['name']}'",
                 f"proposed by the model at {call['proposed_by']} with args: "
                 f"{preview(call['args'], 400)}"]
        step = call.get("step")
        lines.append(f"ran at: {view.label(step)}" if step else
                     "ran at: ⚠ no step recorded running it (the run stopped before its batch)")
        rows = call.get("ledger", [])
        changed = [r for r in rows if r.get("moment") == "before_tool"
                   and r.get("decision") == "replace"]
        if changed:
            row = changed[-1]
            lines.append(f"ran with: {preview(row.get('after'), 400)} — CHANGED at before_tool "
                         f"by '{row.get('rule')}': {str(row.get('reason') or '')[:200]!r}. The "
                         "model proposed the args above; the tool ran on these.")
        elif step:
            lines.append("ran with: the args the model proposed (no rule changed them)")
        for row in rows:
            if row not in changed:
                lines.append(f"rule '{row.get('rule')}' at {row.get('moment')}: "
                             f"{row.get('decision')} — {str(row.get('reason') or '')[:200]}")
        status = call.get("status")
        outcome = {"success": "ok", "error": "error (the tool raised)",
                   "invalid": "invalid arguments (not run)", "unknown": "unknown tool (not run)",
                   "denied": "denied (not run, or its result was refused)"}
        lines.append(f"outcome: {outcome.get(status, status) if status else '⚠ unknown'}")
        for issue in call.get("issues", ())[:10]:
            if isinstance(issue, dict):
                lines.append(f"  ⚠ argument '{issue.get('path') or 'arguments'}': expected "
                             f"{issue.get('expected')}, got {issue.get('got')}")
        result = call.get("result", MISSING)
        if result is MISSING:
            lines.append("result: ⚠ not found in the conversation")
        else:
            more = f"get_value('history', at='{step}')" if step else ""
            lines.append(f"result: {preview(result, 400, more=more)}")
        lines.append("duration: ⚠ not recorded (the commit log has no clock)")
        lines.append("⚠ boundary: what happened inside the tool is not traced; only its "
                     "arguments, rules, outcome and result are.")
        return "\n".join(lines)


def _window(text: str, low: str, radius: int = 55) -> str:
    """``±radius`` chars of ``text`` around the first match of ``low``, one line; or ``""``."""
    pos = text.lower().find(low)
    if pos < 0:
        return ""
    start, end = max(0, pos - radius), min(len(text), pos + len(low) + radius)
    more = text.lower().count(low, pos + len(low))
    snippet = text[start:end].replace("\n", " ")
    return (("…" if start else "") + snippet + ("…" if end < len(text) else "")
            + (f" (+{more} more in this value)" if more else ""))
