"""The ``agentfootprint`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentfootprint",
                                     description="The explainable AI-agent framework.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="run the offline demo and explain its decision")
    options = parser.parse_args(argv)
    if options.command == "demo":
        from .demo import run_demo

        print(run_demo())
        return 0
    parser.error(f"unknown command {options.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
