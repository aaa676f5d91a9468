"""Each lint rule fires on a crafted bad tool and stays quiet on a good one; every catalog
format reads to the same definitions; the twin rule is reported as not run without the model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, define_tool, tool
from agentfootprint.errors import ConfigurationError
from agentfootprint.lint import LintReport, ToolDefinition, lint_tools, load_tool_catalog
from agentfootprint.lint._rules import listed_values
from agentfootprint.memory.embedding import _minilm as minilm_module
from agentfootprint.providers import mock

GOOD = ("Look up the current weather in a city: temperature, wind and sky. Use it when the "
        "user asks what the weather is like right now.")
SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "description": "City name, e.g. Lisbon."},
    "units": {"type": "string", "enum": ["metric", "imperial"], "description": "Unit system."}},
    "required": ["city"]}


def good(name: str = "get_weather", description: str = GOOD,
         schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "description": description,
            "parameters": SCHEMA if schema is None else schema}


def static(tools: list[Any]) -> LintReport:
    """The model-free rules only (the twin rule is switched off)."""
    return lint_tools(tools, twins=False)


def rules(report: LintReport) -> set[str]:
    return {finding.rule for finding in report.findings}


def test_a_good_tool_has_no_findings() -> None:
    report = static([good()])
    assert report.ok and report.findings == ()
    assert report.not_run == {"near-duplicate": "switched off (twins=False)"}


def test_duplicate_names_are_an_error() -> None:
    report = static([good(), good(description=GOOD + " Also returns humidity.")])
    [finding] = report.findings
    assert (finding.rule, finding.severity, finding.tools) == (
        "duplicate-name", "error", ("get_weather",))
    assert "distinct name" in finding.fix


@pytest.mark.parametrize("description", ["", "   ", None])
def test_a_missing_description_is_an_error(description: str | None) -> None:
    item = good()
    item["description"] = description
    [finding] = static([item]).findings
    assert (finding.rule, finding.severity) == ("missing-description", "error")


@pytest.mark.parametrize("description", ["Gets the weather.", "Get weather"])
def test_a_thin_description_is_a_warning(description: str) -> None:
    [finding] = static([good(description=description)]).findings
    assert (finding.rule, finding.severity) == ("thin-description", "warning")


def test_a_description_that_only_repeats_the_name_is_thin() -> None:
    """Five words, but all of them the name's own: nothing to choose the tool by."""
    report = static([good(name="get_current_weather_for_city",
                          description="Get current weather for city.")])
    assert rules(report) == {"thin-description"}


def test_what_without_when_is_reported() -> None:
    report = static([good(description="Returns the temperature, wind and sky conditions of a "
                                      "city right now.")])
    [finding] = report.findings
    assert (finding.rule, finding.severity) == ("no-when-to-use", "info")
    assert static([good(description="Returns the temperature, wind and sky conditions of a "
                                     "city. Call it for questions about today.")]).ok


@pytest.mark.parametrize(("text", "values"), [
    ("Sort order, one of: asc, desc.", ["asc", "desc"]),
    ("Either metric or imperial.", ["metric", "imperial"]),
    ("Must be low, medium or high", ["low", "medium", "high"]),
    ("Allowed values are open, closed and all.", ["open", "closed", "all"]),
    ("Pass 'json' or 'csv'.", ["json", "csv"]),
    ("The format (text|markdown|html).", ["text", "markdown", "html"]),
])
def test_enum_in_prose_finds_the_values(text: str, values: list[str]) -> None:
    assert listed_values(text) == values
    schema = {"type": "object", "properties": {"mode": {"type": "string", "description": text}},
              "required": ["mode"]}
    [finding] = static([good(schema=schema)]).findings
    assert (finding.rule, finding.parameter) == ("enum-in-prose", "mode")
    assert json.dumps(values) in finding.fix


@pytest.mark.parametrize("text", [
    "Either a city name or a zip code.",
    "Search terms, e.g. rust or python.",
    "Must be at most 10 characters.",
    "The customer's email address.",
])
def test_prose_without_a_value_list_is_not_an_enum(text: str) -> None:
    assert listed_values(text) == []
    schema = {"type": "object", "properties": {"mode": {"type": "string", "description": text}},
              "required": ["mode"]}
    assert static([good(schema=schema)]).ok


def test_an_enum_in_the_schema_is_not_reported_again() -> None:
    schema = {"type": "object", "required": ["mode"], "properties": {"mode": {
        "type": "string", "enum": ["asc", "desc"], "description": "One of: asc, desc."}}}
    assert static([good(schema=schema)]).ok


def test_an_undocumented_optional_parameter_is_reported() -> None:
    schema = {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"},  # required: the name says enough
        "filters": {"type": "object", "properties": {"days": {"type": "integer"}}}}}
    report = static([good(schema=schema)])
    assert {(f.rule, f.parameter) for f in report.findings} == {
        ("undocumented-param", "filters"), ("undocumented-param", "filters.days")}


# ---------------------------------------------------------------------------- formats

