"""Redaction: a planted secret never reaches the log, the narrative, events or evidence."""

from __future__ import annotations

import json
from typing import Any

import pytest
from event_capture import Events

from agentfootprint import ConfigurationError
from agentfootprint.flow import Chart, NarrativeRecorder, causal_chain, deferred, flow_chart, pause
from agentfootprint.flow._causal import format_causal_chain
from agentfootprint.flow._redact import REDACTED, RedactionPolicy

SECRET = "hunter2-XYZZY-secret"
TOKEN = "tok-PLUGH-0451"


def dump(value: Any) -> str:
    """Everything reachable from ``value`` as text (records and dataclasses included)."""

    def default(obj: Any) -> Any:
        if hasattr(obj, "to_json"):
            return obj.to_json()
        if hasattr(obj, "__dataclass_fields__"):
            return {f: getattr(obj, f) for f in obj.__dataclass_fields__}
        return repr(obj)

    return json.dumps(value, default=default)


def policy() -> RedactionPolicy:
    return RedactionPolicy(keys=["password"], patterns=[r"_token$"], emit_patterns=[r"^secret\."])


def noop(scope: Any) -> None:
    return None


seen_by_code: dict[str, Any] = {}


def _login(scope: Any) -> None:
    scope["password"] = scope.env["pw"]
    scope["api_token"] = TOKEN
    scope.emit("secret.login", {"pw": SECRET})
    scope.emit("app.login", {"user": "bob"})


def _check(scope: Any) -> None:
    seen_by_code["password"] = scope["password"]
    seen_by_code["token"] = scope.api_token
    scope["ok"] = scope["password"] == SECRET


def _chart() -> Chart:
    inner = (
        flow_chart("Verify", lambda s: s.__setitem__("session_token", s["password"] + "!"))
        .then("Echo", lambda s: s.__setitem__("copy_token", s["session_token"]))
        .build()
    )
    return (
        flow_chart("Login", _login)
        .then("Check", _check)
        .decide("Route", rules=[
            {"when": {"password": {"ne": ""}, "ok": {"eq": True}}, "then": "in", "label": "Has pw"},
            {"when": lambda s: s["api_token"] == TOKEN, "then": "in"},
        ], default="out")
        .branch("in", "In", noop)
        .branch("out", "Out", noop)
        .end()
        .select("Pick", rules=[{"when": lambda s: len(s["password"]) > 3, "then": "audit"}])
        .branch("audit", "Audit", noop)
        .end()
        .subflow("sf", inner, input=lambda v: {"password": v["password"]},
                 output=lambda v: {"user_token": v["copy_token"]})
        .then("Done", lambda s: s.__delitem__("password"))
        .build()
    )


def assert_clean(text: str) -> None:
    assert SECRET not in text
    assert TOKEN not in text
    assert "hunter2" not in text


async def test_secret_never_reaches_log_narrative_events_or_evidence() -> None:
    """A secret under redacted keys is absent from the log, narrative, every event and evidence."""
    events = Events()
    live = Events("deferred")
    chart = _chart()
    narrative = NarrativeRecorder(chart)
    run = await chart.run(env={"pw": SECRET}, redaction=policy(),
                          recorders=[events, deferred(live), narrative])
    assert run.status == "done"
    # Stage code saw the real values.
    assert seen_by_code == {"password": SECRET, "token": TOKEN}
    assert run.state["ok"] is True
    assert run.state["user_token"] == SECRET + "!"
    # The log, as JSON and as records.
    assert_clean(json.dumps(run.log.to_json()))
    assert_clean(dump(run.records))
    # The narrative, rendered and live.
    assert_clean(run.narrative())
    assert_clean(narrative.text())
    # Every event, inline and deferred.
    assert_clean(dump(events.events))
    assert_clean(dump(live.events))
    kinds = {e.name for e in events.events}
    assert {"read", "write", "commit", "emit", "decision", "selected",
            "subflow_entry", "subflow_exit"} <= kinds
    # Decision evidence.
    for record in run.records:
        assert_clean(dump(record.decision))
    # The causal slice.
    assert_clean(format_causal_chain(causal_chain(run, "Done")))


