"""Key redaction reaches emitted payloads too: a redacted value never enters the record."""

from __future__ import annotations

from agentfootprint import Agent, Tracing
from agentfootprint.flow import flow_chart
from agentfootprint.flow._redact import RedactionPolicy
from agentfootprint.providers import mock
from agentfootprint.runs import Recording

SECRET = "Card 4111-1111-1111-1111 approved"


async def test_agent_answer_redacted_by_key_is_not_in_emit_payloads() -> None:
    """llm_content/final_content are redacted; llm_end/turn_end payloads repeat them — scrubbed."""
    seen: list[object] = []
    agent = Agent(provider=mock(reply=SECRET), model="m",
                  tracing=Tracing(redaction=RedactionPolicy(keys=["llm_content", "final_content"])))
    agent.on("*", lambda event: seen.append(event.payload))
    result = await agent.run("pay")
    assert result.content == SECRET  # the caller still gets the real answer
    recorded = Recording.of(result).to_json()
    assert "4111" not in recorded and "[REDACTED]" in recorded
    assert not any("4111" in str(payload) for payload in seen)


async def test_nested_and_numeric_secrets_are_scrubbed_from_a_flow_emit() -> None:
    """Long string leaves inside a redacted dict, and a redacted number, are replaced in
    payloads; short labels inside the dict are not (they would blank out ordinary words)."""

    def stage(scope: object) -> None:
        scope["card"] = {"number": "4111111111111111", "kind": "visa"}  # type: ignore[index]
        scope["pin"] = 4321  # type: ignore[index]
        scope.emit("charged", {"note": "charged 4111111111111111 by visa",  # type: ignore
                               "pin": 4321, "amount": 12})

    chart = flow_chart("Charge", stage, id="charge").build()
    run = await chart.run({}, redaction=RedactionPolicy(keys=["card", "pin"]))
    [record] = run.log.records
    [(name, payload)] = record.emits
    assert name == "charged"
    assert payload == {"note": "charged [REDACTED] by visa", "pin": "[REDACTED]",
                       "amount": 12}
