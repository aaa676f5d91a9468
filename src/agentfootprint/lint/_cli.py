"""``agentfootprint lint-tools FILE [--format text|json] [--threshold T] [--cache-dir DIR]``.

Exit 0 when no rule found anything, 1 when there are findings, 2 when the input cannot be
linted (no such file, not JSON, no tool in a known shape, a threshold that is not a cosine) —
then one line on standard error, never a traceback. A rule that could not run (the twin finder
without the model) is named in the output with its fix; it does not change the exit code.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..flow._display import terminal_text

__all__ = ["add_lint_command", "run_lint"]


def add_lint_command(commands: Any) -> None:
    """The ``lint-tools`` command."""
    lint = commands.add_parser(
        "lint-tools", help="lint a tool catalog (OpenAI, Anthropic, MCP or plain JSON); exit 0 "
                           "clean, 1 findings, 2 bad input")
    lint.add_argument("file", metavar="FILE", help="the JSON catalog ('-' reads standard input)")
    lint.add_argument("--format", choices=("text", "json"), default="text", dest="lint_format",
                      help="text for people (default), json for tools")
    lint.add_argument("--threshold", default=None, metavar="T",
                      help="least cosine for a near-duplicate pair (default 0.45)")
    lint.add_argument("--cache-dir", default=None, metavar="DIR",
                      help="where embeddings are cached by content hash (default: the user's "
                           "cache folder)")


def run_lint(options: argparse.Namespace) -> int:
    """Lint the file named in ``options``; print the report; return the exit code."""
    from ..errors import ConfigurationError
    from ._lint import lint_tools
    from ._twins import DEFAULT_THRESHOLD

    try:
        threshold = DEFAULT_THRESHOLD
        if options.threshold is not None:
            try:
                threshold = float(options.threshold)
            except ValueError:
                raise ConfigurationError(f"--threshold {options.threshold!r} is not a number; "
                                         f"pass a cosine in (0, 1], e.g. {DEFAULT_THRESHOLD}"
                                         ) from None
        report = lint_tools(options.file, threshold=threshold, cache_dir=options.cache_dir)
    except ConfigurationError as exc:
        message = " ".join(str(exc).replace("threshold=", "--threshold ").split())
        print(f"agentfootprint lint-tools: {terminal_text(message)}", file=sys.stderr)
        return 2
    if options.lint_format == "json":
        print(report.to_json())
    else:
        print("\n".join(terminal_text(line) for line in report.to_text().split("\n")))
    return 0 if report.ok else 1