async def test_redacted_values_are_marked_not_dropped() -> None:
    """Redacted values are recorded as the one marker, so the shape of the run stays visible."""
    events = Events()
    run = await _chart().run(env={"pw": SECRET}, redaction=policy(), recorders=[events])
    login = run.records[0]
    assert [(c.key, c.op, c.value) for c in login.changes] == [
        ("password", "set", REDACTED), ("api_token", "set", REDACTED),
    ]
    assert dict(login.emits) == {"secret.login": REDACTED, "app.login": {"user": "bob"}}
    writes = {(e.key, e.value) for e in events.events
              if e.name == "write" and e.key in ("password", "api_token")}
    assert writes == {("password", REDACTED), ("api_token", REDACTED)}
    reads = {(e.key, e.value) for e in events.events
             if e.name == "read" and e.key == "password"}
    assert reads == {("password", REDACTED)}
    route = next(r for r in run.records if r.stage_id == "Route")
    condition = route.decision["evidence"]["rules"][0]["conditions"][0]
    assert condition == {"key": "password", "op": "ne", "threshold": "", "actual": REDACTED,
                         "result": True}
    assert "  Step 1: Read password = \"[REDACTED]\"" in run.narrative().splitlines()


async def test_function_rule_inputs_are_redacted() -> None:
    """Inputs captured from a predicate rule show the marker for redacted keys."""
    run = await _chart().run(env={"pw": SECRET}, redaction=policy())
    pick = next(r for r in run.records if r.stage_id == "Pick")
    inputs = pick.decision["evidence"]["rules"][0]["inputs"]
    assert inputs == [{"key": "password", "value": REDACTED}]


async def test_subflow_boundary_values_are_redacted() -> None:
    """Subflow entry/exit events and the enter record's seeded input are redacted by key."""
    events = Events()
    run = await _chart().run(env={"pw": SECRET}, redaction=policy(), recorders=[events])
    enter = next(r for r in run.records if r.kind == "subflow-enter")
    assert [(c.key, c.value) for c in enter.changes] == [("password", REDACTED)]
    entry = next(e for e in events.events if e.name == "subflow_entry")
    assert entry.value == {"password": REDACTED}
    exit_event = next(e for e in events.events if e.name == "subflow_exit")
    assert exit_event.value["session_token"] == REDACTED
    assert "  Input: password = \"[REDACTED]\"" in run.narrative().splitlines()


async def test_seeded_state_is_redacted_in_the_log() -> None:
    """Initial state under a redacted key is stored as the marker in the log."""
    chart = flow_chart("Use", lambda s: s.__setitem__("n", len(s["password"]))).build()
    run = await chart.run(state={"password": SECRET}, redaction=policy())
    assert run.state["n"] == len(SECRET)
    assert run.log.initial == {"": {"password": REDACTED}}
    assert_clean(json.dumps(run.log.to_json()))
    assert_clean(run.narrative())


async def test_run_start_event_does_not_leak_redacted_args() -> None:
    """Run input under a redacted key is not delivered in the clear by the run_start event."""
    events = Events()
    chart = flow_chart("Use", lambda s: None).build()
    await chart.run({"password": SECRET, "user": "bob"}, redaction=policy(), recorders=[events])
    assert_clean(dump(events.events))


async def test_checkpoint_log_is_redacted() -> None:
    """A paused run's checkpoint embeds the redacted log, never the secret in its log."""
    chart = flow_chart("Ask", lambda s: (s.__setitem__("password", SECRET), pause("ok?"))[1],
                       resume=noop).build()
    run = await chart.run(redaction=policy())
    assert run.paused
    assert run.checkpoint is not None
    assert_clean(json.dumps(run.checkpoint.log))


async def test_without_a_policy_values_are_recorded() -> None:
    """Without a policy the same run records the values (the tests above are meaningful)."""
    run = await _chart().run(env={"pw": SECRET})
    assert SECRET in json.dumps(run.log.to_json())


def test_invalid_pattern_is_a_configuration_error() -> None:
    """An invalid regular expression in patterns or emit_patterns raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match=r"patterns entry '\(unclosed'"):
        RedactionPolicy(patterns=["(unclosed"])
    with pytest.raises(ConfigurationError, match=r"emit_patterns entry '\[bad'.*re\.escape"):
        RedactionPolicy(emit_patterns=["[bad"])


def test_policy_matching_and_report() -> None:
    """Keys match exactly, patterns by search; report() lists rules, never values."""
    p = policy()
    assert p.is_redacted("password")
    assert not p.is_redacted("password2")
    assert p.is_redacted("api_token")
    assert not p.is_redacted("token_count")
    assert p.is_redacted_emit("secret.login")
    assert not p.is_redacted_emit("app.secret.login")
    assert p.report() == {"keys": ["password"], "patterns": ["_token$"],
                          "emit_patterns": [r"^secret\."]}
