"""The offline demo: a loan flow that decides, then explains its decision from the log."""

from __future__ import annotations

from typing import Any

from .flow import causal_chain, flow_chart
from .flow.chart import Chart

__all__ = ["loan_chart", "run_demo"]


def _receive(scope: Any) -> None:
    scope["applicant"] = scope.args["applicant"]
    scope["credit_score"] = scope.args["credit_score"]
    scope["income"] = scope.args["income"]


def _assess(scope: Any) -> None:
    scope["risk"] = "high" if scope["credit_score"] < 620 or scope["income"] < 30_000 else "low"


def _reject(scope: Any) -> None:
    scope["decision"] = f"rejected: {scope['applicant']} is {scope['risk']} risk"


def _approve(scope: Any) -> None:
    scope["decision"] = f"approved: {scope['applicant']}"


def loan_chart() -> Chart:
    """Receive → assess → route on the credit score → reject or approve."""
    return (
        flow_chart("ReceiveApplication", _receive, description="Receive the application")
        .then("AssessRisk", _assess, description="Assess the applicant's risk")
        .decide("Route", rules=[
            {"when": {"credit_score": {"lt": 620}}, "then": "reject", "label": "Low credit"},
            {"when": {"risk": {"eq": "high"}}, "then": "reject", "label": "High risk"},
        ], default="approve", description="Route by credit and risk")
        .branch("reject", "Reject", _reject, description="Reject the application")
        .branch("approve", "Approve", _approve, description="Approve the application")
        .end()
        .build()
    )


def run_demo() -> str:
    """Run the flow for one applicant and return the narrative and the causal slice."""
    run = loan_chart().run_sync({"applicant": "Bob", "credit_score": 580, "income": 52_000})
    return "\n".join([
        f"Decision: {run.state['decision']}",
        "",
        "What happened:",
        run.narrative(),
        "",
        "Why (causal slice of the decision):",
        str(causal_chain(run, "Reject")),
    ])
