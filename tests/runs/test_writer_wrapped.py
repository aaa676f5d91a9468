"""A store wrapper shares the writer of the store it wraps (one thread per connection)."""

from __future__ import annotations

from agentfootprint.distributed._placement import PlacedStore, Placement
from agentfootprint.runs._sqlite import RunStore
from agentfootprint.runs._writer import writer_for


def test_wrappers_of_one_store_share_its_writer(tmp_path: object) -> None:
    store = RunStore(f"{tmp_path}/runs.db")
    try:
        first = PlacedStore(store, Placement.here("w1"))
        second = PlacedStore(first, Placement.here("w1"))
        assert writer_for(first) is writer_for(store)
        assert writer_for(second) is writer_for(store)
    finally:
        store.close()