OPENAI = {"type": "function", "function": good()}
RESPONSES = {"type": "function", **good()}
ANTHROPIC = {"name": "get_weather", "description": GOOD, "input_schema": SCHEMA}
MCP = {"name": "get_weather", "description": GOOD, "inputSchema": SCHEMA}
PLAIN = good()


@pytest.mark.parametrize(("document", "source"), [
    ([OPENAI], "openai"), ([RESPONSES], "openai-responses"), ([ANTHROPIC], "anthropic"),
    ([MCP], "mcp"), ([PLAIN], "plain"), ({"tools": [MCP]}, "mcp"),
    ({"jsonrpc": "2.0", "id": 1, "result": {"tools": [MCP]}}, "mcp"),
    ({"functions": [PLAIN]}, "plain"), (OPENAI, "openai"),
], ids=["openai", "responses", "anthropic", "mcp", "plain", "tools-list", "json-rpc",
        "functions", "single"])
def test_every_format_reads_to_the_same_definition(document: Any, source: str,
                                                   tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    [found] = load_tool_catalog(path)
    assert found == ToolDefinition("get_weather", GOOD, SCHEMA, source)


def test_a_file_mixing_formats_is_read_item_by_item(tmp_path: Path) -> None:
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps([OPENAI, {**ANTHROPIC, "name": "b"}, {**MCP, "name": "c"}]))
    assert [t.source for t in load_tool_catalog(path)] == ["openai", "anthropic", "mcp"]


def test_the_test_catalog_reads_whole() -> None:
    tools = load_tool_catalog(Path(__file__).with_name("catalog.json"))
    assert len(tools) >= 30 and all(t.description and t.input_schema for t in tools)


