"""An explanation's re-runs count against the agent's ``Budget`` together (issue 17 item 5):
every re-run's model calls go into one meter, and when their sum crosses the budget the
explanation stops there and says which budget, instead of reading the cut-short re-run as a
changed answer."""

from __future__ import annotations

from agentfootprint import Agent, Budget, define_fact
from agentfootprint.explain import localize_context_bug
from agentfootprint.providers import Price, mock

PRICES = {"house-model": Price(input=1.0, output=2.0)}
WRONG = "Your favourite colour is blue."


def _agent(budget: Budget) -> Agent:
    def respond(request: object) -> dict[str, object]:
        system = str(getattr(request, "system", "") or "")
        text = WRONG if "blue" in system else "I do not know your favourite colour."
        return {"content": text, "usage": {"input": 1000, "output": 100}}

    return Agent(provider=mock(respond=respond), model="house-model", budget=budget,
                 context=[define_fact(id="stale", data="The user's favourite colour is blue."),
                          define_fact(id="greeting", data="Greet the user politely.")])


async def test_rerun_spending_is_judged_together_and_stops_the_explanation() -> None:
    # one run costs $0.0012: the third re-run crosses $0.003, so no fourth one starts
    agent = _agent(Budget(max_cost_usd=0.003, prices=PRICES))
    result = await agent.run("What is my favourite colour?")
    assert result.content == WRONG and result.stopped_early is None
    report = await localize_context_bug(result, is_wrong=lambda answer: "blue" in answer)
    budget_notes = [n for n in report.notes if n.startswith("[budget]")]
    assert budget_notes and "max_cost_usd" in budget_notes[0]
    assert "re-run(s)" in budget_notes[0]
    assert not report.causes  # nothing is claimed from runs the budget cut short
    assert "after 3 re-run(s)" in budget_notes[0]


async def test_without_a_crossing_the_explanation_proves_the_cause() -> None:
    agent = _agent(Budget(max_cost_usd=10.0, prices=PRICES))
    result = await agent.run("What is my favourite colour?")
    report = await localize_context_bug(result, is_wrong=lambda answer: "blue" in answer)
    assert [c.members for c in report.causes] == [("stale",)] or any(
        "stale" in str(c) for c in report.causes)
    assert not [n for n in report.notes if n.startswith("[budget]")]


async def test_a_cut_short_explanation_reads_not_proven_yet() -> None:
    agent = _agent(Budget(max_cost_usd=0.003, prices=PRICES))
    result = await agent.run("What is my favourite colour?")
    report = await localize_context_bug(result, is_wrong=lambda answer: "blue" in answer)
    text = str(report)
    assert "NOT PROVEN YET" in text and "NOTHING PROVEN" not in text
    assert "fact 'stale'" in text.split("NOT PROVEN YET", 1)[1].splitlines()[0]
