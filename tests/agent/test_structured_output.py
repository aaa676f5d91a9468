"""Structured output: ``output_type=`` gives ``result.output`` typed, checks every answer, sends
an invalid one back naming the field, and records the schema, each attempt and its errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentfootprint import Agent, ConfigurationError, Limits, LLMCall, define_fact, tool
from agentfootprint.errors import OutputValidationError
from agentfootprint.explain import backtrack
from agentfootprint.providers import mock, with_fallback, with_retry
from agentfootprint.providers._base import LLMRequest, LLMResponse, Provider
from agentfootprint.providers._output_tool import OUTPUT_TOOL
from agentfootprint.runs import Recording, trace


class RefundDecision(BaseModel):
    approved: bool
    reason: str


@dataclass
class Shipment:
    carrier: str
    days: int


class Label(TypedDict):
    tag: Literal["urgent", "later"]


class Escalate(BaseModel):
    team: str


WRONG = '{"approved": "perhaps", "reason": "old order"}'
RIGHT = '{"approved": false, "reason": "older than 30 days"}'


def attempts(result: Any) -> list[dict[str, Any]]:
    state = result.recording.state if hasattr(result, "recording") else result.state
    return list(state[trace.OUTPUT_ATTEMPTS])


# ---------------------------------------------------------------------- the mock's native mode


async def test_a_wrong_field_is_sent_back_and_both_attempts_are_recorded() -> None:
    """The acceptance case: the first answer's 'approved' is not a bool; the model is told so,
    by field, answers again, and the recording keeps the schema and both attempts."""
    provider = mock(script=[WRONG, RIGHT])
    agent = Agent(provider=provider, output_type=RefundDecision)
    result = await agent.run("Refund A-1001?")

    assert result.output == RefundDecision(approved=False, reason="older than 30 days")
    assert isinstance(result.output, RefundDecision)
    assert json.loads(result.content) == {"approved": False, "reason": "older than 30 days"}

    first, second = attempts(result)
    assert (first["valid"], second["valid"]) == (False, True)
    assert first["text"] == WRONG and second["text"] == RIGHT
    assert first["errors"] == [{"field": "approved", "message":
                                "Input should be a valid boolean, unable to interpret input"}]
    assert first["reasked"] is True and "reasked" not in second
    assert first["call"] != second["call"] and first["call"].startswith(trace.CALL_LLM)

    recorded = result.recording.state[trace.OUTPUT_SCHEMA]
    assert recorded["type"] == "RefundDecision" and recorded["mode"] == "text"
    assert recorded["schema"]["required"] == ["approved", "reason"]
    assert result.recording.state[trace.OUTPUT] == {"approved": False,
                                                    "reason": "older than 30 days"}

    # the second request carries the failed answer and the errors, field named
    sent = provider.requests[1].messages
    assert sent[-2] == {"role": "assistant", "content": WRONG}
    assert sent[-1]["role"] == "user"
    assert "field 'approved'" in sent[-1]["content"]
    assert "valid boolean" in sent[-1]["content"]
    # every request asked for the schema
    assert all(r.output_schema is not None and r.output_schema["name"] == "RefundDecision"
               and r.output_schema["strict"] for r in provider.requests)
    stages = [r.stage_id for r in result.recording.log.records]
    assert stages.count(trace.CALL_LLM) == 2 and stages.count(trace.OUTPUT_RETRY) == 1


async def test_a_valid_first_answer_is_the_output_without_a_retry() -> None:
    provider = mock(script=[RIGHT])
    result = await Agent(provider=provider, output_type=RefundDecision).run("Refund?")
    assert result.output.approved is False
    assert len(provider.requests) == 1
    assert [a["valid"] for a in attempts(result)] == [True]
    assert trace.OUTPUT_RETRY not in [r.stage_id for r in result.recording.log.records]


async def test_without_an_output_type_output_is_none_and_nothing_is_asked() -> None:
    provider = mock(reply="plain text")
    result = await Agent(provider=provider).run("hi")
    assert result.output is None and result.content == "plain text"
    assert provider.requests[0].output_schema is None
    assert trace.OUTPUT_ATTEMPTS not in result.recording.state


async def test_an_answer_that_is_not_json_is_named_as_such_and_fenced_json_is_accepted() -> None:
    provider = mock(script=["Sure! It is approved.", "```json\n" + RIGHT + "\n```"])
    result = await Agent(provider=provider, output_type=RefundDecision).run("Refund?")
    first = attempts(result)[0]
    assert first["errors"][0]["field"] == ""
    assert "not JSON" in first["errors"][0]["message"]
    assert "not JSON" in provider.requests[1].messages[-1]["content"]
    assert result.output.reason == "older than 30 days"


async def test_a_missing_field_is_named() -> None:
    provider = mock(script=['{"approved": true}', '{"approved": true, "reason": "ok"}'])
    result = await Agent(provider=provider, output_type=RefundDecision).run("Refund?")
    assert attempts(result)[0]["errors"] == [{"field": "reason", "message": "Field required"}]
    assert result.output == RefundDecision(approved=True, reason="ok")


# ---------------------------------------------------------------------- the types


async def test_dataclass_output() -> None:
    result = await Agent(provider=mock(reply='{"carrier": "DHL", "days": 3}'),
                         output_type=Shipment).run("Ship?")
    assert result.output == Shipment(carrier="DHL", days=3)


async def test_typed_dict_output_with_an_enum_field_re_asked() -> None:
    provider = mock(script=['{"tag": "soon"}', '{"tag": "urgent"}'])
    result = await Agent(provider=provider, output_type=Label).run("Label?")
    assert result.output == {"tag": "urgent"}
    assert attempts(result)[0]["errors"][0]["field"] == "tag"
    schema = provider.requests[0].output_schema
    assert schema is not None
    assert schema["schema"]["properties"]["tag"]["enum"] == ["urgent", "later"]


async def test_a_union_is_wrapped_in_an_object_and_either_member_validates() -> None:
    provider = mock(script=['{"result": {"team": "billing"}}'])
    agent: Agent[RefundDecision | Escalate] = Agent(
        provider=provider, output_type=RefundDecision | Escalate)
    result = await agent.run("Refund?")
    assert result.output == Escalate(team="billing")
    schema = provider.requests[0].output_schema
    assert schema is not None
    assert schema["name"] == "RefundDecision_or_Escalate"
    assert schema["schema"]["type"] == "object"
    assert schema["schema"]["required"] == ["result"]
    assert len(schema["schema"]["properties"]["result"]["anyOf"]) == 2
    # the bare member (without the wrapper) is accepted too
    bare = await Agent(provider=mock(reply=RIGHT),
                       output_type=RefundDecision | Escalate).run("Refund?")
    assert bare.output == RefundDecision(approved=False, reason="older than 30 days")


async def test_nested_models_are_sent_without_references() -> None:
    class Item(BaseModel):
        sku: str

    class Order(BaseModel):
        items: list[Item]
        note: str = ""

    provider = mock(reply='{"items": [{"sku": "A-1"}]}')
    result = await Agent(provider=provider, output_type=Order).run("Order?")
    assert result.output == Order(items=[Item(sku="A-1")])
    schema = provider.requests[0].output_schema
    assert schema is not None
    assert "$ref" not in json.dumps(schema["schema"])
    assert schema["strict"] is False  # 'note' has a default: not every field is required


# ---------------------------------------------------------------------- the retry budget


async def test_exhausted_retries_raise_naming_the_field_and_the_run_keeps_every_attempt() -> None:
    provider = mock(script=[WRONG, WRONG])
    agent = Agent(provider=provider, output_type=RefundDecision, output_retries=1)
    with pytest.raises(OutputValidationError) as raised:
        await agent.run("Refund?")
    error = raised.value
    assert "'approved'" in str(error) and "RefundDecision" in str(error)
    assert "output_retries" in str(error)
    assert error.attempts == 2
    assert error.errors[0]["field"] == "approved"
    failed = error.run
    assert [a["valid"] for a in attempts(failed)] == [False, False]
    assert len(provider.requests) == 2
    # a backtrack of the failed run explains the error, not an answer
    chain = backtrack(failed)
    assert chain.failure is not None and "approved" in chain.hops[0].text


async def test_output_retries_zero_fails_on_the_first_invalid_answer() -> None:
    provider = mock(script=[WRONG])
    with pytest.raises(OutputValidationError):
        await Agent(provider=provider, output_type=RefundDecision, output_retries=0).run("x")
    assert len(provider.requests) == 1


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by id."""
    return f"{order_id}: delivered 45 days ago"


