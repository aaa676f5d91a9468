"""``Agent(..., executor=...)``: every ``run()`` of the agent goes through an executor.

``agent = Agent(..., executor=dbos_executor())`` makes each ``await agent.run(msg)`` a job of
that executor — a durable DBOS workflow that another process recovers after a crash, a task on
a Celery worker — and hands back the usual ``RunResult``. The executors live in
``agentfootprint.distributed``, above this layer, so the agent layer owns the port they plug
into (:class:`AgentExecutor`) and never imports them.

A job crosses processes as data, so the agent travels **by reference**: an agent assigned at
the top level of an importable module (``myapp/agents.py``: ``agent = Agent(...)``) is
``"myapp.agents:agent"``, and a worker or a recovering process imports that module and takes
the instance it finds there. To know the module, an ``Agent`` notes at construction which module
built it (:func:`~agentfootprint._refs.defined_in`); :func:`reference_of` then finds its
top-level name. An agent built in the script being run (``__main__``) or inside a function has no
name another process can import, and an executor that runs or recovers jobs elsewhere refuses
it with the fix; an in-process executor takes any agent.

The executor is deliberately not one of the arguments a copy is rebuilt from
(``agent._replace``): the copies are what runs (on a worker, in a workflow, as an explanation's
re-run), and each of them runs right where it is. :func:`run_copy` makes the copy a job runs,
carrying the listeners (``agent.on``) over, and :func:`fresh_copy` forks the provider too, so
each run has its own agent state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .._refs import defined_in, live_ref, load_ref, name_in
from ..errors import ConfigurationError, RunError

if TYPE_CHECKING:
    from ..memory._identity import MemoryIdentity
    from ..runs._recording import Recording
    from ._agent import Agent, RunResult

__all__ = ["AgentExecutor", "executor_option", "fresh_copy", "reference_of",
           "result_from_recording", "run_copy", "run_through"]

FIX = "define the agent in an importable module or pass a factory 'module:make_agent'"


class AgentExecutor(Protocol):
    """What ``Agent(executor=...)`` takes: it runs one run of ``agent`` as a job and hands
    back its ``RunResult`` (every executor of ``agentfootprint.distributed`` does)."""

    async def run_agent(self, agent: Any, message: str, *, run_id: str | None = None,
                        options: Mapping[str, Any] | None = None) -> Any:
        """Run ``agent`` on ``message`` there; ``options`` are the JSON ``run()`` keywords."""
        ...


def executor_option(executor: object) -> tuple[AgentExecutor | None, str | None]:
    """The ``executor=`` an Agent was given, checked, and the module building the agent."""
    if executor is not None and not callable(getattr(executor, "run_agent", None)):
        raise ConfigurationError(
            f"executor={executor!r} cannot run an agent; pass dbos_executor(...), "
            "celery_executor(app) or InProcessExecutor() from agentfootprint.distributed")
    return executor, defined_in()  # type: ignore[return-value]


def reference_of(agent: Any, *, shares_process: bool) -> str:
    """``"module:name"`` under which another process finds ``agent`` (checked to resolve to
    ``agent`` here). ``shares_process``: the job runs in this process, so an agent without an
    importable name gets a name only this process resolves."""
    module = getattr(agent, "_defined_in", None)
    name = name_in(module, agent) if isinstance(module, str) else None
    if name is not None and (module != "__main__" or shares_process):
        ref = f"{module}:{name}"
        try:
            same = load_ref(ref) is agent
        except ConfigurationError:
            same = False
        if same:
            return ref
    if shares_process:
        return live_ref(agent)
    label = getattr(agent, "name", type(agent).__name__)
    if module == "__main__":
        raise ConfigurationError(
            f"agent {label!r} is defined in the script being run (__main__), which another "
            f"process cannot import; {FIX}")
    where = f"of module {module!r}" if module else "of an importable module"
    raise ConfigurationError(
        f"agent {label!r} is not a top-level name {where} (built inside a function?), so "
        f"another process cannot find it; {FIX}")


def run_copy(agent: Agent, **changes: Any) -> Agent:
    """A copy of ``agent`` for one run (``changes`` applied, no executor), listening with the
    listeners ``agent.on(...)`` registered."""
    copy = agent._replace(**changes)
    copy.events = copy.spec.dispatcher = agent.events
    return copy


def fresh_copy(agent: Agent) -> Agent:
    """What a job naming a module-level ``agent`` runs: a copy whose provider is forked
    (``Provider.fork``: a scripted model starts afresh, a real one is shared), so each run is
    the same wherever it lands, as if a factory had built the agent for it."""
    return run_copy(agent, provider=agent._init_kwargs["provider"].fork())


async def run_through(agent: Agent, message: str, *, continue_from: Mapping[str, Any] | None,
                      run_id: str | None, timeout: float | None,
                      identity: MemoryIdentity | None, deps: Any) -> RunResult:
    """``agent.run(...)`` as a job of ``agent.executor`` (see the module)."""
    if not isinstance(message, str):
        raise ConfigurationError(f"run() takes the user's message as a str, got {message!r}")
    if deps is not None:
        raise ConfigurationError(
            "deps= cannot travel with a run on an executor; have the agent's tools reach what "
            "they need, or run it without executor=")
    if identity is not None and identity is not agent.identity:
        raise ConfigurationError(
            "identity= per run cannot travel with a run on an executor; build the agent with "
            "identity=..., or run it without executor=")
    options: dict[str, Any] = {}
    if timeout is not None:
        options["timeout"] = timeout
    if continue_from is not None:
        options["continue_from"] = dict(continue_from)
    executor: Any = agent.executor
    result: RunResult = await executor.run_agent(agent, message, run_id=run_id,
                                                 options=options)
    if not result.paused:
        agent.last = result
    return result


def result_from_recording(agent: Agent, recording: Recording) -> RunResult:
    """The ``RunResult`` of a run another process made, read back from its recording (as
    recorded: what a redaction policy masked stays masked)."""
    from ..flow._run import FlowRun

    if recording.status not in ("done", "paused"):
        raise RunError(f"run {recording.run_id!r} ended {recording.status!r} on the executor; "
                       "its recording in the run store shows where it stopped")
    log = recording.commit_log()
    state = log.state_at(len(log) - 1) if len(log) else {}
    run = FlowRun(run_id=recording.run_id, chart=agent.chart, status=recording.status,  # type: ignore[arg-type]
                  output=recording.output, state=state, log=log, redaction=agent.redaction)
    return agent._result(run)
