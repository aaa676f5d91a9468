"""A chart with three pause points, importable by a fresh process (used by test_resume.py).

The pauses sit in three nesting situations: a plain top-level stage, a branch of a decider
that has its own ``next`` (the decider's continuation must survive the pause), and the tail
branch of a looping decider inside a mounted subflow (the subflow's private state, its mapped
input and the visit counts of its loop must survive the pause).
"""

from __future__ import annotations

from typing import Any

from agentfootprint.flow import Chart, flow_chart, pause

# -- top level -------------------------------------------------------------------------------


def _intake(scope: Any) -> None:
    scope["items"] = list(scope.args.get("items", []))
    scope["history"] = ["intake"]
    scope["scratch"] = "temporary"


def _accumulate(scope: Any) -> None:
    scope["total"] = sum(scope["items"])
    scope["history"] = [*scope["history"], "accumulated"]


def _review(scope: Any) -> Any:
    scope["review_asked"] = True
    return pause({"question": "approve the total?", "total": scope["total"]})


def _review_resume(scope: Any, answer: Any) -> None:
    scope["reviewer"] = answer["by"]
    scope["approved"] = bool(answer["ok"])
    scope["history"] = [*scope["history"], f"reviewed by {answer['by']}"]


def _tally(scope: Any) -> None:
    scope["amount"] = scope["total"] * 10
    del scope["scratch"]


def _route(scope: Any) -> str:
    return "manual" if scope["amount"] > 50 else "auto"


def _manual(scope: Any) -> Any:
    scope["route"] = "manual"
    return pause({"question": "manual check", "amount": scope["amount"]})


def _manual_resume(scope: Any, answer: Any) -> None:
    scope["amount"] = scope["amount"] - answer["discount"]
    scope["history"] = [*scope["history"], "manual checked"]


def _auto(scope: Any) -> None:
    scope["route"] = "auto"


def _record(scope: Any) -> None:
    scope["history"] = [*scope["history"], f"routed {scope['route']}"]
    del scope["review_asked"]


def _finish(scope: Any) -> str:
    scope["done"] = True
    scope["history"] = [*scope["history"], "finished"]
    return "ok"


# -- the subflow -----------------------------------------------------------------------------


def _draft(scope: Any) -> None:
    scope["trail"] = [f"draft {scope.args['amount']}"]
    scope["passes"] = 0


def _polish(scope: Any) -> None:
    scope["passes"] = scope["passes"] + 1
    scope["trail"] = [*scope["trail"], f"polish {scope['passes']}"]


def _more(scope: Any) -> str:
    return "again" if scope["passes"] < 3 else "sign"


def _again(scope: Any) -> None:
    scope["trail"] = [*scope["trail"], "again"]


def _sign(scope: Any) -> Any:
    scope["trail"] = [*scope["trail"], "sign requested"]
    return pause({"question": "sign?", "amount": scope.args["amount"]})


def _sign_resume(scope: Any, answer: Any) -> None:
    scope["signature"] = answer
    scope["trail"] = [*scope["trail"], f"signed {answer}"]


def build_contract() -> Chart:
    """The subflow: draft, a polish loop, then a pausable signature in the loop's exit branch."""
    return (
        flow_chart("Draft", _draft, id="draft")
        .then("Polish", _polish, id="polish")
        .decide("More?", _more, id="more")
        .branch("again", "Again", _again, loop_to="polish")
        .branch("sign", "Sign", _sign, resume=_sign_resume)
        .end()
        .build()
    )


def build_chart() -> Chart:
    """The whole approval chart; every call builds an identical (same fingerprint) chart."""
    return (
        flow_chart("Intake", _intake, id="intake")
        .then("Accumulate", _accumulate, id="accumulate")
        .then("Review", _review, id="review", resume=_review_resume)
        .then("Tally", _tally, id="tally")
        .decide("Route", _route, id="route")
        .branch("manual", "Manual check", _manual, resume=_manual_resume)
        .branch("auto", "Auto approve", _auto)
        .end()
        .then("Record", _record, id="record")
        .subflow(
            "contract",
            build_contract(),
            input=lambda view: {"amount": view["amount"]},
            output=lambda view: {"signature": view["signature"], "trail": view["trail"]},
        )
        .then("Finish", _finish, id="finish")
        .build()
    )


ANSWERS: list[Any] = [{"by": "ana", "ok": True}, {"discount": 7}, "ana-sig"]
"""The answers to the three pauses, in the order the run asks them."""
