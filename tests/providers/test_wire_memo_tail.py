"""``WireMemo`` given committed lists themselves (what the loop sends): an extension with no
framework-only field shares the messages, one with ``injected_by`` gets a cleaned copy, and the
committed history is never changed."""

from __future__ import annotations

from typing import Any

from agentfootprint.flow._values import freeze, settle, thaw
from agentfootprint.providers._base import WireMemo, wire_messages


def _grow(history: Any, *added: dict[str, Any]) -> Any:
    read = thaw(history)
    read.extend(added)
    settled = settle(history, read)
    assert settled is not None
    return settled[0]


def test_committed_lists_extended_with_and_without_injected_messages() -> None:
    memo = WireMemo()
    history = freeze([{"role": "user", "content": "q"}])
    assert memo(history) == wire_messages(history)
    plain = _grow(history, {"role": "assistant", "content": "a"})
    out = memo(plain)
    assert out == wire_messages(plain) and out[1] is plain[1]  # shared, not copied
    hinted = _grow(plain, {"role": "user", "content": "h", "injected_by": "fact-1"},
                   {"role": "tool", "content": "t"})
    out = memo(hinted)
    assert out == wire_messages(hinted) and "injected_by" not in out[2]
    assert hinted[2]["injected_by"] == "fact-1" and out[3] is hinted[3]
    out[2]["content"] = "changed by a provider"  # its own copy
    later = _grow(hinted, {"role": "assistant", "content": "b"})
    again = memo(later)
    assert again == wire_messages(later) and again[2]["content"] == "h"
    assert memo(plain) == wire_messages(plain)  # an older history: converted whole again