@pytest.mark.parametrize(("content", "needle"), [
    ("{not json", "is not valid JSON"),
    ("[]", "lists no tools"),
    ('{"things": []}', "without a 'tools' list"),
    ('[{"description": "x"}]', "tool #1 has no name"),
    ('[{"name": "a", "description": 3}]', "'description' must be a string"),
    ('[{"name": "a", "parameters": []}]', "schema must be a JSON object"),
    ('"tools"', "not a list of tools"),
])
def test_a_bad_catalog_is_one_sentence_naming_the_file(content: str, needle: str,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigurationError, match=needle) as caught:
        load_tool_catalog(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_yaml_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text("- name: a\n  description: b\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="YAML is not read: convert it to JSON"):
        load_tool_catalog(path)


def test_our_tools_and_an_agents_tools_are_linted() -> None:
    @tool
    def refund(order_id: str, amount: float = 0.0) -> str:
        """Refund."""
        return order_id

    described = define_tool("lookup_order", "Find an order by id and show its items and state. "
                            "Use it before any refund.",
                            {"type": "object", "properties": {
                                "order_id": {"type": "string", "description": "The order."}},
                             "required": ["order_id"]}, lambda args: args)
    direct = static([refund, described])
    agent = Agent(provider=mock(reply="ok"), tools=[refund, described])
    via_agent = lint_tools(agent, twins=False)
    assert direct.findings == via_agent.findings
    assert {(f.rule, f.tools, f.parameter) for f in direct.findings} == {
        ("thin-description", ("refund",), None), ("undocumented-param", ("refund",), "amount")}


def test_a_bad_threshold_is_refused() -> None:
    for bad in (0, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ConfigurationError, match="not a cosine"):
            lint_tools([good()], threshold=bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- the twin rule


def test_without_the_model_the_twin_rule_is_not_run_and_the_others_still_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(**_: Any) -> Any:
        raise ConfigurationError("minilm_embedder needs numpy")

    monkeypatch.setattr(minilm_module, "minilm_embedder", missing)
    report = lint_tools([good(), good("weather_now", "Weather.")], cache_dir=False)
    assert "near-duplicate" not in report.rules_run
    assert "pip install 'agentfootprint[embed]'" in report.not_run["near-duplicate"]
    assert rules(report) == {"thin-description"}
    assert "not run near-duplicate" in report.to_text()
    assert json.loads(report.to_json())["not_run"]["near-duplicate"].startswith("the MiniLM")


class Planted:
    """An embedder whose vectors are planted per tool name (the text starts with it)."""

    id = "planted"
    dimensions = 3

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.vectors[text.split(":")[0].replace(" ", "_")] for text in texts]


def _tools(*names: str) -> list[dict[str, Any]]:
    return [good(name, f"{GOOD} ({name})") for name in names]


def test_mutually_nearest_tools_above_the_threshold_are_twins() -> None:
    embedder = Planted({"a": [1, 0, 0], "b": [0.8, 0.6, 0], "c": [0, 0, 1], "d": [0, 0.2, 1]})
    report = lint_tools(_tools("a", "b", "c", "d"), embedder=embedder, cache_dir=False)
    found = report.by_rule("near-duplicate")
    assert [f.tools for f in found] == [("a", "b"), ("c", "d")]
    assert found[0].score == pytest.approx(0.8) and report.model == "planted"
    assert "each the other's nearest tool" in found[0].message
    assert not lint_tools(_tools("a", "b"), embedder=embedder, threshold=0.9,
                          cache_dir=False).by_rule("near-duplicate")
    far = Planted({"a": [1, 0, 0], "b": [0.3, 0.954, 0]})  # mutually nearest, cosine 0.3
    assert lint_tools(_tools("a", "b"), embedder=far, cache_dir=False).ok


def test_a_pair_with_a_nearer_third_tool_is_not_reported_unless_nearly_identical() -> None:
    # b is closer to c (0.96) than to a (0.8): a-b is not reported; b-c is.
    embedder = Planted({"a": [1, 0, 0], "b": [0.8, 0.6, 0], "c": [0.6, 0.8, 0]})
    report = lint_tools(_tools("a", "b", "c"), embedder=embedder, cache_dir=False)
    assert [f.tools for f in report.by_rule("near-duplicate")] == [("b", "c")]
    # Above SURE (0.85) a pair is reported even when a third tool is nearer.
    embedder = Planted({"a": [1, 0, 0], "b": [0.9, 0.43589, 0], "c": [0.8, 0.6, 0]})
    report = lint_tools(_tools("a", "b", "c"), embedder=embedder, cache_dir=False)
    assert ("a", "b") in [f.tools for f in report.by_rule("near-duplicate")]


def test_a_description_naming_its_twin_settles_the_pair() -> None:
    embedder = Planted({"find_order": [1, 0, 0], "b": [0.9, 0.1, 0], "search": [0, 0, 1],
                        "lookup": [0, 0.1, 0.9]})
    tools = _tools("find_order", "b", "search", "lookup")
    assert len(lint_tools(tools, embedder=embedder, cache_dir=False).findings) == 2
    # An identifier-like name counts as named anywhere; a plain word only in quotes, since
    # "search" in running text is not a reference to the tool.
    tools[1]["description"] += " Prefer find_order when the user gives an order id."
    tools[3]["description"] += " Use it to search by email."
    assert [f.tools for f in lint_tools(tools, embedder=embedder, cache_dir=False).findings
            ] == [("search", "lookup")]
    tools[3]["description"] += " For names, `search` is better."
    assert lint_tools(tools, embedder=embedder, cache_dir=False).ok


def test_embeddings_are_cached_by_content(tmp_path: Path) -> None:
    vectors = {"a": [1.0, 0.0, 0.0], "b": [0.6, 0.8, 0.0]}
    first = Planted(vectors)
    report = lint_tools(_tools("a", "b"), embedder=first, cache_dir=tmp_path)
    assert len(first.calls) == 1 and list(tmp_path.iterdir())
    again = Planted(vectors)
    assert lint_tools(_tools("a", "b"), embedder=again, cache_dir=tmp_path) == report
    assert again.calls == []  # every vector came from the cache
    changed = _tools("a", "b")
    changed[1]["description"] += " Now different."
    third = Planted(vectors)
    lint_tools(changed, embedder=third, cache_dir=tmp_path)
    assert [len(call) for call in third.calls] == [1]  # only the changed text


def test_a_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "planted_3.json").write_text("{broken", encoding="utf-8")
    embedder = Planted({"a": [1, 0, 0], "b": [0, 1, 0]})
    assert lint_tools(_tools("a", "b"), embedder=embedder, cache_dir=tmp_path).ok
    assert json.loads((tmp_path / "planted_3.json").read_text())  # rewritten whole


def test_each_tools_nearest_twin_is_precomputed_for_run_time_lookups() -> None:
    """The report keeps every tool's nearest other tool (once per catalog); a tool-call
    listener reads it per call with no model and no NumPy at run time."""
    embedder = Planted({"lookup_order": [1, 0, 0], "find_order": [0.8, 0.6, 0],
                        "ship_order": [0, 0, 1]})
    report = lint_tools(_tools("lookup_order", "find_order", "ship_order"), embedder=embedder,
                        cache_dir=False)
    assert report.nearest["lookup_order"] == ("find_order", pytest.approx(0.8))
    assert report.nearest["ship_order"][0] in ("lookup_order", "find_order")
    assert json.loads(report.to_json())["nearest"]["find_order"]["tool"] == "lookup_order"
    assert static([good()]).nearest == {}  # the twin rule did not run: nothing to look up

    @tool
    def lookup_order(order_id: str) -> str:
        """Find an order by id. Use it for order questions."""
        return "delivered"

    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1"}}]}, "Delivered."]),
        tools=[lookup_order])
    seen: list[tuple[str, str, float]] = []

    def note(event: Any) -> None:
        chosen = event.payload["tool_name"]
        other, cosine = report.nearest[chosen]
        seen.append((chosen, other, round(1 - cosine, 2)))  # the margin of this call

    agent.on("stream.tool_start", note)
    agent.run_sync("Where is A-1?")
    assert seen == [("lookup_order", "find_order", 0.2)]


def test_one_tool_or_none_needs_no_embedding() -> None:
    embedder = Planted({})
    assert lint_tools(_tools("alone"), embedder=embedder, cache_dir=False).ok
    assert lint_tools([], embedder=embedder, cache_dir=False).tools_checked == 0
    assert embedder.calls == []
