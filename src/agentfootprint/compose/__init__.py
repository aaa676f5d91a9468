"""Systems of agents: Sequence, Parallel, Conditional and Loop, recorded as one run."""

from .base import Composition, Input
from .conditional import Conditional
from .loop import Loop
from .parallel import Parallel
from .sequence import Sequence

__all__ = ["Composition", "Conditional", "Input", "Loop", "Parallel", "Sequence"]
