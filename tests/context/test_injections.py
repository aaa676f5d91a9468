"""The injection primitive: factories, build-time refusals, the evaluator, the read_skill tool."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest

from agentfootprint import (
    Agent,
    ConfigurationError,
    ToolContext,
    define_fact,
    define_injection,
    define_instruction,
    define_skill,
    define_steering,
    define_tool,
    tool,
)
from agentfootprint.context import InjectionContext, Trigger
from agentfootprint.context._injection import evaluate_injections
from agentfootprint.context._skills import READ_SKILL, read_skill_tool
from agentfootprint.providers import mock

# -- helpers ---------------------------------------------------------------------------------


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}"


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def ctx(*ran: str, iteration: int = 1, activated: tuple[str, ...] = (),
        max_iterations: int = 10) -> InjectionContext:
    batch = [{"tool_name": name, "tool_call_id": f"c{i}", "status": "success"}
             for i, name in enumerate(ran)]
    return InjectionContext(iteration=iteration, max_iterations=max_iterations,
                            user_message="hi", history=[], tool_results=batch,
                            activated=activated)


def agent_with(context: list[Any], tools: list[Any] | None = None) -> Agent:
    return Agent(provider=mock(reply="ok"), model="mock-model", context=context,
                 tools=tools or [])


def skill(id: str = "billing", **options: Any) -> Any:
    options.setdefault("description", "Refunds and charges.")
    options.setdefault("body", "Confirm identity first.")
    return define_skill(id=id, **options)


# -- what the factories build ----------------------------------------------------------------


def test_define_fact_defaults() -> None:
    """A fact is always on, lands in the system slot and is cacheable by default."""
    fact = define_fact(id="profile", data="Name: Maya.")
    assert (fact.flavor, fact.trigger.kind, fact.system, fact.messages, fact.cache) == (
        "fact", "always", "Name: Maya.", (), "always")
    assert fact.slots == ("system",)


def test_define_fact_with_active_when_is_a_rule() -> None:
    """active_when turns a fact into a rule-triggered one holding the predicate."""
    def late(c: InjectionContext) -> bool:
        return c.iteration > 2

    fact = define_fact(id="late", data="Hurry.", active_when=late)
    assert fact.trigger == Trigger("rule", predicate=late)


def test_define_fact_in_the_messages_slot() -> None:
    """slot='messages' with a role makes one message and no system text."""
    fact = define_fact(id="ack", data="Noted.", slot="messages", role="assistant")
    assert fact.system is None
    assert fact.messages == ({"role": "assistant", "content": "Noted."},)
    assert fact.slots == ("messages",)


def test_define_steering_is_always_on_and_cached() -> None:
    """Steering is an always-on system-prompt rule with cache 'always'."""
    steering = define_steering(id="tone", prompt="Be kind.")
    assert (steering.flavor, steering.trigger.kind, steering.system, steering.cache) == (
        "steering", "always", "Be kind.", "always")


def test_define_instruction_triggers_and_cache() -> None:
    """An instruction is always, rule or on_tool_return, and never cached by default."""
    plain = define_instruction(id="a", prompt="Cite sources.")
    ruled = define_instruction(id="b", prompt="Cite sources.", active_when=lambda c: True)
    after = define_instruction(id="c", prompt="Cite the order.", on_tool_return="lookup_order")
    assert [i.trigger.kind for i in (plain, ruled, after)] == ["always", "rule",
                                                               "on_tool_return"]
    assert {i.cache for i in (plain, ruled, after)} == {"never"}
    assert after.trigger.tool == "lookup_order"
    assert after.trigger.describe() == "on_tool_return(lookup_order)"


def test_define_instruction_on_tool_return_takes_a_compiled_regex() -> None:
    """on_tool_return accepts a compiled pattern and describes itself by the pattern text."""
    pattern = re.compile(r"^lookup_")
    after = define_instruction(id="c", prompt="Cite it.", on_tool_return=pattern)
    assert after.trigger.tool is pattern
    assert after.trigger.describe() == "on_tool_return(^lookup_)"


def test_define_skill_defaults() -> None:
    """A skill is llm_activated, its body lands in the system slot, cache 'while_active'."""
    billing = skill(tools=[refund])
    assert (billing.flavor, billing.trigger.kind, billing.system, billing.cache) == (
        "skill", "llm_activated", "Confirm identity first.", "while_active")
    assert billing.tools == (refund,)
    assert billing.trigger.describe() == "llm_activated(read_skill)"
    assert (billing.surface, billing.tools_while_active) == ("system", False)


def test_define_skill_surface_tool_keeps_the_body_out_of_the_system_slot() -> None:
    """surface='tool' leaves no system text; 'both' keeps it; the body is kept either way."""
    only_tool = skill(surface="tool")
    both = skill(surface="both")
    assert only_tool.system is None and only_tool.metadata["body"] == "Confirm identity first."
    assert both.system == "Confirm identity first."


def test_cache_can_be_overridden() -> None:
    """cache= replaces the flavour default."""
    assert define_fact(id="f", data="x", cache="never").cache == "never"
    assert skill(cache="always").cache == "always"


def test_injections_are_frozen() -> None:
    """A built injection cannot be changed afterwards."""
    fact = define_fact(id="profile", data="Name: Maya.")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fact.system = "changed"  # type: ignore[misc]


def test_define_injection_any_slots_any_trigger() -> None:
    """The raw primitive takes system text, messages and tools with the trigger given."""
    raw = define_injection(id="raw", system="S.", messages=[{"role": "user", "content": "M."}],
                           tools=[lookup_order], trigger=Trigger("on_tool_return", tool="x"))
    assert raw.slots == ("system", "messages", "tools")
    assert (raw.flavor, raw.cache, raw.trigger.kind) == ("custom", "never", "on_tool_return")


# -- build-time refusals ---------------------------------------------------------------------


EMPTY: list[tuple[str, Callable[[], Any], str]] = [
    ("fact data", lambda: define_fact(id="f", data=""), "define_fact 'f' needs non-empty data"),
    ("fact blank data", lambda: define_fact(id="f", data="   "), "non-empty data"),
    ("steering prompt", lambda: define_steering(id="s", prompt=""),
     "define_steering 's' needs non-empty prompt"),
    ("instruction prompt", lambda: define_instruction(id="i", prompt=""),
     "define_instruction 'i' needs non-empty prompt"),
    ("skill body", lambda: skill(body=""), "define_skill 'billing' needs non-empty body"),
    ("skill description", lambda: skill(description=""),
     "define_skill 'billing' needs non-empty description"),
    ("fact id", lambda: define_fact(id="", data="x"), "define_fact needs a non-empty id"),
    ("skill id", lambda: skill(id=" "), "define_skill needs a non-empty id"),
]


@pytest.mark.parametrize(("build", "message"), [(b, m) for _, b, m in EMPTY],
                         ids=[n for n, _, _ in EMPTY])
def test_empty_text_or_id_is_refused(build: Callable[[], Any], message: str) -> None:
    """Every factory refuses an empty id or text, naming the factory, the id and the field."""
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        build()


def test_messages_slot_needs_a_role() -> None:
    """slot='messages' without a role is refused, naming the roles allowed."""
    with pytest.raises(ConfigurationError, match="needs role='user', 'assistant' or 'system'"):
        define_fact(id="f", data="x", slot="messages")


def test_messages_slot_refuses_role_tool() -> None:
    """role='tool' is refused: tool messages only come from tools."""
    with pytest.raises(ConfigurationError, match="tool messages only come from tools"):
        define_instruction(id="i", prompt="x", slot="messages", role="tool")  # type: ignore[arg-type]


def test_role_without_messages_slot_is_refused() -> None:
    """role= with the system slot is refused rather than silently ignored."""
    with pytest.raises(ConfigurationError, match="role= only applies with slot='messages'"):
        define_fact(id="f", data="x", role="user")


def test_unknown_slot_is_refused() -> None:
    """A slot other than system or messages is refused."""
    with pytest.raises(ConfigurationError, match="slot must be 'system' or 'messages'"):
        define_fact(id="f", data="x", slot="tools")  # type: ignore[arg-type]


def test_active_when_and_on_tool_return_together_are_refused() -> None:
    """An instruction has one trigger: active_when= or on_tool_return=, not both."""
    with pytest.raises(ConfigurationError, match="pass active_when= or on_tool_return=, not both"):
        define_instruction(id="i", prompt="x", active_when=lambda c: True,
                           on_tool_return="lookup_order")


def test_on_tool_return_must_be_a_name_or_pattern() -> None:
    """on_tool_return= takes a tool name or compiled regex, nothing else."""
    with pytest.raises(ConfigurationError, match="takes a tool name or a compiled regex"):
        define_instruction(id="i", prompt="x", on_tool_return=42)  # type: ignore[arg-type]


def test_active_when_must_be_callable() -> None:
    """A non-callable active_when= is refused at build time."""
    with pytest.raises(ConfigurationError, match="active_when= must be callable"):
        define_fact(id="f", data="x", active_when=True)  # type: ignore[arg-type]


def test_define_injection_that_injects_nothing_is_refused() -> None:
    """A raw injection with no system text, messages or tools is refused."""
    with pytest.raises(ConfigurationError, match="'nothing' injects nothing"):
        define_injection(id="nothing")


@pytest.mark.parametrize("message", [{"role": "tool", "content": "x"},
                                     {"role": "user", "content": ""},
                                     {"role": "user"}])
def test_define_injection_refuses_bad_messages(message: dict[str, Any]) -> None:
    """Raw messages need role user/assistant/system and non-empty content."""
    with pytest.raises(ConfigurationError, match="each message needs role"):
        define_injection(id="raw", messages=[message])


def test_define_injection_refuses_blank_text() -> None:
    """Blank system text or message content is refused like the factories' empty text."""
    with pytest.raises(ConfigurationError, match="'blank'"):
        define_injection(id="blank", system="   ")
    with pytest.raises(ConfigurationError, match="'blank'"):
        define_injection(id="blank", messages=[{"role": "user", "content": "  "}])


