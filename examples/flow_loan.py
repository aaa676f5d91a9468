"""A plain business flow that explains itself (no LLM): USAGE.md §7.

Run: python examples/flow_loan.py
"""

import asyncio

from agentfootprint.flow import causal_chain, decide, flow_chart


def receive(scope):
    scope["applicant"] = scope.args["applicant"]
    scope["credit_score"] = scope.args.get("credit_score", 580)


def assess(scope):
    scope["risk"] = "high" if scope["credit_score"] < 620 else "low"


def reject(scope):
    scope["decision"] = f"Rejected {scope['applicant']}"


def approve(scope):
    scope["decision"] = f"Approved {scope['applicant']}"


chart = (
    flow_chart("ReceiveApplication", receive)
    .then("AssessRisk", assess)
    .decide("Route", lambda s: decide(s, [
        {"when": {"credit_score": {"lt": 620}}, "then": "reject", "label": "Low credit"},
    ], default="approve"))
        .branch("reject", "Reject", reject)
        .branch("approve", "Approve", approve)
        .end()
    .build()
)


async def main() -> None:
    run = await chart.run({"applicant": "Bob"})
    print(run.narrative())
    print()
    print(causal_chain(run, "Reject"))


if __name__ == "__main__":
    asyncio.run(main())