async def test_tool_calls_first_then_a_re_ask_does_not_eat_the_tool_budget() -> None:
    """An answer asking for tools is not checked; a re-ask is an extra iteration, so a run at
    its iteration limit can still be re-asked."""
    provider = mock(script=[
        {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]},
        WRONG, RIGHT])
    agent = Agent(provider=provider, tools=[lookup_order], output_type=RefundDecision,
                  limits=Limits(max_iterations=2))
    result = await agent.run("Refund A-1001?")
    assert result.output.approved is False
    assert [a["iteration"] for a in attempts(result)] == [2, 3]
    assert result.stopped_early is None
    assert result.recording.state[trace.MAX_ITERATIONS] == 3


async def test_llm_call_with_an_output_type() -> None:
    provider = mock(script=[WRONG, RIGHT])
    call = LLMCall(provider=provider, output_type=RefundDecision)
    result = await call.run("Refund?")
    assert result.output == RefundDecision(approved=False, reason="older than 30 days")
    assert [r.stage_id for r in result.recording.log.records][-3:] == [
        trace.CALL_LLM, trace.ROUTE, trace.FINALIZE]


async def test_streamed_agent_checks_the_streamed_answer() -> None:
    result = await Agent(provider=mock(reply=RIGHT), output_type=RefundDecision,
                         stream=True).run("Refund?")
    assert result.output.reason == "older than 30 days"