@pytest.mark.parametrize("trigger", [Trigger("sometimes"), Trigger("rule"),  # type: ignore[arg-type]
                                     Trigger("on_tool_return")],
                         ids=["unknown kind", "rule without predicate",
                              "on_tool_return without tool"])
def test_define_injection_refuses_a_trigger_that_cannot_fire(trigger: Trigger) -> None:
    """A trigger of unknown kind, or missing what it judges by, is refused at build time."""
    with pytest.raises(ConfigurationError, match="'raw'"):
        define_injection(id="raw", system="S.", trigger=trigger)


def test_define_skill_refuses_bad_surface_and_non_tools() -> None:
    """surface must be system/tool/both and tools must be Tool objects."""
    with pytest.raises(ConfigurationError, match="surface must be system, tool or both"):
        skill(surface="prompt")
    with pytest.raises(ConfigurationError, match="is not a Tool; use @tool"):
        skill(tools=[lambda: None])
    with pytest.raises(ConfigurationError, match="tools='refund' must be a list"):
        skill(tools="refund")


def test_duplicate_injection_ids_are_refused() -> None:
    """Two context entries with one id in one agent are refused at build time."""
    with pytest.raises(ConfigurationError, match="two context entries have id 'profile'"):
        agent_with([define_fact(id="profile", data="a"), define_steering(id="profile",
                                                                         prompt="b")])


