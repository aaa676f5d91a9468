"""Systems of agents: Sequence, Parallel, Conditional, Loop and named patterns, one recording."""

from .._lazy import moved_names as _moved_names
from ._base import Input, Runner
from ._conditional import Conditional
from ._loop import Loop
from ._parallel import Parallel
from ._patterns import (
    Handoff,
    Thought,
    debate,
    map_reduce,
    reflection,
    self_consistency,
    swarm,
    tree_of_thoughts,
)
from ._sequence import Sequence

__getattr__ = _moved_names(__name__, {
    "Composition": "agentfootprint.compose._base", "Pattern": "agentfootprint.compose._pattern"})

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
