"""Systems of agents: Sequence, Parallel, Conditional, Loop and named patterns, one recording."""

from .base import Composition, Input, Runner
from .conditional import Conditional
from .loop import Loop
from .parallel import Parallel
from .patterns import (
    Handoff,
    Pattern,
    Thought,
    debate,
    map_reduce,
    reflection,
    self_consistency,
    swarm,
    tree_of_thoughts,
)
from .sequence import Sequence

__all__ = [
    "Composition",
    "Conditional",
    "Handoff",
    "Input",
    "Loop",
    "Parallel",
    "Pattern",
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
