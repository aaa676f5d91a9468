"""``map_reduce``: split the input into items, run a mapper on each at once, then reduce.

Work too big for one call (a long document, a list of tickets) is split, mapped in parallel
and combined. A chart is fixed when it is built, so the mapper is mounted ``max_items`` times
and a selector picks as many slots as the split produced: the recording shows how many
items there were, what each mapper saw and said, and what the reducer combined.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from ..errors import ConfigurationError, RunError
from ..flow import Scope, Selection, flow_chart
from ..runs import trace
from ._base import Runner, check_runner, is_runner
from ._pattern import Pattern, as_answer, begin, call_user, check_budget, check_callable, rule, wire

__all__ = ["map_reduce", "reduce_message"]

Split = Callable[[str], Iterable[str] | Awaitable[Iterable[str]]]
ReduceFn = Callable[[list[str]], str | Awaitable[str]]


def reduce_message(mapped: Sequence[str]) -> str:
    """What a reducer runner is sent: the mapped answers, numbered in item order."""
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(mapped, start=1))


def map_reduce(mapper: Runner, reducer: Runner | ReduceFn, *, split: Split,
               max_items: int = 10, name: str = "MapReduce") -> Pattern:
    """``split(message)`` gives items; ``mapper`` answers each, concurrently; then reduce.

    ``reducer`` is a runner, sent ``reduce_message(mapped)``, or a function
    ``(mapped answers in item order) -> str``; its result is the answer. A split that gives
    no items, more than ``max_items`` or not a list of strings fails the run with a
    ``RunError`` that says so. State keeps ``items`` and ``mapped``. A failing mapper fails
    the whole (fail-fast), so a reducer never sees a missing answer.
    """
    where = "map_reduce"
    limit = check_budget(max_items, where=where, name="max_items")
    check_callable(split, where=where, name="split", what="message -> list of item strings")
    mapper_chart = check_runner(mapper, f"{where} mapper")
    reducer_chart = None
    reduce_fn: ReduceFn | None = None
    runners: list[Runner] = [mapper]
    if is_runner(reducer):
        reducer_chart = check_runner(reducer, f"{where} reducer")
        runners.append(reducer)
    elif callable(reducer):
        reduce_fn = reducer
    else:
        raise ConfigurationError(
            f"{where}(reducer={reducer!r}) must be a runner (Agent, LLMCall, composition) or a "
            "function (mapped answers) -> str")
    slots = [f"item-{i}" for i in range(1, limit + 1)]

    async def split_items(scope: Scope) -> None:
        found = await call_user(split, str(scope[trace.TASK]))
        items = list(found) if isinstance(found, Iterable) and not isinstance(found, str) \
            else None
        if items is None or not all(isinstance(item, str) for item in items):
            raise RunError(f"{where} split() returned {found!r}; return a list of strings")
        if not items:
            raise RunError(f"{where} split() returned no items for the message; check the "
                           "input or the split function")
        if len(items) > limit:
            raise RunError(f"{where} split() returned {len(items)} items, more than "
                           f"max_items={limit}; raise max_items= or split into fewer items")
        scope[trace.ITEMS] = items

    def fan_out(scope: Scope) -> Selection:
        items = list(scope[trace.ITEMS])
        chosen = tuple(slots[: len(items)])
        rules = [rule(i, slot, f"item {i + 1} of {len(items)}", True, item=items[i])
                 for i, slot in enumerate(chosen)]
        return Selection(chosen, {"rules": rules})

    def item_wiring(index: int) -> dict[str, Any]:
        return wire(lambda parent: str(parent[trace.ITEMS][index]),
                    lambda text: {trace.MAPPED_OF.of(slots[index]): text}, mapper)

    async def gather(scope: Scope) -> None:
        count = len(scope[trace.ITEMS])
        mapped = [str(scope[trace.MAPPED_OF.of(slot)]) for slot in slots[:count]]
        scope[trace.MAPPED] = mapped
        if reduce_fn is not None:
            reduced = str(await call_user(reduce_fn, mapped))
            scope[trace.CURRENT] = reduced
            scope[trace.FINAL_CONTENT] = reduced
        else:
            scope[trace.CURRENT] = reduce_message(mapped)

    builder = (flow_chart("Start", begin, id="start", description="Take the input")
               .then("Split", split_items, id="split", description="Split the input into items")
               .select("Fan out", fan_out, id="fan_out", fail_fast=True,
                       description="Map every item at once"))
    for index, slot in enumerate(slots):
        builder = builder.branch(slot, f"Map {slot}", mapper_chart, id=slot,
                                 **item_wiring(index))
    flow = builder.end().then("Gather", gather, id="gather",
                              description="Collect the mapped answers in item order")
    if reducer_chart is not None:
        flow = flow.subflow("reducer", reducer_chart, name="Reducer",
                            **wire(lambda parent: str(parent[trace.CURRENT]), as_answer,
                                   reducer))
    def remake(rs: list[Runner]) -> Pattern:
        return map_reduce(rs[0], rs[1] if reducer_chart is not None else reducer, split=split,
                          max_items=max_items, name=name)

    return Pattern(kind="MapReduce", chart=flow.build(description=name), runners=runners,
                   remake=remake)
