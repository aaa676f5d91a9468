"""Tree of thoughts: reach 20 from 2 with "+3" or "*2" steps, keeping the two best paths.

Run: python examples/pattern_tree_of_thoughts.py
The proposer offers one step per option; a scoring function rates how close each step gets.
The recording keeps every level's proposals, their scores and the stop decision.
"""

import asyncio
import re

from agentfootprint import LLMCall
from agentfootprint.compose import Thought, tree_of_thoughts
from agentfootprint.providers import LLMRequest, mock

TARGET = 20


def propose(request: LLMRequest) -> str:
    message = request.messages[-1]["content"]
    values = re.findall(r"= (\d+)$", message, flags=re.MULTILINE)
    value = int(values[-1]) if values else 2
    if "option 1 of" in message:
        return f"{value} + 3 = {value + 3}"
    return f"{value} * 2 = {value * 2}"


def closeness(thought: Thought) -> float:
    """Higher is better: 0 when the step lands on the target."""
    return -abs(TARGET - int(thought.text.rsplit("= ", 1)[1]))


proposer = LLMCall(provider=mock(respond=propose), model="mock", name="proposer",
                   system="Propose the next arithmetic step.")

pattern = tree_of_thoughts(proposer, closeness, breadth=2, depth=4, beam=2, stop_at=0)


async def main() -> None:
    result = await pattern.run(f"Reach {TARGET} starting from 2 using +3 or *2.")
    state = result.recording.state
    print(f"Answer: {result.content} (level {state['level']}, score {state['best_score']:g})")
    print("Path: " + " -> ".join(state["frontier"][0]["path"]))
    for line in result.narrative().splitlines():
        if "[Condition]" in line:
            print(line.strip())


if __name__ == "__main__":
    asyncio.run(main())
