"""@tool keeps what the function declares: a parameter named like a schema keyword (``title``)
is still offered to the model, and ``Annotated[..., Field(...)]`` constraints and descriptions
reach both the JSON Schema the model reads and the validation its arguments go through."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from agentfootprint import Agent, tool
from agentfootprint.providers import mock


class Section(BaseModel):
    title: str
    words: int


@tool
def make_note(title: str, count: Annotated[int, Field(ge=1, le=5, description="how many")] = 1,
              section: Section | None = None) -> str:
    """Make a note.

    Args:
        title: the note's title
    """
    return title * count


def test_a_parameter_named_title_is_offered_to_the_model() -> None:
    schema = make_note.input_schema
    assert schema["properties"]["title"] == {"description": "the note's title", "type": "string"}
    assert schema["required"] == ["title"]
    assert "title" not in schema  # pydantic's own titles are still dropped
    nested = schema["$defs"]["Section"]
    assert set(nested["properties"]) == {"title", "words"}  # a model's field named title too
    assert "title" not in nested and "title" not in nested["properties"]["words"]


def test_annotated_constraints_and_description_reach_the_schema() -> None:
    count = make_note.input_schema["properties"]["count"]
    assert count == {"default": 1, "description": "how many", "maximum": 5, "minimum": 1,
                     "type": "integer"}


def _tool_results(args: dict[str, Any]) -> list[str]:
    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "make_note", "args": args}]}, "done"]),
        model="mock", tools=[make_note])
    result = agent.run_sync("note it")
    return [m["content"] for m in result.history if m["role"] == "tool"]


def test_annotated_constraints_are_enforced_on_the_call() -> None:
    (refused,) = _tool_results({"title": "ab", "count": 9})
    assert refused.startswith("Invalid arguments for tool 'make_note'")
    assert "'count': expected less than or equal to 5" in refused
    (ran,) = _tool_results({"title": "ab", "count": 2})
    assert ran == "abab"
