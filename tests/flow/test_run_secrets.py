"""RunSecrets: what a run masked, learned as it goes, and masked in every later string."""

from __future__ import annotations

from agentfootprint.flow._redact import REDACTED, RedactionPolicy, RunSecrets

SECRET = "sk-live-SECRET-0123456789"


def test_a_masked_value_is_masked_in_every_later_string_and_nothing_else_changes() -> None:
    """Learned from a masked key; strings repeating it are rewritten; an untouched value is
    returned as the same object (the log keeps sharing it with the state)."""
    secrets = RunSecrets(RedactionPolicy(keys=["api_key"]))
    assert not secrets.active
    secrets.learn(SECRET, REDACTED)
    clean = {"rows": [{"n": 1, "label": "ok"}]}
    assert secrets.scrub(clean) is clean
    shown = secrets.scrub({"error": f"rejected {SECRET}!", "rows": clean["rows"]})
    assert shown == {"error": f"rejected {REDACTED}!", "rows": clean["rows"]}
    assert shown["rows"] is clean["rows"]


def test_inside_a_masked_structure_only_long_leaves_count() -> None:
    """Short labels (roles, names) inside a masked value would blank out ordinary words."""
    secrets = RunSecrets(None)
    secrets.learn({"role": "user", "content": SECRET}, REDACTED)
    assert secrets.text("the user said " + SECRET) == f"the user said {REDACTED}"


def test_numbers_are_masked_only_where_asked() -> None:
    """A masked number leaves emitted payloads, never the log's counters."""
    secrets = RunSecrets(None)
    secrets.learn(4321, REDACTED)
    assert secrets.scrub({"pin": 4321}) == {"pin": 4321}
    assert secrets.scrub({"pin": 4321, "on": True}, numbers=True) == {"pin": REDACTED,
                                                                      "on": True}


def test_text_patterns_and_explicit_additions() -> None:
    """A pattern masks secret-shaped text no key held; add() names one more value."""
    secrets = RunSecrets(RedactionPolicy(text_patterns=[r"sk-live-[\w-]+"]))
    assert secrets.active
    assert secrets.text(f"key={SECRET};") == f"key={REDACTED};"
    secrets.add("Maya Lindqvist")
    secrets.add("ab")  # too short to search for: ignored
    assert secrets.text("ab Maya Lindqvist") == f"ab {REDACTED}"
