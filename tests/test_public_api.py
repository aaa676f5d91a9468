"""The public surface: __all__ is sorted, resolves, and lists everything public (like httpx)."""

from __future__ import annotations

import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = sorted(
    ".".join(init.parent.relative_to(SRC).parts)
    for init in (SRC / "agentfootprint").rglob("__init__.py"))
"""Every namespace of the package: one drift test covers them all."""

MAX_PUBLIC_NAMES = {
    "agentfootprint": 33,
    "agentfootprint.agent": 11,
    "agentfootprint.audit": 3,
    "agentfootprint.compose": 14,
    "agentfootprint.distributed": 9,
    "agentfootprint.context": 4,
    "agentfootprint.events": 8,
    "agentfootprint.explain": 18,
    "agentfootprint.explain.report": 0,
    "agentfootprint.flow": 16,
    "agentfootprint.lint": 5,
    "agentfootprint.memory": 18,
    "agentfootprint.memory.embedding": 4,
    "agentfootprint.memory.stores": 0,
    "agentfootprint.observe": 3,
    "agentfootprint.providers": 14,
    "agentfootprint.rag": 12,
    "agentfootprint.runs": 6,
    "agentfootprint.serve": 14,
    "agentfootprint.tools": 4,
}
"""The most names each namespace may export (a namespace not listed may export none)."""

DEMOTED: dict[str, dict[str, str]] = {
    "agentfootprint.agent": {
        **dict.fromkeys((
            "Agent", "Governance", "LLMCall", "Limits", "ModelSettings", "RunResult", "Tracing",
            "check_in_approved", "check_in_declined",
        ), "agentfootprint"),
        "WRAP_UP_INSTRUCTION": "agentfootprint.agent._loop",
        "restoring": "agentfootprint.agent._window",
        "windowed_messages": "agentfootprint.runs._window",
    },
    "agentfootprint.compose": {
        "Composition": "agentfootprint.compose._base",
        "Pattern": "agentfootprint.compose._pattern",
    },
    "agentfootprint.context": {
        **dict.fromkeys((
            "define_fact", "define_injection", "define_instruction", "define_skill",
            "define_steering",
        ), "agentfootprint"),
        "evaluate_injections": "agentfootprint.context._injection",
    },
    "agentfootprint.events": {
        **dict.fromkeys(("full_name", "payload_model"), "agentfootprint.events._catalogue"),
        **dict.fromkeys(("EventBridge", "EventDispatcher"), "agentfootprint.events._dispatcher"),
    },
    "agentfootprint.explain": {
        "Hop": "agentfootprint.explain._backtrack",
        **dict.fromkeys(("ChatTurn", "TurnReason", "TurnRerun"), "agentfootprint.explain._chat"),
        "dropped_candidates": "agentfootprint.explain._dropped",
        **dict.fromkeys((
            "content_word_embedder", "lexical_overlap", "list_influence_strategies",
            "rank_suspects", "ranking_confidence",
        ), "agentfootprint.explain._influence"),
        **dict.fromkeys((
            "bisect_culprits", "rerun_without_sources",
        ), "agentfootprint.explain._whatif"),
        **dict.fromkeys(("Suspect", "suspects_of"), "agentfootprint.explain._suspects"),
        **dict.fromkeys(("TRACE_TOOL_NAMES", "call_trace_tool"),
                        "agentfootprint.explain._toolpack"),
    },
    "agentfootprint.explain.report": {
        **dict.fromkeys(("render_html_report", "write_html_report"), "agentfootprint.explain"),
    },
    "agentfootprint.flow": {
        **dict.fromkeys(("BranchBuilder", "FlowBuilder"), "agentfootprint.flow._builder"),
        **dict.fromkeys((
            "CausalEdge", "CausalNode", "format_causal_chain",
        ), "agentfootprint.flow._causal"),
        "Node": "agentfootprint.flow._chart",
        "load_checkpoint": "agentfootprint.flow._checkpoint",
        **dict.fromkeys(("Change", "CommitLog", "CommitRecord"), "agentfootprint.flow._commitlog"),
        "NarrativeEntry": "agentfootprint.flow._narrative",
        "Pause": "agentfootprint.flow._pause",
        **dict.fromkeys(("Deferred", "ObserverFailure"), "agentfootprint.flow._recorders"),
        **dict.fromkeys(("REDACTED", "RedactionPolicy"), "agentfootprint.flow._redact"),
    },
    "agentfootprint.memory": {
        **dict.fromkeys(("load_snapshot", "write_snapshot"), "agentfootprint.memory._causal"),
        **dict.fromkeys((
            "Embedder", "minilm_embedder", "mock_embedder", "openai_embedder",
        ), "agentfootprint.memory.embedding"),
        **dict.fromkeys(("Tier", "turn_of"), "agentfootprint.memory._entry"),
        **dict.fromkeys((
            "identity_namespace", "parse_namespace",
        ), "agentfootprint.memory._identity"),
        "write_messages": "agentfootprint.memory._stages",
        **dict.fromkeys((
            "MemoryPage", "ScoredEntry", "StoreCapabilities", "VectorSearchStore",
        ), "agentfootprint.memory._store"),
        "list_memory_strategies": "agentfootprint.memory._strategies",
        **dict.fromkeys(("max_stored_turn", "normalize_host_turn"), "agentfootprint.memory._turn"),
    },
    "agentfootprint.memory.embedding": {
        **dict.fromkeys((
            "checked_texts", "embedder_fingerprint",
        ), "agentfootprint.memory.embedding._base"),
        "MiniLMEmbedder": "agentfootprint.memory.embedding._minilm",
        **dict.fromkeys((
            "MockEmbedder", "hash_bag_of_words",
        ), "agentfootprint.memory.embedding._mock"),
        "OpenAIEmbedder": "agentfootprint.memory.embedding._openai",
    },
    "agentfootprint.memory.stores": {
        **dict.fromkeys((
            "InMemoryStore", "PostgresStore", "RedisStore", "SQLiteStore",
        ), "agentfootprint.memory"),
    },
    "agentfootprint.providers": {
        **dict.fromkeys((
            "Message", "StreamChunk", "ToolCall", "ToolSchema", "Usage",
        ), "agentfootprint.providers._base"),
    },
    "agentfootprint.rag": {
        **dict.fromkeys((
            "DEFAULT_MAX_CHARS", "split_document", "split_documents",
        ), "agentfootprint.rag._chunking"),
        **dict.fromkeys(("RAG_HEADER", "render_sources"), "agentfootprint.rag._define"),
        **dict.fromkeys((
            "CHUNK_KIND", "Splitter", "require_vector_search",
        ), "agentfootprint.rag._index"),
        **dict.fromkeys((
            "DEFAULT_MAX_BYTES", "MARKDOWN_SUFFIXES", "TEXT_SUFFIXES",
        ), "agentfootprint.rag._loaders"),
        **dict.fromkeys((
            "DEFAULT_THRESHOLD", "DropReason", "RetrievedChunk",
        ), "agentfootprint.rag._retrieve"),
    },
    "agentfootprint.runs": {
        **dict.fromkeys(("AgentRun", "RECORDING_FORMAT"), "agentfootprint.runs._recording"),
        "DEFAULT_RUN_STORE": "agentfootprint.runs._sqlite",
        **dict.fromkeys(("RUN_STORE_SCHEMA", "RunSource"), "agentfootprint.runs._store"),
    },
    "agentfootprint.tools": {
        **dict.fromkeys(("Tool", "ToolContext", "define_tool", "tool"), "agentfootprint"),
        **dict.fromkeys((
            "CodeRunnerTool", "RunLimits", "ScriptDispatch", "dispatch_script_call",
        ), "agentfootprint.tools._code_runner"),
        "PauseRequest": "agentfootprint.tools._pause",
        **dict.fromkeys(("ToolOutcome", "ToolRegistry"), "agentfootprint.tools._registry"),
        **dict.fromkeys((
            "MAX_SCRIPT_BYTES", "MAX_SCRIPT_ROWS", "RunnerOutcome", "ScriptRow", "ToolScript",
            "check_script_ledger", "record_script_row", "script_rows_of_turn",
            "without_earlier_script_text",
        ), "agentfootprint.tools._scripts"),
    },
}

