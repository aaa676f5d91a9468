"""Systems of agents: Sequence, Parallel, Conditional, Loop and named patterns, one recording."""

from .._lazy import moved_names as _moved_names
from .base import Input, Runner
from .conditional import Conditional
from .loop import Loop
from .parallel import Parallel
from .patterns import (
    Handoff,
    Thought,
    debate,
    map_reduce,
    reflection,
    self_consistency,
    swarm,
    tree_of_thoughts,
)
from .sequence import Sequence

__getattr__ = _moved_names(__name__, {
    "Composition": "agentfootprint.compose.base", "Pattern": "agentfootprint.compose.pattern"})

__all__ = [
    "Conditional",
    "Handoff",
    "Input",
    "Loop",
    "Parallel",
    "Runner",
    "Sequence",
    "Thought",
    "debate",
    "map_reduce",
    "reflection",
    "self_consistency",
    "swarm",
    "tree_of_thoughts",
]
