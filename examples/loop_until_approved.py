"""A loop with a mandatory budget: an editor rewrites its own draft until it is short enough.

Run: python examples/loop_until_approved.py
"""

import asyncio

from agentfootprint import LLMCall
from agentfootprint.compose import Loop
from agentfootprint.explain import backtrack
from agentfootprint.providers import LLMRequest, mock


def shorten(request: LLMRequest) -> str:
    """A scripted editor: drops the last word of the draft it is given."""
    draft = str(request.messages[-1]["content"])
    return " ".join(draft.split()[:-1])


editor = LLMCall(provider=mock(respond=shorten), model="mock", name="editor")
loop = Loop(editor, times=10, max_seconds=30, until=lambda draft: len(draft.split()) <= 4)
result = asyncio.run(loop.run("Your refund for order A-1001 has been approved today"))
print("Final:", result.content)
print("Passes:", result.recording.state["passes"])
print(backtrack(result).hops[0].text, "from", backtrack(result).hops[0].runtime_stage_id)
