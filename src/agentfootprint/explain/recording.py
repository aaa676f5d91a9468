"""Moved to ``agentfootprint.runs.recording``; this path works for one release and warns."""

from .._lazy import moved_module
from ..runs.recording import RECORDING_FORMAT, Recording

moved_module(__name__, "agentfootprint.runs")

__all__ = ['RECORDING_FORMAT', 'Recording']