def test_context_entry_must_be_an_injection() -> None:
    """A context entry that is not an Injection is refused, naming the factories."""
    with pytest.raises(ConfigurationError, match="is not an injection; build it with define_fact"):
        agent_with(["Be kind."])


def test_skill_tool_colliding_with_a_different_static_tool_is_refused() -> None:
    """A skill tool named like a different static tool is refused, naming both owners."""
    impostor = define_tool("lookup_order", "Another lookup.", None, lambda args: "x")
    with pytest.raises(ConfigurationError,
                       match=r"tool name 'lookup_order' is used by tools= and by skill 'billing'"):
        agent_with([skill(tools=[impostor])], tools=[lookup_order])


def test_two_skills_with_different_tools_of_one_name_are_refused() -> None:
    """Two skills whose different tools share a name are refused."""
    other = define_tool("refund", "Another refund.", None, lambda args: "x")
    with pytest.raises(ConfigurationError, match="tool name 'refund' is used by skill 'a'"):
        agent_with([skill(id="a", tools=[refund]), skill(id="b", tools=[other])])


def test_sharing_the_same_tool_object_is_fine() -> None:
    """Skills and the static list may share one Tool object; it is registered once."""
    agent = agent_with([skill(id="a", tools=[refund]), skill(id="b", tools=[refund])],
                       tools=[refund])
    assert list(agent.spec.registry.tools) == ["refund", READ_SKILL]


