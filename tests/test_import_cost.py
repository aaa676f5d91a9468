"""Cold start stays lean: what ``import agentfootprint`` and a first plain run load (never timed).

Each check runs in a fresh interpreter and reads ``sys.modules``: provider adapters and their
SDKs, optional backends and the heavy optional subpackages load only when used, and the parts
a plain run does not need (causal chains, checkpoints, the narrative, event payload models,
the code runner) load on first use. The lazy names still resolve to the same objects as before.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap

import pytest

NEVER_AT_IMPORT = [
    # provider adapters and the SDKs / HTTP clients they wrap
    "agentfootprint.providers._anthropic", "agentfootprint.providers._ollama",
    "agentfootprint.providers._openai", "anthropic", "httpx", "openai",
    # optional backends
    "celery", "numpy", "opentelemetry", "psycopg", "redis",
    # subpackages a plain agent does not use
    "agentfootprint.compose", "agentfootprint.explain", "agentfootprint.memory",
]

NOT_FOR_A_PLAIN_RUN = [
    *NEVER_AT_IMPORT,
    "agentfootprint.flow._causal", "agentfootprint.flow._checkpoint",
    "agentfootprint.tools._code_runner", "agentfootprint.tools._scripts",
    # governance and windows load only for agents that use them
    "agentfootprint.agent._moments", "agentfootprint.agent._permissions",
    "agentfootprint.agent._checkin", "agentfootprint.agent._window",
    # reading a run back (narrative, context report) and check-in evidence load on first use
    "agentfootprint.flow._narrative", "agentfootprint.context._record",
    "agentfootprint.context._overlap",
    # the run readers (views, members, the Recording models, usage) and the store writer load
    # when a result is read back or a run store is set, not for the run itself
    "agentfootprint.runs._recording", "agentfootprint.runs._view", "agentfootprint.runs._members",
    "agentfootprint.runs._usage", "agentfootprint.runs._writer",
    # an agent used as a tool (the ToolCalls step only sets the reporter, agent/_sub_runs.py);
    # difflib only words a "did you mean" in a decision's error
    "agentfootprint.agent._as_tool", "difflib",
    # reading a killed run back to resume it
    "agentfootprint.agent._recovery",
    # redaction by kind of content (and the trace contract's repeat rules) needs a policy
    "agentfootprint.runs._redaction",
    # a plain run writes no JSON (importing json compiles six regexes)
    "json",
]

PLAIN_RUN = '''
from agentfootprint import Agent, Limits, tool
from agentfootprint.providers import mock

@tool
def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b

agent = Agent(provider=mock(script=["done"]), model="mock", tools=[add],
              limits=Limits(max_iterations=2))
assert agent.run_sync("Add one and one.").content == "done"
'''

REPORT = '''
import sys
modules = sorted(sys.modules)  # before the report's own json import
import json
catalogue = sys.modules.get("agentfootprint.events._catalogue")
print(json.dumps({"modules": modules,
                  "payload_models_built": catalogue is not None and "EVENTS" in vars(catalogue)}))
'''


def _fresh(code: str) -> tuple[set[str], bool]:
    """Run ``code`` in a new interpreter: the modules it had loaded, and whether it had built
    the event payload models."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + REPORT],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    return set(report["modules"]), bool(report["payload_models_built"])


def test_import_loads_no_adapter_sdk_backend_or_optional_subpackage() -> None:
    """`import agentfootprint` loads no provider adapter, SDK, backend, memory/explain/compose."""
    loaded, payloads_built = _fresh("import agentfootprint")
    assert sorted(loaded & set(NEVER_AT_IMPORT)) == []
    assert not payloads_built


def test_a_plain_agent_run_loads_only_what_it_uses() -> None:
    """A first mock run with a tool loads no causal/checkpoint/code-runner module nor payloads."""
    loaded, payloads_built = _fresh(PLAIN_RUN)
    assert sorted(loaded & set(NOT_FOR_A_PLAIN_RUN)) == []
    assert not payloads_built


@pytest.mark.parametrize("package", [
    "agentfootprint.context", "agentfootprint.events", "agentfootprint.flow",
    "agentfootprint.providers", "agentfootprint.tools",
])
def test_lazy_names_resolve_and_star_import_gives_all(package: str) -> None:
    """Every name in __all__ resolves on first use, and `import *` binds exactly __all__."""
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []
    namespace: dict[str, object] = {}
    exec(f"from {package} import *", namespace)
    namespace.pop("__builtins__", None)
    assert set(namespace) == set(module.__all__)


def test_factories_keep_their_names_after_their_submodule_loads() -> None:
    """Importing a submodule never rebinds the same-named function on its package."""
    loaded, _ = _fresh('''
        import agentfootprint.flow._narrative, agentfootprint.providers._openai
        import agentfootprint.tools._code_runner
        from agentfootprint import flow, providers, tools
        from agentfootprint.flow._narrative import narrative
        from agentfootprint.providers._openai import OpenAIProvider
        from agentfootprint.tools._code_runner import code_runner
        assert flow.narrative is narrative
        assert callable(providers.openai) and providers.openai is not OpenAIProvider
        assert tools.code_runner is code_runner
    ''')
    assert {"agentfootprint.flow._narrative", "agentfootprint.tools._code_runner"} <= loaded


def test_the_payload_catalogue_is_built_once_on_first_use() -> None:
    """EVENTS is built on first access and is then the very dict payload_model reads."""
    from agentfootprint.events import EVENTS
    from agentfootprint.events import _catalogue as catalogue
    from agentfootprint.events._catalogue import payload_model

    assert catalogue.EVENTS is EVENTS
    for name, model in EVENTS.items():
        assert payload_model(name) is model
