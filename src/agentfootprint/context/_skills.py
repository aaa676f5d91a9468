"""Skills: the ``read_skill`` tool the model uses to switch a skill on.

Activation is recorded by the loop (``activated_skills`` in state) and applies from the next
iteration for the rest of the turn. With ``surface="tool"`` or ``"both"`` the body is also
the tool's result, so the model reads it at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigurationError
from ..tools._tool import Tool, define_tool
from ._injection import Injection

__all__ = ["READ_SKILL", "SKIP_STEP", "read_skill_tool", "skip_step_tool", "step_sentence"]

READ_SKILL = "read_skill"
SKIP_STEP = "skip_step"


def read_skill_tool(skills: Sequence[Injection]) -> Tool:
    """The ``read_skill`` tool for these skills (catalogue in its description)."""
    if not skills:
        raise ConfigurationError("read_skill needs at least one skill")
    by_id = {s.id: s for s in skills}
    catalogue = "\n".join(f"  - {s.id}: {s.description}" for s in skills)
    description = (
        "Activate a skill for the next step. Available skills:\n" + catalogue +
        "\nIts guidance joins your instructions and its tools become available on your "
        "next call.")

    def execute(args: dict[str, Any]) -> str:
        skill = by_id.get(args.get("id", ""))
        if skill is None:
            return f"Unknown skill {args.get('id')!r}. Available: {', '.join(by_id)}."
        if skill.surface in ("tool", "both"):
            return str(skill.metadata.get("body", ""))
        return f"Skill '{skill.id}' activated for the next step."

    schema = {"type": "object", "properties": {"id": {"type": "string", "enum": list(by_id)}},
              "required": ["id"], "additionalProperties": False}
    return define_tool(READ_SKILL, description, schema, execute, blocking=False,
                       side_effects=False)  # it reads a skill's text: safe to repeat


def skip_step_tool() -> Tool:
    """``skip_step``: the model says why it skips the current step (the loop records it)."""
    schema = {"type": "object", "properties": {"reason": {"type": "string"}},
              "required": ["reason"], "additionalProperties": False}
    return define_tool(
        SKIP_STEP, "Skip the current step of the active skill's procedure, saying why.",
        schema, lambda args: "", blocking=False, side_effects=False)


def step_sentence(steps: Sequence[dict[str, str]], step: int) -> str:
    """``"Now on step k of n: <tool> — <note>."`` or the all-done sentence."""
    total = len(steps)
    if step > total:
        return f"All {total} steps complete."
    current = steps[step - 1]
    return f"Now on step {step} of {total}: {current['tool']} — {current['note']}."