def test_read_skill_is_reserved_for_static_tools() -> None:
    """A user tool named read_skill is refused."""
    mine = define_tool(READ_SKILL, "Mine.", None, lambda args: "x")
    with pytest.raises(ConfigurationError, match="'read_skill' is reserved for skills"):
        agent_with([skill()], tools=[mine])


def test_read_skill_is_reserved_for_skill_tools() -> None:
    """A skill tool named read_skill is refused, since it would shadow the real one."""
    mine = define_tool(READ_SKILL, "Mine.", None, lambda args: "x")
    with pytest.raises(ConfigurationError, match="read_skill"):
        agent_with([skill(tools=[mine])])


def test_read_skill_is_reserved_in_any_injection() -> None:
    """A read_skill tool inside a non-skill injection is refused even with no skill declared."""
    mine = define_tool(READ_SKILL, "Mine.", None, lambda args: "x")
    with pytest.raises(ConfigurationError, match="'read_skill' is reserved"):
        agent_with([define_injection(id="raw", tools=[mine])])


# -- the evaluator ---------------------------------------------------------------------------


def test_always_fires() -> None:
    """An always injection fires every evaluation with reason 'always on'."""
    rows = evaluate_injections([define_fact(id="f", data="x")], ctx())
    assert rows == [{"id": "f", "flavor": "fact", "trigger": "always", "fired": True,
                     "reason": "always on"}]


def test_rule_holds_or_not() -> None:
    """A rule fires when its predicate is true and says so either way."""
    late = define_instruction(id="late", prompt="x", active_when=lambda c: c.iteration >= 3)
    assert evaluate_injections([late], ctx(iteration=2))[0] == {
        "id": "late", "flavor": "instruction", "trigger": "rule", "fired": False,
        "reason": "its rule did not hold"}
    assert evaluate_injections([late], ctx(iteration=3))[0]["reason"] == "its rule held"


def test_raising_rule_is_skipped_with_the_exception_named() -> None:
    """A predicate that raises skips its injection with a reason naming the exception."""
    def broken(c: InjectionContext) -> bool:
        raise KeyError("plan")

    rows = evaluate_injections([define_fact(id="bad", data="x", active_when=broken),
                                define_fact(id="good", data="y")], ctx())
    assert rows[0]["fired"] is False
    assert rows[0]["reason"] == "its rule raised KeyError: 'plan'; skipped"
    assert rows[1]["fired"] is True


