"""Schemathesis against ``agentfootprint serve``: every JSON route of the served OpenAPI document,
fuzzed with an API key, answers as the document says.

Why a real server (uvicorn on a free 127.0.0.1 port, started by this module) and not the ASGI
app in process: schemathesis sends what a network client can send — malformed percent-escapes
and control characters in paths, odd header values, bodies whose Content-Length disagrees —
and uvicorn's HTTP parser decides what reaches the app; in process those requests would
either never be built or skip the parser. The agent is ``tests/serve/serve_factories.py``
(the mock provider), the sessions a SQLite file.

The checks: ``not_a_server_error`` (no 5xx), ``status_code_conformance`` (only documented
statuses), ``content_type_conformance``, ``response_headers_conformance``,
``response_schema_conformance`` (the body matches the status's schema), and the two that judge
the app's validation: ``negative_data_rejection`` (invalid input is refused with a 4xx) and
``positive_data_acceptance`` (valid input is not refused; 404 for an id that names no session
is documented and allowed; not on the resume route, see ``RESUME``); a case negative only in
its Authorization header (the test always sends a key) or in query parameters the document
does not name (ignored) is not held to ``negative_data_rejection``. Generated session ids
name no session, so a third of the cases use a session of Alice's that is idle and a third one
that is paused on a check-in (the resume route's 200 and 202, the messages route's 409); the
paused one is paused again after a case resumed it. A stateful run follows the document's
links (start a session, then use its id). Bounded: 20 examples per operation, the module in
under a minute.
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("uvicorn")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis import checks as st_checks  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))

from live_server import LiveServer, bearer  # noqa: E402

CHECKS = [st_checks.not_a_server_error, st_checks.status_code_conformance,
          st_checks.content_type_conformance, st_checks.response_headers_conformance,
          st_checks.response_schema_conformance, st_checks.negative_data_rejection,
          st_checks.positive_data_acceptance]
RESUME = "/sessions/{session_id}/resume"
"""Its ``answer`` may be any JSON (the schema cannot say which answer a given pause takes), so
a schema-valid answer the pause cannot take is a documented 422 naming the answer wanted:
``positive_data_acceptance`` is not run on it."""
BOUNDED = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                   phases=[Phase.explicit, Phase.generate],
                   suppress_health_check=list(HealthCheck))


class Served:
    """The server, and two of Alice's sessions: one idle, one paused on a check-in."""

    def __init__(self, workdir: Path) -> None:
        self.server = LiveServer(sessions=f"sqlite:{workdir / 'sessions.db'}", workdir=workdir)
        with self.server.client() as client:
            self.idle = client.post("/sessions").json()["id"]
            self.paused = client.post("/sessions").json()["id"]
        self.pause_again()

    def pause_again(self) -> None:
        """Leave ``paused`` paused (a case may have resumed it)."""
        with self.server.client() as client:
            state = client.get("/sessions").json()["sessions"]
            status = next(s["status"] for s in state if s["id"] == self.paused)
            if status != "paused":
                answer = client.post(f"/sessions/{self.paused}/messages",
                                     json={"message": "refund please"})
                assert answer.status_code == 202, answer.text


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    found = Served(tmp_path_factory.mktemp("schemathesis"))
    try:
        yield found
    finally:
        found.server.stop()


def _only_ignorable_negatives(case: Any) -> bool:
    """Whether the case is negative only in what this test or HTTP makes valid again: its
    Authorization header (the test always sends Alice's key) and query parameters the
    document does not name (ignored, as HTTP servers do) while ``limit`` is valid."""
    meta = getattr(case, "_meta", None)
    if meta is None:
        return False
    negative = {str(location.value) for location, info in meta.components.items()
                if info.mode.is_negative}
    if not negative or not negative <= {"header", "query"}:
        return False
    limit = (case.query or {}).get("limit", 50)
    text = "" if isinstance(limit, bool) else str(limit)
    return re.fullmatch(r"[0-9]{1,4}", text) is not None and 1 <= int(text) <= 1000


def _operations(url: str) -> list[Any]:
    """The served document's operations (schemathesis loads it from the server)."""
    loaded = schemathesis.openapi.from_url(f"{url}/openapi.json")
    return [result.ok() for result in loaded.get_all_operations()]


def test_every_json_route_answers_as_documented(served: Served) -> None:
    """No 5xx, only documented statuses, bodies and content types as documented, bad input
    refused and good input accepted, across every operation of the document.

    Each operation is its own Hypothesis test over ``operation.as_strategy()`` (positive and
    negative data), not ``schema.parametrize()``: its lazy form (the schema from a fixture,
    needed because the server starts in one) does not run under pytest 9.2.
    """
    operations = _operations(served.server.url)
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {
        "POST /sessions", "GET /sessions", "POST /sessions/{session_id}/messages",
        "POST /sessions/{session_id}/resume", "GET /sessions/{session_id}/transcript",
        "GET /healthz"}
    tried: dict[str, int] = {}
    for operation in operations:
        _fuzz(operation, served, tried)
    assert all(tried.get(f"{op.method.upper()} {op.path}", 0) >= 1 for op in operations), tried
    assert all(count >= 10 for label, count in tried.items() if "/sessions" in label), tried


def _fuzz(operation: Any, served: Served, tried: dict[str, int]) -> None:
    label = f"{operation.method.upper()} {operation.path}"

    @BOUNDED
    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
           | operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
    def fuzz(case: Any) -> None:
        ids = case.path_parameters or {}
        if "session_id" in ids:
            raw = str(ids["session_id"]).encode("utf-8", "surrogatepass")
            pick = zlib.crc32(raw) % 3
            if pick:
                case.path_parameters = {
                    **ids, "session_id": served.idle if pick == 1 else served.paused}
        checks = [c for c in CHECKS if not (
            (c is st_checks.positive_data_acceptance and operation.path == RESUME)
            or (c is st_checks.negative_data_rejection and _only_ignorable_negatives(case)))]
        case.call_and_validate(headers=bearer(), checks=checks, timeout=30)
        tried[label] = tried.get(label, 0) + 1
        served.pause_again()

    fuzz()


def test_the_document_links_hold_in_a_stateful_run(served: Served) -> None:
    """Schemathesis's state machine: sequences of calls that start sessions and use their ids
    (the document's inferred links), each response checked as above."""
    loaded = schemathesis.openapi.from_url(f"{served.server.url}/openapi.json")
    machine = loaded.as_state_machine()

    class Checked(machine):  # type: ignore[misc,valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": bearer(), "timeout": 30}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS[:5])

    Checked.run(settings=settings(max_examples=15, stateful_step_count=5, deadline=None,
                                  derandomize=True, database=None,
                                  suppress_health_check=list(HealthCheck)))
