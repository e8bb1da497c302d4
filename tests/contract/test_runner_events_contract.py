"""A run's events: the memory and PostgreSQL adapters agree on ``save_run``'s
``events`` and ``run_events`` (agentsvc_core/ports/runners.py): the events are
stored with the run's write, numbered from 1 per run in order; a write that
loses its compare-and-set stores none (of racing writers, one writer's events,
numbered without a gap); another organization reads none; they go with their
run."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities.runner import NewRunEvent, RunEvent, RunnerRun
from agentsvc_core.errors import NotFound
from tests.contract.conftest import Backend, now
from tests.contract.test_runners_contract import run_in, with_runner


def _told(type_: str, **data: object) -> NewRunEvent:
    return NewRunEvent(type_, dict(data), now())  # type: ignore[arg-type]


def test_events_are_stored_with_the_run_numbered_in_order(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    run = run_in(org, runner_id=runner.id)
    backend.run(store.add_run, run)
    assert backend.run(lambda: store.run_events(org, run.id, after=0, limit=10)) == []
    at = now() - timedelta(seconds=3)
    first = [
        NewRunEvent("run.started", {"trace_id": "t1"}, at),
        NewRunEvent(
            "step.started", {"step_id": "s1", "index": 0, "thread_id": None, "note": "ünï\x00"}, at
        ),
    ]
    running = msgspec.structs.replace(run, status="running", started_at=at)
    saved = backend.run(store.save_run, running, first)
    assert saved is not None
    # a write without events adds none
    saved = backend.run(store.save_run, msgspec.structs.replace(saved, updated_at=now()))
    assert saved is not None
    output = {"text": "done", "json": [1, 2.5, None, {"a": True}]}
    end = [
        _told("step.finished", step_id="s1", index=0, output=output),
        _told("run.finished", status="succeeded", output=output, error=None),
    ]
    done = msgspec.structs.replace(saved, status="succeeded", ended_at=now())
    assert backend.run(store.save_run, done, end) is not None

    events = backend.run(lambda: store.run_events(org, run.id, after=0, limit=10))
    assert events == [
        RunEvent(run_id=run.id, seq=i + 1, type=e.type, data=e.data, created_at=e.at)
        for i, e in enumerate(first + end)
    ]
    # pages: after a number, at most a limit
    page = backend.run(lambda: store.run_events(org, run.id, after=1, limit=2))
    assert [e.seq for e in page] == [2, 3]
    assert backend.run(lambda: store.run_events(org, run.id, after=4, limit=10)) == []
    # another organization's id: none
    other = backend.fresh_org()
    assert backend.run(lambda: store.run_events(other, run.id, after=0, limit=10)) == []


def test_a_write_that_loses_stores_no_event(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    run = run_in(org, runner_id=runner.id)
    backend.run(store.add_run, run)
    assert backend.run(store.save_run, run, [_told("run.started")]) is not None
    # read at version 0: it loses, nothing is stored
    cancel = msgspec.structs.replace(run, status="cancelled")
    assert backend.run(store.save_run, cancel, [_told("run.cancelled")]) is None
    events = backend.run(lambda: store.run_events(org, run.id, after=0, limit=10))
    assert [(e.seq, e.type) for e in events] == [(1, "run.started")]
    with pytest.raises(NotFound):
        backend.run(store.save_run, run_in(org, runner_id=runner.id), [_told("run.started")])


def test_of_racing_writers_one_writers_events_are_stored(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    run = run_in(org, runner_id=runner.id)
    backend.run(store.add_run, run)

    async def race(base: RunnerRun) -> list[RunnerRun | None]:
        writes = [
            store.save_run(
                msgspec.structs.replace(base, error=f"writer {i}"),
                [_told("step.started", writer=i), _told("step.finished", writer=i)],
            )
            for i in range(6)
        ]
        return await asyncio.gather(*writes)

    winners = []
    for _ in range(2):
        base = backend.run(store.get_run, org, run.id)
        won = [r for r in backend.run(race, base) if r is not None]
        assert len(won) == 1
        assert won[0].error is not None
        winners.append(int(won[0].error.removeprefix("writer ")))
    events = backend.run(lambda: store.run_events(org, run.id, after=0, limit=10))
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert [e.data["writer"] for e in events] == [w for w in winners for _ in range(2)]


def test_a_deleted_runner_takes_its_runs_events(backend: Backend) -> None:
    org, runner = with_runner(backend)
    _, kept = with_runner(backend, org)
    store = backend.storage.runners
    run, kept_run = run_in(org, runner_id=runner.id), run_in(org, runner_id=kept.id)
    for r in (run, kept_run):
        backend.run(store.add_run, r)
        backend.run(store.save_run, r, [_told("run.started")])
    backend.run(store.delete, org, runner.id)
    assert backend.run(lambda: store.run_events(org, run.id, after=0, limit=10)) == []
    kept_events = backend.run(lambda: store.run_events(org, kept_run.id, after=0, limit=10))
    assert [e.type for e in kept_events] == ["run.started"]
