"""The trace contract holds house-wide: no module names a recorded key, stage id or prefix itself.

Every run-state key, stage id and id prefix is declared once in ``agentfootprint.runs.trace``.
This test walks every module of the package (examples and tests are user code and exempt) and
fails on a string constant that names a declared one where it is used as one: a state subscript
or ``.get``, an argument of ``value_at``/``last_writer``/``value_of``, a comparison with a stage
id, a stage's ``id=``, a list of keys, or text that starts with a declared id prefix.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfootprint.runs import trace

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "agentfootprint"
CONTRACT = PACKAGE / "runs" / "trace.py"

STATE_NAMES = {"scope", "s", "state", "inner", "saved", "args", "resumed", "parent"}
STATE_ATTRS = {"state", "args"}
KEY_READERS = {"value_at", "last_writer", "value_of", "_input", "first_write", "writers_of",
               "value"}
MAPPING_METHODS = {"get", "pop", "setdefault"}
OWN_NAME = "# trace: own id"
"""Marks a line that uses a declared word as its own, unrelated name (a composition's stage)."""
STAGE_BUILDERS = {"then", "decide", "branch", "flow_chart", "subflow", "select", "loop",
                  "fork", "pausable"}

KEYS = {spec.name for spec in trace.declared_keys()}
STAGES = trace.declared_stage_ids()
PREFIXES = tuple(p.text for p in trace.declared_prefixes())
FAMILY_PREFIXES = tuple(f.prefix for f in trace.declared_families()) + tuple(
    f.prefix for f in trace.declared_stage_families())


def _is_state(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in STATE_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in STATE_ATTRS
    return False


def _text(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_key(text: str | None) -> bool:
    return text is not None and (text in KEYS or text.startswith(FAMILY_PREFIXES))


def _key_dict(node: ast.AST | None) -> bool:
    """A dict literal whose keys are all declared keys: run arguments or a subflow's state."""
    if not isinstance(node, ast.Dict) or not node.keys:
        return False
    return all(key is not None and _is_key(_text(key)) for key in node.keys)


def _violations(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda | ast.Return) and _key_dict(
                node.body if isinstance(node, ast.Lambda) else node.value):
            yield node.lineno, "a dict of run state built with literal keys"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "run" and node.args and _key_dict(node.args[0]):
            yield node.lineno, "run arguments built with literal keys"
        if isinstance(node, ast.Subscript) and _is_state(node.value):
            text = _text(node.slice)
            if _is_key(text):
                yield node.lineno, f"state subscript [{text!r}]"
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else (
                func.id if isinstance(func, ast.Name) else "")
            if (isinstance(func, ast.Attribute) and name in MAPPING_METHODS
                    and _is_state(func.value) and node.args and _is_key(_text(node.args[0]))):
                yield node.lineno, f".{name}({_text(node.args[0])!r})"
            if name in KEY_READERS:
                for arg in node.args:
                    if _is_key(_text(arg)):
                        yield node.lineno, f"{name}(..., {_text(arg)!r})"
            if name == "is_stage":
                for arg in node.args:
                    if _text(arg) in STAGES:
                        yield node.lineno, f"is_stage(..., {_text(arg)!r})"
            if name in STAGE_BUILDERS:
                for keyword in node.keywords:
                    if keyword.arg == "id" and _text(keyword.value) in STAGES:
                        yield keyword.value.lineno, f"{name}(id={_text(keyword.value)!r})"
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "key" for s in sides):
                for side in sides:
                    if _is_key(_text(side)):
                        yield node.lineno, f"comparison of a change's key with {_text(side)!r}"
            if any(isinstance(s, ast.Attribute) and s.attr in ("stage_id", "id") for s in sides):
                for side in sides:
                    if _text(side) in STAGES:
                        yield node.lineno, f"comparison with stage id {_text(side)!r}"
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            texts = [_text(element) for element in node.elts]
            if len(texts) >= 2 and all(t in KEYS for t in texts):
                yield node.lineno, f"a list of keys {texts!r}"
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = _text(node.values[0])
            if head is not None and head.startswith(PREFIXES + FAMILY_PREFIXES):
                yield node.lineno, f"f-string starting with {head!r}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                (node.value.startswith(PREFIXES) and len(node.value) <= 40)
                or node.value in FAMILY_PREFIXES):
            yield node.lineno, f"text naming a declared prefix {node.value!r}"


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and _text(body[0].value) is not None:
                lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return lines


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != CONTRACT)


def test_the_contract_declares_the_agent_loop() -> None:
    """The names explain reads most are declared (a guard over nothing would pass vacuously)."""
    assert {trace.HISTORY, trace.SYSTEM_PROMPT, trace.CONTEXT_EVALUATION, trace.FINAL_CONTENT,
            trace.LLM_CONTENT} <= KEYS
    assert {trace.CALL_LLM, trace.FINALIZE, trace.ROUTE, trace.TOOL_CALLS} <= STAGES
    assert trace.MEMORY_INJECTION.strip("memory:chat#msg-1-0") == "chat#msg-1-0"
    assert trace.MEMORY_RECALL.of("chat") == "memory_recall_chat"
    assert isinstance(trace.declared_key("memory_recall_chat"), trace.KeyFamily)


def test_every_declaration_names_its_kinds() -> None:
    """Each key says what it holds, in the contract's own words."""
    for spec in trace.declared_keys():
        assert spec.kinds and spec.kinds <= trace.CONTENT_KINDS, spec
        assert spec.doc, spec


def test_kinds_resolve_to_keys_and_families() -> None:
    """A kind names every key and family that can hold it; an unknown kind is refused."""
    names, prefixes = trace.keys_of_kinds({"memory_content"})
    assert {trace.HISTORY, trace.RECALL, trace.NEW_MESSAGES, trace.SYSTEM_PROMPT} <= names
    assert trace.TURN not in names
    assert trace.MEMORY_RECALL.prefix in prefixes
    with pytest.raises(ValueError, match="tool_args"):
        trace.keys_of_kinds({"tool_arguments"})


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_names_a_declared_key_itself(module: Path) -> None:
    """``module`` reads and writes recorded names through ``runs.trace``, never as literals."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    docs = _docstring_lines(tree)
    lines = module.read_text(encoding="utf-8").splitlines()
    found = [f"{module.relative_to(PACKAGE)}:{line}: {what}"
             for line, what in _violations(tree)
             if line not in docs and OWN_NAME not in lines[line - 1]]
    assert not found, "use the declaration in agentfootprint.runs.trace:\n" + "\n".join(found)
