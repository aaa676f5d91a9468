"""What "wrong" means, as data: a criterion another process (or the CLI) can apply again.

A proof is kept with the criterion that judged it. A Python function cannot be stored, so
``wrong_if`` builds a serialisable one: the answer contains a phrase, matches a regular
expression, or an importable predicate (``"module:function"``) says so. Any callable still
works as ``is_wrong``; it is recorded by name only.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from .._refs import load_callable
from ..errors import ConfigurationError

__all__ = ["WrongIf", "describe_criterion", "wrong_if"]


class WrongIf(BaseModel):
    """A serialisable ``is_wrong``: exactly one of ``contains``, ``matches``, ``predicate``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    contains: str | None = None
    """The answer is wrong when it contains this phrase (case-insensitive)."""
    matches: str | None = None
    """The answer is wrong when this regular expression is found in it."""
    predicate: str | None = None
    """``"module:function"``: ``function(answer)`` (or ``function(result)`` with
    ``judges_result``) returns whether it is wrong."""
    judges_result: bool = False
    """The predicate receives the whole ``RunResult`` (typed output included), not the text."""

    @model_validator(mode="after")
    def _one_rule(self) -> WrongIf:
        given = [n for n in ("contains", "matches", "predicate") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of contains=, matches=, predicate=")
        if self.matches is not None:
            try:
                re.compile(self.matches)
            except re.error as exc:
                raise ValueError(f"matches={self.matches!r} is not a regular expression: "
                                 f"{exc}") from exc
        if self.judges_result and self.predicate is None:
            raise ValueError("judges_result=True needs predicate=")
        return self

    def __call__(self, subject: Any) -> bool:
        if self.predicate is not None:
            return bool(load_callable(self.predicate)(subject))
        text = subject if isinstance(subject, str) else str(getattr(subject, "content", subject))
        if self.contains is not None:
            return self.contains.lower() in text.lower()
        assert self.matches is not None
        return re.search(self.matches, text) is not None

    def describe(self) -> str:
        if self.contains is not None:
            return f"the answer contains {self.contains!r}"
        if self.matches is not None:
            return f"the answer matches /{self.matches}/"
        return f"{self.predicate}(…) is true"


def wrong_if(*, contains: str | None = None, matches: str | None = None,
             predicate: str | None = None, judges_result: bool = False) -> WrongIf:
    """A criterion for ``is_wrong`` that is kept with the proof and re-applied by the CLI."""
    try:
        return WrongIf(contains=contains, matches=matches, predicate=predicate,
                       judges_result=judges_result)
    except ValidationError as exc:
        reason = str(exc.errors()[0].get("msg", exc)).removeprefix("Value error, ")
        raise ConfigurationError(f"wrong_if: {reason}") from None


def describe_criterion(is_wrong: Any) -> dict[str, Any]:
    """The criterion as kept with a proof: the rule itself when it is data, else its name."""
    if isinstance(is_wrong, WrongIf):
        return {**is_wrong.model_dump(exclude_none=True), "describe": is_wrong.describe()}
    name = getattr(is_wrong, "__qualname__", None) or type(is_wrong).__name__
    module = getattr(is_wrong, "__module__", None)
    return {"callable": f"{module}:{name}" if module else name,
            "describe": f"{name}(answer) is true (a Python function; not re-appliable "
                        "elsewhere — use wrong_if(...) to keep the rule)"}
