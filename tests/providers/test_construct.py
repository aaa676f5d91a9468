"""``Constructor`` builds exactly what ``model_construct`` builds, or hands the call to it."""

from __future__ import annotations

from typing import Any, ClassVar

from _same_model import same_model
from pydantic import BaseModel, ConfigDict, Field

from agentfootprint.providers._base import LLMRequest, LLMResponse, Usage
from agentfootprint.providers._construct import Constructor


def test_a_request_is_what_model_construct_makes() -> None:
    values: dict[str, Any] = {
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "system": None,
        "tools": [], "temperature": 0.5, "max_tokens": None, "stop": None,
        "tool_choice": None, "seed": 3, "cache": {"system": 1, "tools": 0, "messages": 1}}
    fast = Constructor(LLMRequest)(**values)
    same_model(fast, LLMRequest.model_construct(**values))
    assert fast.messages is values["messages"]  # trusted values are kept, not copied
    assert "output_schema" not in fast.model_fields_set
    assert fast.model_dump() == LLMRequest.model_validate(values).model_dump()


def test_a_response_and_its_usage_are_what_model_construct_makes() -> None:
    usage = Constructor(Usage)(input=3, output=1)
    same_model(usage, Usage.model_construct(input=3, output=1))
    values: dict[str, Any] = {"content": "ok", "tool_calls": [], "usage": usage,
                              "stop_reason": "stop", "model": "m"}
    same_model(Constructor(LLMResponse)(**values), LLMResponse.model_construct(**values))
    assert Constructor(LLMResponse)(**values) == LLMResponse(**values)


def test_a_call_without_a_required_or_factory_field_goes_to_model_construct() -> None:
    no_tools = {"model": "m", "messages": []}  # tools has a default factory
    fast = Constructor(LLMRequest)(**no_tools)
    same_model(fast, LLMRequest.model_construct(**no_tools))
    assert fast.tools == []
    extra = {"model": "m", "messages": [], "tools": [], "nonsense": 1}
    same_model(Constructor(LLMRequest)(**extra), LLMRequest.model_construct(**extra))


def test_models_outside_the_shortcut_are_built_by_model_construct() -> None:
    class Mutable(BaseModel):
        items: list[int] = [1]  # a mutable plain default: model_construct copies it

    class Aliased(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        name: str = Field(alias="n")

    built = Constructor(Mutable)()
    assert built.items == [1] and built.items is not Mutable.model_fields["items"].default
    same_model(Constructor(Aliased)(n="x"), Aliased.model_construct(n="x"))


def test_a_model_with_its_own_new_goes_to_model_construct() -> None:
    class Counted(BaseModel):
        made: ClassVar[list[str]] = []
        x: int = 0

        def __new__(cls, *args: Any, **kwargs: Any) -> Counted:
            cls.made.append("new")
            return super().__new__(cls)

    built = Constructor(Counted)(x=2)
    same_model(built, Counted.model_construct(x=2))
    assert Counted.made == ["new", "new"]  # both went through the model's own __new__
