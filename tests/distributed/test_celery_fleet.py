"""Fan-out on real Celery workers: the same results as in-process, and nothing lost or doubled
when a pool process or a whole worker is killed mid-task (late acknowledgement re-delivers; the
run id makes the re-delivery resume the run instead of repeating its side effect)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import signal
import uuid
from collections import Counter
from pathlib import Path

import pytest
from celery_fleet import Fleet
from fleet_agents import applied, make_sampling_agent, make_suspect_agent

from agentfootprint.distributed import run_many
from agentfootprint.distributed._celery import celery_executor
from agentfootprint.explain import backtrack, localize_context_bug, wrong_if
from agentfootprint.runs import RunStore

pytestmark = pytest.mark.e2e

FACTORY = "fleet_agents:make_agent"


def _executor(fleet: Fleet) -> object:
    return celery_executor(broker=fleet.broker, queue=fleet.queue,
                           visibility_timeout=fleet.visibility_timeout, timeout=60)


async def _entered(workdir: Path, count: int, timeout: float = 30.0) -> dict[str, int]:
    """Wait until ``count`` block runs are inside their tool: run id -> the pid running it."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        found = {p.name.removeprefix("entered-"): int(p.read_text() or 0)
                 for p in workdir.glob("entered-*")}
        if len(found) >= count and all(found.values()):
            return found
        if loop.time() > end:
            raise TimeoutError(f"only {found} entered their tool")
        await asyncio.sleep(0.02)


def _chain(recording: object) -> str:
    return re.sub(r"#\d+", "#N", str(backtrack(recording)))  # type: ignore[arg-type]


def _once_each(workdir: Path, run_ids: list[str]) -> None:
    """Every run applied its effect exactly once (counted by idempotency key)."""
    keys = Counter(key for key, _ in applied(workdir))
    mine = {k: n for k, n in keys.items() if k.split(":")[0] in run_ids}
    assert sorted(k.split(":")[0] for k in mine) == sorted(run_ids)  # none lost
    assert set(mine.values()) == {1}, {k: n for k, n in mine.items() if n != 1}  # none doubled


def _recorded_applied(store: Path, run_ids: list[str], messages: list[str]) -> None:
    """Each run's recording shows its effect tool answering ``applied <message>`` to the
    model's last call (a tool error there is no applied effect, whatever the answer says)."""
    with RunStore(store) as runs:
        said = {run_id: [m["content"] for m in runs.load(run_id).requests()[-1]["messages"]
                         if m["role"] == "tool"] for run_id in run_ids}
    assert said == {run_id: [f"applied {m}"] for run_id, m in zip(run_ids, messages,
                                                                     strict=True)}