# ---------------------------------------------------------------------- no native mode


class ToolOnly(Provider):
    """A provider with no structured-output mode: it can only call tools."""

    name = "toolonly"
    model = "toolonly"

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        args = self.answers.pop(0)
        return LLMResponse(tool_calls=[{"id": f"c{len(self.requests)}", "name": OUTPUT_TOOL,
                                        "args": args}], stop_reason="tool_use")


async def test_a_provider_without_a_native_mode_gets_the_final_answer_tool() -> None:
    provider = ToolOnly({"approved": "perhaps", "reason": "x"},
                        {"approved": True, "reason": "within 30 days"})
    result = await Agent(provider=provider, output_type=RefundDecision).run("Refund?")
    assert result.output == RefundDecision(approved=True, reason="within 30 days")
    first = provider.requests[0]
    assert first.output_schema is None
    assert [t["name"] for t in first.tools] == [OUTPUT_TOOL]
    assert first.tool_choice == "required"
    assert first.tools[0]["input_schema"]["required"] == ["approved", "reason"]
    assert f"Call {OUTPUT_TOOL} again" in provider.requests[1].messages[-1]["content"]
    assert result.recording.state[trace.OUTPUT_SCHEMA]["mode"] == "tool"
    assert result.recording.state[trace.LLM_TOOL_CALLS] == []


async def test_a_tool_of_the_reserved_name_is_refused_in_tool_mode() -> None:
    @tool
    def final_result(x: str) -> str:
        """Clashes."""
        return x

    with pytest.raises(ConfigurationError, match="final_result"):
        Agent(provider=ToolOnly(), tools=[final_result], output_type=RefundDecision)
    Agent(provider=mock(), tools=[final_result], output_type=RefundDecision)  # native: fine


def test_wrappers_keep_the_native_mode() -> None:
    from agentfootprint.agent._output import structured_mode

    assert structured_mode(with_retry(mock())) == "text"
    assert structured_mode(with_fallback(mock(), mock())) == "text"
    assert structured_mode(with_fallback(mock(), ToolOnly())) is None
    assert structured_mode(ToolOnly()) is None


