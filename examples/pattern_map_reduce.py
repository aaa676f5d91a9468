"""Map-reduce: one review per mapper, all at once, then a reducer sums them up.

Run: python examples/pattern_map_reduce.py
The split decides how many mapper slots run; the selector's choice, each mapper's input and
answer, and the reducer's input are all on the record.
"""

import asyncio

from agentfootprint import LLMCall
from agentfootprint.compose import map_reduce
from agentfootprint.providers import LLMRequest, mock

REVIEWS = """Great battery, lasts two days.
The screen cracked in a week.
Fast delivery and a fair price.
"""


def label(request: LLMRequest) -> str:
    review = request.messages[-1]["content"]
    return "negative" if "cracked" in review else "positive"


def summarize(request: LLMRequest) -> str:
    labels = request.messages[-1]["content"]
    return (f"{labels.count('positive')} positive, {labels.count('negative')} negative; "
            "the complaint is about the screen.")


mapper = LLMCall(provider=mock(respond=label), model="mock", name="sentiment",
                 system="Label the review positive or negative.")
reducer = LLMCall(provider=mock(respond=summarize), model="mock", name="summary",
                  system="Summarize the labels.")

pattern = map_reduce(mapper, reducer, max_items=20,
                     split=lambda text: [line for line in text.splitlines() if line.strip()])


async def main() -> None:
    result = await pattern.run(REVIEWS)
    state = result.recording.state
    for item, mapped in zip(state["items"], state["mapped"], strict=True):
        print(f"{mapped:>8}  {item}")
    print()
    print(result.content)


if __name__ == "__main__":
    asyncio.run(main())
