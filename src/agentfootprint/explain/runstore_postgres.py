"""Moved to ``agentfootprint.runs.postgres``; this path works for one release and warns."""

from .._lazy import moved_module
from ..runs.postgres import PostgresRunStore

moved_module(__name__, "agentfootprint.runs")

__all__ = ['PostgresRunStore']