def test_on_tool_return_judges_the_previous_batch() -> None:
    """on_tool_return fires when any call of the previous batch matches, else says why not."""
    cite = define_instruction(id="cite", prompt="x", on_tool_return="lookup_order")
    assert evaluate_injections([cite], ctx())[0]["reason"] == "no tool has returned yet"
    miss = evaluate_injections([cite], ctx("refund", "read_skill"))[0]
    assert miss["fired"] is False
    assert miss["reason"] == (
        "the previous batch ran refund, read_skill, not on_tool_return(lookup_order)")
    hit = evaluate_injections([cite], ctx("refund", "lookup_order"))[0]
    assert hit["fired"] is True
    assert hit["reason"] == "tool 'lookup_order' returned in the previous batch"


def test_on_tool_return_with_a_regex() -> None:
    """A compiled pattern matches tool names by search."""
    cite = define_instruction(id="cite", prompt="x", on_tool_return=re.compile(r"^lookup_"))
    assert evaluate_injections([cite], ctx("lookup_order"))[0]["fired"] is True
    assert evaluate_injections([cite], ctx("my_lookup_order"))[0]["fired"] is False


def test_llm_activated_fires_once_read() -> None:
    """A skill fires only when its id is among the activated ones, saying why not otherwise."""
    billing = skill()
    row = evaluate_injections([billing], ctx())[0]
    assert (row["fired"], row["reason"]) == (False, "the model has not called read_skill for it")
    row = evaluate_injections([billing], ctx(activated=("billing",)))[0]
    assert (row["fired"], row["reason"]) == (True, "the model activated it with read_skill")


def test_rows_keep_declaration_order() -> None:
    """The evaluator answers for every injection, fired or not, in declaration order."""
    injections = [skill(id="z"), define_fact(id="a", data="x"),
                  define_instruction(id="m", prompt="y", active_when=lambda c: False)]
    assert [r["id"] for r in evaluate_injections(injections, ctx())] == ["z", "a", "m"]


def test_injection_context_helpers() -> None:
    """iterations_remaining and last_tool_name are derived from the context."""
    c = ctx("lookup_order", "refund", iteration=3, max_iterations=5)
    assert (c.iterations_remaining, c.last_tool_name) == (2, "refund")
    assert ctx().last_tool_name is None


# -- the read_skill tool ---------------------------------------------------------------------


def test_read_skill_catalogue_and_schema() -> None:
    """read_skill lists every skill as '  - id: description' and enumerates the ids."""
    reader = read_skill_tool([skill(id="billing"), skill(id="shipping",
                                                          description="Parcels.")])
    assert reader.name == READ_SKILL
    assert "  - billing: Refunds and charges.\n  - shipping: Parcels." in reader.description
    assert reader.input_schema["properties"]["id"]["enum"] == ["billing", "shipping"]
    assert reader.input_schema["required"] == ["id"]


def test_read_skill_results_by_surface() -> None:
    """The result is the body for surface tool/both, else an activation sentence."""
    reader = read_skill_tool([skill(id="s"), skill(id="t", surface="tool", body="T body."),
                              skill(id="b", surface="both", body="B body.")])
    context = ToolContext("c1", 1, "run")
    assert reader.execute({"id": "s"}, context) == "Skill 's' activated for the next step."
    assert reader.execute({"id": "t"}, context) == "T body."
    assert reader.execute({"id": "b"}, context) == "B body."


def test_read_skill_unknown_id_names_the_available_ones() -> None:
    """An unknown id (past validation) returns a readable result listing the skills."""
    reader = read_skill_tool([skill(id="billing"), skill(id="shipping")])
    out = reader.execute({"id": "nope"}, ToolContext("c1", 1, "run"))
    assert out == "Unknown skill 'nope'. Available: billing, shipping."
    assert reader.validate({"id": "nope"})  # the enum refuses it before execute in a run


def test_read_skill_needs_a_skill() -> None:
    """read_skill without any skill is a configuration error."""
    with pytest.raises(ConfigurationError, match="read_skill needs at least one skill"):
        read_skill_tool([])
