"""The run-state keys of the script ledger, apart from the ledger's code.

Every agent run looks for a carried-over ledger, but only runs that dispatch a script need the
ledger's models; keeping the two names here lets the loop check for one without loading the
other (see ``scripts.py`` for what the keys hold).
"""

from __future__ import annotations

from typing import Final

from ..runs import trace

__all__ = ["DROPPED_KEY", "LEDGER_KEY"]

LEDGER_KEY: Final = trace.FINDINGS_LEDGER
"""Run-state key of the per-turn script ledger (a list of row dicts)."""
DROPPED_KEY: Final = trace.SCRIPTS_DROPPED
"""Run-state key counting dispatches past the row bound, absent until the first drop."""