async def test_a_batch_of_100_runs_gives_the_in_process_results(
        fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    messages = [f"task {i}" for i in range(100)]
    ids = [f"batch-{i}" for i in range(100)]
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.setenv("AF_FLEET_DIR", str(here))
    local = await run_many(FACTORY, messages, store=str(here / "runs.db"), run_ids=ids)
    store = fleet.workdir / "runs.db"
    remote = await run_many(FACTORY, messages, executor=_executor(fleet), store=str(store),
                            run_ids=ids)

    assert [(o.run_id, o.status, o.content) for o in remote] == \
        [(o.run_id, o.status, o.content) for o in local]
    assert [o.content for o in remote] == [f"done: {m}" for m in messages]
    workers = Counter(o.placement["worker"] for o in remote)
    assert set(workers) == {f"w1@{os.uname().nodename}", f"w2@{os.uname().nodename}"}, workers
    _once_each(fleet.workdir, ids)
    _recorded_applied(store, ids, messages)
    with RunStore(store) as runs:  # every worker recorded to the one store
        listed = {s.run_id for s in runs.list(limit=500)}
        assert set(ids) <= listed
        recording = runs.load(ids[0])
        assert recording.meta["placement"]["attempts"] == 1
        assert recording.meta["factory"] == FACTORY

    again = await run_many(FACTORY, messages[:5], executor=_executor(fleet), store=str(store),
                           run_ids=ids[:5])  # delivered again: the stored answers come back
    assert all(o.reused for o in again)
    assert [o.content for o in again] == [o.content for o in remote[:5]]
    _once_each(fleet.workdir, ids)

    chunk_ids = [f"chunk-{i}" for i in range(20)]  # 8 runs per task, order kept
    chunked = await run_many(FACTORY, messages[:20], store=str(store), run_ids=chunk_ids,
                             executor=celery_executor(broker=fleet.broker, queue=fleet.queue,
                                                      timeout=60, chunk=8))
    assert [o.content for o in chunked] == [o.content for o in remote[:20]]
    _once_each(fleet.workdir, chunk_ids)
    _recorded_applied(store, chunk_ids, messages[:20])


async def test_a_localize_over_20_suspects_gives_the_in_process_verdicts(fleet: Fleet) -> None:
    """On a deterministic model, and on a sampling one (the same seeds, the same verdicts)."""
    result = await make_suspect_agent().run("What should we do about ticket 42?")
    wrong = wrong_if(contains="WRONG")
    here = await localize_context_bug(result, is_wrong=wrong)
    there = await localize_context_bug(result, is_wrong=wrong, executor=_executor(fleet),
                                       factory="fleet_agents:make_suspect_agent")
    assert len(there.suspects) >= 20
    assert [c.members for c in there.causes] == [("f7",)]
    assert there.to_proof() == here.to_proof()


    sampling = make_sampling_agent()  # each answer drawn from the re-run's seed
    for _ in range(20):
        result = await sampling.run("What should we do about ticket 42?")
        if wrong(result.content):
            break
    here = await localize_context_bug(result, is_wrong=wrong, budget=60)
    there = await localize_context_bug(result, is_wrong=wrong, budget=60,
                                       executor=_executor(fleet),
                                       factory="fleet_agents:make_sampling_agent")
    assert not there.deterministic and there.runs_used > 8
    assert there.to_proof() == here.to_proof()


async def test_a_pool_process_killed_mid_task_is_redelivered_without_a_double_effect(
        fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [f"child-{i}" for i in range(6)]
    messages = ["block child"] + [f"child task {i}" for i in range(1, 6)]
    store = fleet.workdir / "runs.db"
    batch = asyncio.create_task(run_many(FACTORY, messages, executor=_executor(fleet),
                                         store=str(store), run_ids=ids))
    entered = await _entered(fleet.workdir, 1)
    pid = entered["child-0"]
    owner = next(n for n in fleet.workers if pid in fleet.children(n))
    os.kill(pid, signal.SIGKILL)  # the pool child, mid-tool, its effect applied
    await asyncio.sleep(0.3)
    (fleet.workdir / "release").touch()
    outcomes = await asyncio.wait_for(batch, 60)

    assert [o.content for o in outcomes] == [f"done: {m}" for m in messages]
    assert fleet.workers[owner].poll() is None  # the worker itself lived on
    _once_each(fleet.workdir, ids)
    _recorded_applied(store, ids, messages)
    placement = outcomes[0].placement
    assert placement["attempts"] == 2
    assert placement["where"][0]["pid"] == pid != placement["pid"]
    assert [o.placement["attempts"] for o in outcomes[1:]] == [1] * 5

    # the recovered run is one recording: backtrack walks the chain an uninterrupted run has
    # (the resumed tool stage takes the next runtime number: compared without the numbers)
    monkeypatch.setenv("AF_FLEET_DIR", str(tmp_path))
    (tmp_path / "release").touch()
    plain = await run_many(FACTORY, ["block child"], store=str(tmp_path / "runs.db"),
                           run_ids=["plain"])
    assert plain[0].content == outcomes[0].content
    with RunStore(store) as runs, RunStore(tmp_path / "runs.db") as here:
        recovered, uninterrupted = runs.load("child-0"), here.load("plain")
    assert _chain(recovered) == _chain(uninterrupted)


async def test_a_whole_worker_killed_mid_batch_loses_and_doubles_nothing(
        own_fleet: object) -> None:
    fleet: Fleet = own_fleet(3.0)  # type: ignore[operator]
    fleet.start("victim")
    ids = [f"worker-{i}" for i in range(20)]
    messages = ["block a", "block b"] + [f"worker task {i}" for i in range(2, 20)]
    store = fleet.workdir / "runs.db"
    batch = asyncio.create_task(run_many(FACTORY, messages, executor=_executor(fleet),
                                         store=str(store), run_ids=ids))
    entered = await _entered(fleet.workdir, 2)  # both of its pool processes are inside a tool
    assert set(entered.values()) <= fleet.children("victim")
    fleet.kill("victim")  # main process and pool: nothing acknowledges its two messages
    (fleet.workdir / "release").touch()
    fleet.start("rescuer")  # takes the rest, and the two once their visibility timeout passes
    outcomes = await asyncio.wait_for(batch, 60)

    assert [o.status for o in outcomes] == ["done"] * 20
    assert [o.content for o in outcomes] == [f"done: {m}" for m in messages]
    _once_each(fleet.workdir, ids)
    _recorded_applied(store, ids, messages)
    for outcome in outcomes[:2]:
        where = outcome.placement["where"]
        assert outcome.placement["attempts"] == 2
        assert [w["worker"].split("@")[0] for w in where] == ["victim", "rescuer"]
    assert {o.placement["worker"].split("@")[0] for o in outcomes[2:]} == {"rescuer"}


async def test_runs_list_on_postgresql_shows_the_runs_of_every_worker(
        fleet: Fleet, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from agentfootprint.cli import main

    tag = uuid.uuid4().hex[:8]
    ids = [f"pg-{tag}-{i}" for i in range(12)]
    outcomes = await run_many(FACTORY, [f"pg task {i}" for i in range(12)], store=pg_url,
                              executor=_executor(fleet), run_ids=ids)
    assert [o.status for o in outcomes] == ["done"] * 12
    assert len({o.placement["worker"] for o in outcomes}) == 2  # both workers wrote

    assert main(["runs", "list", "--store", pg_url, "--limit", "500"]) == 0
    listed = capsys.readouterr().out
    assert all(run_id in listed for run_id in ids), listed
    assert main(["explain", ids[0], "--store", pg_url]) == 0
    assert 'ANSWER   "done: pg task 0"' in capsys.readouterr().out


def _holds(blob: bytes, secret: str) -> bool:
    """``secret`` in ``blob`` raw, JSON-escaped, or inside base64 (kombu's message bodies)."""
    needle = secret.encode()
    if needle in blob or json.dumps(secret).encode()[1:-1] in blob:
        return True
    for run in re.findall(rb"[A-Za-z0-9+/=]{16,}", blob):
        for offset in range(4):
            part = run[offset:]
            part = part[: len(part) - len(part) % 4]
            with contextlib.suppress(ValueError):
                if _holds_plain(base64.b64decode(part), needle):
                    return True
    return False


def _holds_plain(blob: bytes, needle: bytes) -> bool:
    return needle in blob or (len(blob) > 16 and _holds(blob, needle.decode()))


async def test_sealed_payloads_keep_a_secret_off_the_broker_and_the_result_backend(
        own_fleet: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import redis
    from cryptography.fernet import Fernet

    key = Fernet.generate_key().decode()
    monkeypatch.setenv("AGENTFOOTPRINT_SEAL_KEY", key)  # the workers' environment
    fleet: Fleet = own_fleet(30.0)  # type: ignore[operator]
    secret = f"sk-live-{uuid.uuid4().hex}"
    messages = [f"pay with {secret} #{i}" for i in range(3)]
    plain = base64.b64encode(json.dumps({"args": [{"message": messages[0]}]}).encode())
    assert _holds(b'{"body": "' + plain + b'"}', secret)  # the scanner sees an unsealed body

    executor = celery_executor(broker=fleet.broker, queue=fleet.queue, timeout=60,
                               seal_key=key)
    batch = asyncio.create_task(run_many(FACTORY, messages, executor=executor,
                                         store=str(fleet.workdir / "runs.db"),
                                         run_ids=[f"sealed-{i}" for i in range(3)]))
    client = redis.Redis.from_url(fleet.broker)
    try:
        while client.llen(fleet.queue) < 3:  # no worker yet: the jobs wait on the queue
            await asyncio.sleep(0.02)
        queued = client.lrange(fleet.queue, 0, -1)
        assert not any(_holds(body, secret) for body in queued)
        fleet.start("w1")
        outcomes = await asyncio.wait_for(batch, 60)
        assert [o.content for o in outcomes] == [f"done: {m}" for m in messages]
        results = [client.get(k) or b"" for k in client.scan_iter("celery-task-meta-*")]
        assert len(results) >= 3
        assert not any(_holds(body, secret) for body in results)
    finally:
        client.close()
