"""The named patterns, each a composition of runners recorded as one run.

    self_consistency   n samples of one runner, majority vote          (self_consistency.py)
    reflection         write → critique → revise until accepted        (reflection.py)
    debate             proponent ⇄ opponent for some rounds, a judge   (debate.py)
    map_reduce         split, map every item at once, reduce           (map_reduce.py)
    tree_of_thoughts   beam search over proposed next steps            (tree_of_thoughts.py)
    swarm              agents hand the work to one another             (swarm.py)

Every loop among them takes a mandatory budget, every one returns a ``Pattern`` (a
``Composition``), so each nests in ``Sequence``/``Parallel``/``Conditional``/``Loop`` and in
one another. The texts each runner is sent are plain functions exported here, so a prompt
can be written to match them.
"""

from __future__ import annotations

from ._debate import debate, debate_message, verdict_message
from ._map_reduce import map_reduce, reduce_message
from ._pattern import MAX_PASSES, Pattern
from ._reflection import critique_message, reflection, revision_message
from ._self_consistency import default_ballot, self_consistency
from ._swarm import Handoff, handoff_marker, handoff_message, swarm
from ._tree_of_thoughts import Thought, propose_message, score_message, tree_of_thoughts

__all__ = [
    "MAX_PASSES",
    "Handoff",
    "Pattern",
    "Thought",
    "critique_message",
    "debate",
    "debate_message",
    "default_ballot",
    "handoff_marker",
    "handoff_message",
    "map_reduce",
    "propose_message",
    "reduce_message",
    "reflection",
    "revision_message",
    "score_message",
    "self_consistency",
    "swarm",
    "tree_of_thoughts",
    "verdict_message",
]
