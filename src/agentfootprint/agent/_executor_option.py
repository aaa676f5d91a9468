"""``Agent(..., executor=...)``: every ``run()`` and ``resume()`` of the agent goes through an
executor.

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

``agent.resume(checkpoint, answer)`` of a paused run is a job of the executor too (the resumed
part is a DBOS workflow of its own, a Celery task on a worker), with the same agent rules. The
checkpoint (``RunResult.checkpoint``) and the answer travel as JSON: an answer must be JSON data
(``check_in_approved(by=...)``, a str, a dict of plain values), and anything else is refused
before it is sent, on every executor, so a script tried in-process behaves as it will on workers.

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

__all__ = ["AgentExecutor", "executor_name", "executor_option", "fresh_copy", "not_json",
           "reference_of", "result_from_recording", "resume_through", "run_copy", "run_through"]

FIX = "define the agent in an importable module or pass a factory 'module:make_agent'"


class AgentExecutor(Protocol):
    """What ``Agent(executor=...)`` takes: it runs one run of ``agent`` as a job and hands
    back its ``RunResult``, and continues a paused one the same way (every executor of
    ``agentfootprint.distributed`` does both)."""

    async def run_agent(self, agent: Any, message: str, *, run_id: str | None = None,
                        options: Mapping[str, Any] | None = None) -> Any:
        """Run ``agent`` on ``message`` there; ``options`` are the JSON ``run()`` keywords."""
        ...

    async def resume_agent(self, agent: Any, checkpoint: Mapping[str, Any] | str,
                           answer: object = None, *,
                           options: Mapping[str, Any] | None = None) -> Any:
        """``agent.resume(checkpoint, answer)`` there: ``checkpoint`` a paused run's (JSON)
        or a killed run's id, ``answer`` JSON, ``options`` the JSON ``resume()`` keywords."""
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


async def resume_through(agent: Any, checkpoint: Mapping[str, Any] | str, answer: object,
                         *, timeout: float | None, deps: Any) -> RunResult:
    """``agent.resume(...)`` as a job of ``agent.executor`` (an ``Agent``; the runner's
    ``resume`` calls it for whichever has an executor): the same by-reference agent and
    the same rules as :func:`run_through`; the checkpoint and the answer travel as JSON, so
    both are checked here, before anything is sent."""
    executor: Any = agent.executor
    if not callable(getattr(executor, "resume_agent", None)):
        raise ConfigurationError(
            f"executor {executor!r} of agent {agent.name!r} cannot resume a paused run (it has "
            "no resume_agent); give the agent an executor of agentfootprint.distributed, or "
            "resume with an agent built like this one without executor=")
    if deps is not None:
        raise ConfigurationError(
            "deps= cannot travel with a resume on an executor; have the agent's tools reach "
            "what they need, or resume with an agent built without executor=")
    if not isinstance(checkpoint, str) or checkpoint.lstrip().startswith(("{", "[")):
        agent._check_resumable(checkpoint, answer)  # refused here, as a local resume would be
        where = not_json(checkpoint)
        if where is not None:
            run_id = checkpoint.get("run_id") if isinstance(checkpoint, Mapping) else None
            raise ConfigurationError(
                f"the checkpoint of run {run_id!r} is not JSON ({where}), so it cannot travel "
                f"to the {executor_name(executor)} executor; resume the checkpoint the run "
                "returned, unchanged")
        where = not_json(answer)
        if where is not None:
            raise ConfigurationError(
                f"the answer {answer!r} cannot travel to the {executor_name(executor)} executor "
                f"({where}); an answer must be JSON data (a dict with str keys, list, str, "
                "int, float, bool or None), so pass plain data such as "
                "check_in_approved(by=...) or model.model_dump(mode='json')")
    options = {"timeout": timeout} if timeout is not None else {}
    result: RunResult = await executor.resume_agent(agent, checkpoint, answer, options=options)
    if not result.paused:
        agent.last = result
    return result


def executor_name(executor: object) -> str:
    """The name an executor goes by in messages (``dbos``, ``celery``, ``in-process``)."""
    name = getattr(executor, "name", None)
    return name if isinstance(name, str) else type(executor).__name__


def not_json(value: object, path: str = "") -> str | None:
    """Where ``value`` stops being JSON data, or ``None`` when it is JSON all through (a
    tuple, a set, a non-str key or any other object is not: a JSON round trip would not give
    it back as it was)."""
    if value is None or isinstance(value, str | bool | int | float):
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = not_json(item, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path or 'it'} has the key {key!r}, not a str"
            found = not_json(item, f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    return f"{path or 'it'} is a {type(value).__name__}"


def result_from_recording(agent: Agent, recording: Recording,
                          checkpoint: Mapping[str, Any] | None = None) -> RunResult:
    """The ``RunResult`` of a run another process made, read back from its recording (as
    recorded: what a redaction policy masked stays masked); a paused run's ``checkpoint`` (its
    ``RunResult.checkpoint``, from the job's outcome) makes it resumable here."""
    from ..flow._run import FlowRun

    if recording.status not in ("done", "paused"):
        raise RunError(f"run {recording.run_id!r} ended {recording.status!r} on the executor; "
                       "its recording in the run store shows where it stopped")
    log = recording.commit_log()
    state = log.state_at(len(log) - 1) if len(log) else {}
    run = FlowRun(run_id=recording.run_id, chart=agent.chart, status=recording.status,  # type: ignore[arg-type]
                  output=recording.output, state=state, log=log, redaction=agent.redaction,
                  checkpoint=_engine_checkpoint(agent, checkpoint)
                  if recording.status == "paused" else None)
    return agent._result(run)


def _engine_checkpoint(agent: Agent, checkpoint: Mapping[str, Any] | None) -> Any:
    """The engine checkpoint inside a paused ``RunResult.checkpoint`` (its sealed resume
    state opened with the agent's key), or ``None``."""
    flow = checkpoint.get("flow") if checkpoint is not None else None
    if not isinstance(flow, Mapping):
        return None
    from ..flow._checkpoint import Checkpoint
    from ..flow._seal import open_resume_state

    policy = agent.redaction
    return Checkpoint.model_validate(
        open_resume_state(flow, policy.seal_key if policy is not None else None))
