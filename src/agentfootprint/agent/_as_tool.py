"""An agent used as a tool of another agent, its run recorded and linked from the caller's.

``agent.as_tool(name=..., description=...)`` is a ``Tool`` with one argument, ``request``: each
call runs the agent once on it (a fresh conversation) and its answer is the tool's result. The
inner run is a run of its own, with the id ``<outer run id>:<tool call id>`` when that is a valid
run id. The calling ToolCalls step records the link (``sub_runs``: tool call id → the tool's name
and the inner run id) and the inner recording (``sub_recordings``), both declared in the trace
contract, so the caller's recording explains across the call in another process too:
``backtrack`` crosses from the tool result into the inner run, ``suspects_of`` offers the inner
agent's sources, and ``without(ids)`` on the tool rebuilds the inner agent.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..tools._tool import Tool, ToolContext, define_tool
from ._sub_runs import end_sub_runs, report_sub_runs
from ._sub_runs import reporter as _reporter

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["AgentTool", "agent_tool", "end_sub_runs", "report_sub_runs"]

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class AgentTool(Tool):
    """A tool that runs an agent: ``agent.as_tool(...)``."""

    agent: Agent = field(repr=False)
    """The agent each call runs."""

    def _map_agents(self, fn: Callable[[Agent], Agent]) -> AgentTool:
        """The same tool over ``fn(agent)`` (what a composition-wide rebuild applies)."""
        return agent_tool(fn(self.agent), name=self.name, description=self.description)

    def without(self, ids: Iterable[str]) -> AgentTool:
        """The same tool, its agent rebuilt without the sources named in ``ids``."""
        removed = frozenset(ids)
        return self._map_agents(lambda agent: agent.without(removed))


def agent_tool(agent: Agent, *, name: str, description: str) -> AgentTool:
    """``agent`` as a tool named ``name``: the model sends a ``request``, the agent answers it."""
    if not isinstance(description, str) or not description.strip():
        raise ConfigurationError(
            f"as_tool(name={name!r}) needs a description: say what the agent does, so the "
            "calling model knows when to use it")
    schema = {"type": "object", "additionalProperties": False, "required": ["request"],
              "properties": {"request": {
                  "type": "string", "description": f"What to ask {name}, in full."}}}

    async def execute(args: dict[str, Any], ctx: ToolContext) -> str:
        from ..runs._recording import Recording  # only a call records one

        wanted = f"{ctx.run_id}:{ctx.tool_call_id}"
        run_id = wanted if _RUN_ID.fullmatch(wanted) else uuid.uuid4().hex
        result = await agent.run(str(args["request"]), run_id=run_id)
        report = _reporter.get()
        if report is not None:
            recording = Recording.of(result).model_dump(mode="json")
            report(name, ctx.tool_call_id, result.run_id, recording)
        return result.content

    base = define_tool(name, description, schema, execute)
    return AgentTool(name=base.name, description=base.description,
                     input_schema=base.input_schema, execute=base.execute,
                     validate=base.validate, blocking=base.blocking,
                     side_effects=_has_effects(agent), agent=agent)


def _has_effects(agent: Agent) -> bool:
    """Whether running ``agent`` again could change the world: it writes memory, or one of its
    tools does not declare itself free of side effects. A model call alone is safe to repeat."""
    options: dict[str, Any] = getattr(agent, "_init_kwargs", None) or {}
    if options.get("memory"):
        return True
    return any(getattr(t, "side_effects", True) for t in options.get("tools", ()))