# ---------------------------------------------------------------------- bad configuration


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"output_type": "RefundDecision"}, "pass the type itself"),
    ({"output_type": RefundDecision, "output_retries": -1}, "output_retries=-1"),
    ({"output_type": RefundDecision, "output_retries": True}, "output_retries=True"),
    ({"output_type": object()}, "cannot be described as a JSON schema"),
])
def test_bad_output_options_name_the_fix(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Agent(provider=mock(), **kwargs)


# ---------------------------------------------------------------------- explaining a field


def refund_agent(provider: Provider) -> Agent[RefundDecision]:
    return Agent(provider=provider, output_type=RefundDecision, system="You decide refunds.",
                 context=[define_fact(id="policy", data="Refunds are approved only within "
                                                        "30 days of delivery."),
                          define_fact(id="tone", data="Be polite and brief.")])


async def test_backtrack_a_field_to_the_answer_that_validated_and_its_sources() -> None:
    result = await refund_agent(mock(script=[WRONG, RIGHT])).run("Refund A-1001?")
    chain = backtrack(result, field="approved")
    kinds = [hop.kind for hop in chain.hops]
    assert kinds[:2] == ["FIELD", "ATTEMPT"]
    assert kinds[2:] == ["READ", "LANDED", "ALLOWED", "BORN"]
    field, attempt = chain.hops[0], chain.hops[1]
    valid = attempts(result)[1]
    assert "approved = false" in field.text and "RefundDecision" in field.text
    assert field.runtime_stage_id == valid["call"]
    assert '"perhaps"' in attempt.text and "rejected" in attempt.text
    assert attempt.runtime_stage_id == attempts(result)[0]["call"]
    assert chain.suspect is not None and chain.suspect.id == "policy"
    assert chain.hops[2].runtime_stage_id == valid["call"]
    # offline, from the recording alone: the same chain
    offline = backtrack(Recording.from_json(Recording.of(result).to_json()), field="approved")
    assert [(h.kind, h.text) for h in offline.hops] == [(h.kind, h.text) for h in chain.hops]


async def test_backtrack_a_field_that_was_fine_in_a_rejected_answer() -> None:
    result = await refund_agent(mock(script=[WRONG, RIGHT])).run("Refund A-1001?")
    chain = backtrack(result, field="reason")
    assert '"older than 30 days"' in chain.hops[0].text
    assert "valid here, but the answer was rejected" in chain.hops[1].text


async def test_backtrack_field_errors_name_the_fix() -> None:
    result = await refund_agent(mock(reply=RIGHT)).run("Refund?")
    with pytest.raises(KeyError, match="approved, reason"):
        backtrack(result, field="amount")
    plain = await Agent(provider=mock(reply="text")).run("hi")
    with pytest.raises(ValueError, match="output_type"):
        backtrack(plain, field="approved")


async def test_a_recording_with_model_text_redacted_keeps_the_attempts_out_and_says_so() -> None:
    from agentfootprint import Tracing
    from agentfootprint.runs import RedactionPolicy

    agent = Agent(provider=mock(script=[WRONG, RIGHT]), output_type=RefundDecision,
                  tracing=Tracing(redaction=RedactionPolicy(kinds=["model_text"])))
    result = await agent.run("Refund?")
    assert result.output == RefundDecision(approved=False, reason="older than 30 days")
    recorded = Recording.from_json(Recording.of(result).to_json())
    text = recorded.to_json()
    assert "older than 30 days" not in text and "perhaps" not in text
    with pytest.raises(ValueError, match="redacted"):
        backtrack(recorded, field="approved")


async def test_an_output_rule_that_withholds_or_rewrites_the_answer_decides_the_output() -> None:
    """act() output rules judge the text: withheld, there is no output; rewritten into another
    valid value, that value is the output."""
    from agentfootprint import Governance
    from agentfootprint.agent._moments import act, allow, deny

    withheld = Agent(provider=mock(reply=RIGHT), output_type=RefundDecision,
                     governance=Governance(act=[act("output", lambda c: deny("no"), id="g")]))
    result = await withheld.run("Refund?")
    assert result.content == "" and result.output is None

    approved = '{"approved": true, "reason": "goodwill"}'
    rule = act("output", lambda c: allow(approved, reason="goodwill"), id="g")
    rewritten = Agent(provider=mock(reply=RIGHT), output_type=RefundDecision,
                      governance=Governance(act=[rule]))
    result = await rewritten.run("Refund?")
    assert result.output == RefundDecision(approved=True, reason="goodwill")


async def test_a_crash_replay_keeps_the_attempts_and_the_retry_budget() -> None:
    from agentfootprint.errors import ProviderError

    provider = mock(script=[WRONG, ProviderError("down", provider="mock", status=503), RIGHT])
    agent = Agent(provider=provider, output_type=RefundDecision, output_retries=1)
    with pytest.raises(ProviderError) as raised:
        await agent.run("Refund?")
    result = await agent.resume_on_error(raised.value)
    assert result.output == RefundDecision(approved=False, reason="older than 30 days")
    assert [(a["valid"], a.get("reasked", False)) for a in attempts(result)] == [
        (False, True), (True, False)]


def test_strict_only_when_openai_strict_mode_takes_the_schema() -> None:
    from pydantic import Field

    from agentfootprint.agent._output import output_spec

    class Cat(BaseModel):
        kind: Literal["cat"]
        lives: int

    class Dog(BaseModel):
        kind: Literal["dog"]
        good: bool

    class Pet(BaseModel):
        pet: Cat | Dog = Field(discriminator="kind")

    def strict(output_type: Any) -> bool:
        spec = output_spec(output_type, retries=0, provider=mock())
        assert spec is not None
        return spec.strict

    assert strict(RefundDecision) and strict(Shipment) and strict(Label)
    assert strict(RefundDecision | Escalate)  # anyOf under the wrapper's object root
    assert not strict(Pet)  # a discriminated union is a oneOf
    assert not strict(dict[str, int])  # free-form keys: the object cannot be closed
