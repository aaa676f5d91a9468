"""The final-answer tool: structured output for a model that can only answer in JSON through a
tool call.

Anthropic's native structured output is this tool, forced (``tool_choice``); for a provider with
no native mode the agent loop offers the same tool itself. Either way the tool's arguments are the
answer: ``take_output_call`` moves them into ``content`` as JSON text, so everything after the
provider sees one shape — the answer's text is the JSON that is validated.
"""

from __future__ import annotations

from ._base import LLMResponse, OutputSchema, ToolSchema

__all__ = ["OUTPUT_TOOL", "output_tool", "take_output_call"]

OUTPUT_TOOL = "final_result"
"""The final-answer tool's name (reserved: an agent with an output type refuses a tool of its
own with this name)."""


def output_tool(schema: OutputSchema) -> ToolSchema:
    """The tool whose arguments are the structured answer."""
    return {"name": OUTPUT_TOOL,
            "description": f"Give your final answer ({schema['name']}) as this tool's "
                           "arguments. Call it once, when you have everything you need.",
            "input_schema": schema["schema"]}


def take_output_call(response: LLMResponse) -> LLMResponse:
    """``response`` with a call of the final-answer tool turned into its ``content`` (the
    arguments as JSON text; unparseable arguments verbatim, so validation shows what the model
    sent). Other tool calls stay: then the answer is not final and the tools run first."""
    chosen = next((c for c in response.tool_calls if c["name"] == OUTPUT_TOOL), None)
    if chosen is None:
        return response
    import json  # loaded on first use: a plain run never writes JSON

    from ._openai import RAW_ARGUMENTS_KEY  # (only here: importing the package stays light)

    rest = [c for c in response.tool_calls if c is not chosen]
    args = chosen["args"]
    raw = args.get(RAW_ARGUMENTS_KEY)
    text = raw if len(args) == 1 and isinstance(raw, str) else json.dumps(args)
    stop = response.stop_reason
    if not rest and stop == "tool_use":
        stop = "stop"
    return response.model_copy(update={"content": text, "tool_calls": rest, "stop_reason": stop})
