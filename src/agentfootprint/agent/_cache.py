"""The stable prefix of an LLM call, from the injections' cache policies (prompt caching).

A prompt cache pays off on the part of a request that the next call sends again unchanged.
Each call of the loop says how long that part is (``LLMRequest.cache``), and the provider
marks it its own way: Anthropic with ``cache_control`` breakpoints (at most four: we use three),
OpenAI by itself, as long as the stable part is a prefix — which the slots make sure of (the
system prompt's pieces go most stable first; the tool list's fixed tools come first).

* **system**: the characters of the leading pieces whose policy is ``always`` or
  ``while_active`` (the base prompt's policy is ``always``);
* **tools**: the leading tools that do not depend on what fired this iteration (the agent's
  own tools, ``read_skill``, skills' tools offered from the start), none carrying a step banner;
* **messages**: the whole conversation sent, when the loop may call again (an agent with
  tools): the next call repeats it and adds to its end. A single call caches none of it.

The prefix is recorded with the call's usage, so the recording says what was marked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..context._slots import CACHEABLE
from ..flow import Scope
from ..providers._base import CachePrefix, Message, ToolSchema
from ..runs import trace
from ._spec import AgentSpec

__all__ = ["cache_prefix"]

_FIXED_TOOLS = frozenset(("static", "read_skill"))


def cache_prefix(spec: AgentSpec, scope: Scope, messages: Sequence[Message],
                 tools: Sequence[ToolSchema]) -> CachePrefix | None:
    """The stable prefix of the call about to be made (None: nothing worth marking)."""
    system = _stable_system(spec, scope)
    fixed = _stable_tools(spec, scope, len(tools))
    again = spec.with_tools and bool(tools)
    prefix = CachePrefix(system=system, tools=fixed, messages=len(messages) if again else 0)
    return prefix if system or fixed or prefix["messages"] else None


def _stable_system(spec: AgentSpec, scope: Scope) -> int:
    text = scope.get(trace.SYSTEM_PROMPT) or ""
    if not text:
        return 0
    rows = scope.get(trace.SYSTEM_SLOT) if spec.tracks_context else None
    if not rows:  # no injections: the prompt is the base prompt alone
        return len(text) if spec.system_cache in CACHEABLE else 0
    end = 0
    for row in rows:
        if row.get("cache") not in CACHEABLE:
            break
        end = int(row["end"])
    return end


def _stable_tools(spec: AgentSpec, scope: Scope, sent: int) -> int:
    if not sent:
        return 0
    rows: Sequence[Any] | None = scope.get(trace.TOOLS_SLOT) if spec.injections else None
    if not rows:  # no injections: the agent's own tools, the same on every call
        return sent
    offered = {s.id for s in spec.skills if not s.tools_while_active}
    fixed = 0
    for row in rows:
        source = row.get("source")
        if "step" in row or not (source in _FIXED_TOOLS or source in offered):
            break
        fixed += 1
    return min(fixed, sent)