"""Names taken out of a package's ``__all__``, and where each is imported from now: its public
home when it has one (the top level, ``memory``, ``memory.embedding``, ``explain``), else its
defining module. From the old package each still resolves, with a warning, for one release."""


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


def test_no_namespace_grows_past_its_ceiling() -> None:
    """Adding a public name is a decision: raise its namespace's ceiling here when you make it."""
    counts = {package: len(importlib.import_module(package).__all__) for package in PACKAGES}
    assert {package: count for package, count in counts.items()
            if count > MAX_PUBLIC_NAMES.get(package, 0)} == {}


def test_each_public_name_has_one_home() -> None:
    """No name is exported by two namespaces, so a user never chooses between two spellings."""
    homes: dict[str, list[str]] = {}
    for package in PACKAGES:
        for name in importlib.import_module(package).__all__:
            homes.setdefault(name, []).append(package)
    assert {name: found for name, found in homes.items() if len(found) > 1} == {}


@pytest.mark.parametrize(
    ("package", "name", "home"),
    [(package, name, home) for package, moved in DEMOTED.items() for name, home in moved.items()],
    ids=lambda value: value)
def test_a_demoted_name_still_resolves_from_its_package_with_a_warning(
        package: str, name: str, home: str) -> None:
    """``package.name`` is no longer exported but still reads, as the very object at ``home``,
    with a DeprecationWarning that names ``home`` and points at the reader's line."""
    module = importlib.import_module(package)
    assert name not in module.__all__
    with pytest.warns(DeprecationWarning, match=re.escape(f"import it from {home} ")) as caught:
        value = getattr(module, name)
    assert [warning.filename for warning in caught] == [__file__]
    assert value is getattr(importlib.import_module(home), name)


PUBLIC_MODULES = {"cli.py", "errors.py", "runs/trace.py", "distributed/worker.py"}
"""The only implementation modules users import by path: the CLI, the exception tree, the
trace contract (``from agentfootprint.runs import trace``) and the Celery app workers start
(``celery -A agentfootprint.distributed.worker worker``); every other module is private."""


def test_implementation_modules_are_private() -> None:
    """Every module but a package's __init__ and the four above is named ``_name.py``."""
    root = SRC / "agentfootprint"
    public = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                    if p.name != "__init__.py" and not p.name.startswith("_")
                    and str(p.relative_to(root)) not in PUBLIC_MODULES)
    assert public == []


@pytest.mark.parametrize("old, new", [
    ("agentfootprint.flow.engine", "agentfootprint.flow._engine"),
    ("agentfootprint.memory.stores.postgres", "agentfootprint.memory.stores._postgres"),
    ("agentfootprint.providers.openai", "agentfootprint.providers._openai"),
    ("agentfootprint.explain.runstore", "agentfootprint.runs._sqlite"),
])
def test_an_old_module_path_still_imports_and_warns(old: str, new: str) -> None:
    """A module that went private (or moved) imports under its old path for one release."""
    import sys

    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    package, _, name = old.rpartition(".")
    kept = getattr(importlib.import_module(package), name, None)
    assert kept is None or kept is module or (callable(kept) and not isinstance(kept, type(module)))
