"""Runners: the calls of the background work, which see every organization
(``fire_due``: the scheduler; ``stale_runs``: the sweep), agree on memory and
PostgreSQL: a due trigger fires once and moves on, ``busy`` says whether it has a
run going, a tick is stored once, and four schedulers racing for the same ticks
(on PostgreSQL, on four connections) fire each of them once.

These tests work in 2001, delete what they make, and their ``decide`` leaves
other organizations' triggers as they were. They have a database of their own: a
service the other tests run on the session's database has a scheduler of its own,
which would fire (or hold locked) any trigger due by its clock, 2001's too.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from anyio.from_thread import BlockingPortal

from agentsvc_core.entities.runner import RunnerRun, Trigger
from agentsvc_core.ports.runners import Firing
from tests.contract.conftest import Backend, backend_on
from tests.contract.test_runners_contract import (
    cron_in,
    run_in,
    trigger_in,
    with_agent,
    with_runner,
)

T0 = datetime(2001, 1, 1, tzinfo=UTC)  # the scheduler's present


@pytest.fixture(scope="module", params=["memory", "postgres"])
def backend(request: pytest.FixtureRequest, portal: BlockingPortal) -> Iterator[Backend]:
    yield from backend_on(request, portal, "own_pg_url")


def test_stale_runs_are_the_queued_and_running_not_written_since(backend: Backend) -> None:
    org, runner = with_runner(backend)
    other_org, theirs = with_runner(backend)
    store = backend.storage.runners
    base = datetime(2001, 6, 1, tzinfo=UTC)
    made = [
        run_in(org, runner_id=runner.id, status="running", updated_at=base + timedelta(2)),
        run_in(org, runner_id=runner.id, status="queued", updated_at=base),
        run_in(other_org, runner_id=theirs.id, status="queued", updated_at=base + timedelta(1)),
        run_in(org, runner_id=runner.id, status="paused", updated_at=base),
        run_in(org, runner_id=runner.id, status="succeeded", updated_at=base),
        run_in(org, runner_id=runner.id, status="running", updated_at=base + timedelta(3)),
    ]
    for r in made:
        backend.run(store.add_run, r)
    try:
        mine = {org, other_org}
        found = [x for x in backend.run(store.stale_runs, base + timedelta(3)) if x[0] in mine]
        assert found == [(org, made[1].id), (other_org, made[2].id), (org, made[0].id)]
        assert backend.run(store.stale_runs, base + timedelta(3), 1) == [(org, made[1].id)]
    finally:
        for o, owner in ((org, runner), (other_org, theirs)):
            backend.run(store.delete, o, owner.id)


# --- the scheduler ------------------------------------------------------------


def _scheduler(
    org: str, busy_seen: dict[uuid.UUID, bool], *, step: timedelta = timedelta(minutes=1)
) -> Callable[[Trigger, bool], Firing]:
    """A ``decide`` that fires every tick of ``org``'s triggers (the next one
    ``step`` later) and leaves other organizations' triggers as they were."""

    def decide(trigger: Trigger, busy: bool) -> Firing:
        if trigger.org_id != org:
            return trigger.next_fire_at, None
        assert trigger.next_fire_at is not None
        busy_seen[trigger.id] = busy
        run = run_in(
            org,
            runner_id=trigger.runner_id,
            agent_id=trigger.agent_id,
            trigger_id=trigger.id,
            trigger_kind="cron",
            scheduled_for=trigger.next_fire_at,
            input=trigger.input,
        )
        return trigger.next_fire_at + step, run

    return decide


def _fire(backend: Backend, at: datetime, decide: Callable[[Trigger, bool], Firing]) -> list[Any]:
    return backend.run(lambda: backend.storage.runners.fire_due(at, decide, 1000))


def test_a_due_trigger_fires_once_and_moves_on(backend: Backend) -> None:
    org, runner = with_runner(backend)
    agent = with_agent(backend, org)
    store = backend.storage.runners
    tick = T0 - timedelta(minutes=1)
    due = cron_in(org, tick=tick, runner_id=runner.id, input={"a": 1})
    task = cron_in(org, tick=T0, agent_id=agent)  # at now: due
    future = cron_in(org, tick=T0 + timedelta(seconds=1), runner_id=runner.id)
    disabled = cron_in(org, tick=tick, runner_id=runner.id, enabled=False)
    not_cron = trigger_in(org, runner_id=runner.id, kind="webhook", next_fire_at=tick)
    for t in (due, task, future, disabled, not_cron):
        backend.run(store.add_trigger, t)
    seen: dict[uuid.UUID, bool] = {}
    try:
        created = _fire(backend, T0, _scheduler(org, seen))
        assert set(seen) == {due.id, task.id}
        assert sorted((r.trigger_id, r.scheduled_for) for r in created) == sorted(
            [(due.id, tick), (task.id, T0)]
        )
        for r in created:
            assert backend.run(store.get_run, org, r.id) == r
        fired = backend.run(store.get_trigger, org, due.id)
        assert (fired.next_fire_at, fired.last_fired_at) == (T0, tick)
        assert fired == msgspec.structs.replace(due, next_fire_at=T0, last_fired_at=tick)
        moved = backend.run(store.get_trigger, org, task.id)
        assert (moved.next_fire_at, moved.last_fired_at) == (T0 + timedelta(minutes=1), T0)
        assert [r.trigger_id for r in backend.run(lambda: store.runs(org, agent_id=agent))] == [
            task.id
        ]
        for t in (future, disabled, not_cron):
            assert backend.run(store.get_trigger, org, t.id) == t
        # the same moment again: only the trigger now at T0 is due, for its next tick
        seen.clear()
        again = _fire(backend, T0, _scheduler(org, seen))
        assert [(r.trigger_id, r.scheduled_for) for r in again] == [(due.id, T0)]
        # a decision of no run and no next tick: the trigger stops firing
        seen.clear()

        def stop(t: Trigger, busy: bool) -> Firing:
            return (None, None) if t.org_id == org else (t.next_fire_at, None)

        assert _fire(backend, T0 + timedelta(hours=1), stop) == []
        stopped = backend.run(store.get_trigger, org, future.id)
        assert (stopped.next_fire_at, stopped.last_fired_at) == (None, future.next_fire_at)
        assert _fire(backend, T0 + timedelta(days=1), _scheduler(org, seen)) == []
        assert seen == {}
    finally:
        backend.run(store.delete, org, runner.id)
        backend.run(backend.storage.agents.delete, org, agent)


def test_busy_says_whether_the_trigger_has_a_run_going(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    tick = T0 - timedelta(minutes=10)
    triggers = [cron_in(org, tick=tick, runner_id=runner.id) for _ in range(5)]
    for t in triggers:
        backend.run(store.add_trigger, t)
    # runs of each trigger: queued, running, paused (busy); succeeded; and the last
    # has none of its own, only another trigger's queued run beside it
    for t, status in zip(triggers, ["queued", "running", "paused", "succeeded"], strict=False):
        run = run_in(org, runner_id=runner.id, trigger_id=t.id, status=status)
        backend.run(store.add_run, run)
    seen: dict[uuid.UUID, bool] = {}
    try:
        # a tick not fired: the decision's run is None, the trigger still moves on
        def skip_busy(t: Trigger, busy: bool) -> Firing:
            next_at, run = _scheduler(org, seen)(t, busy)
            return next_at, None if busy else run

        created = _fire(backend, T0, skip_busy)
        assert [seen[t.id] for t in triggers] == [True, True, True, False, False]
        assert sorted(r.trigger_id for r in created) == sorted([triggers[3].id, triggers[4].id])
        for t in triggers[:3]:
            moved = backend.run(store.get_trigger, org, t.id)
            assert moved.next_fire_at == tick + timedelta(minutes=1)
        # the runs just created are queued: now those two are busy
        seen.clear()
        _fire(backend, T0, skip_busy)
        assert [seen[t.id] for t in triggers] == [True, True, True, True, True]
    finally:
        backend.run(store.delete, org, runner.id)


def test_a_tick_fired_again_is_not_stored_again(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    tick = T0 - timedelta(minutes=1)
    trigger = cron_in(org, tick=tick, runner_id=runner.id)
    backend.run(store.add_trigger, trigger)
    seen: dict[uuid.UUID, bool] = {}
    try:
        # a scheduler that does not move the trigger on fires the same tick again
        stuck = _scheduler(org, seen, step=timedelta(0))
        first = _fire(backend, T0, stuck)
        assert len(first) == 1
        assert _fire(backend, T0, stuck) == []
        assert backend.run(lambda: store.runs(org, runner_id=runner.id)) == first
    finally:
        backend.run(store.delete, org, runner.id)


def test_two_schedulers_at_once_fire_each_tick_once(backend: Backend) -> None:
    org, runner = with_runner(backend)
    agent = with_agent(backend, org)
    store = backend.storage.runners
    triggers = [
        cron_in(org, tick=T0 - timedelta(seconds=30), runner_id=runner.id) for _ in range(4)
    ]
    triggers.append(cron_in(org, tick=T0 - timedelta(seconds=30), agent_id=agent))
    for t in triggers:
        backend.run(store.add_trigger, t)
    seen: dict[uuid.UUID, bool] = {}
    decide = _scheduler(org, seen)
    try:
        # three rounds, a minute apart (a step is a minute): each round's tick is due
        # once, and four schedulers race for it (on PostgreSQL, four connections)
        for i in range(3):
            at = T0 + timedelta(minutes=i)
            tick = at - timedelta(seconds=30)

            async def race(at: datetime = at) -> list[list[RunnerRun]]:
                return await asyncio.gather(*(store.fire_due(at, decide, 1000) for _ in range(4)))

            created = [r for batch in backend.run(race) for r in batch]
            assert sorted(str(r.trigger_id) for r in created) == sorted(str(t.id) for t in triggers)
            assert {r.scheduled_for for r in created} == {tick}
            for t in triggers:
                moved = backend.run(store.get_trigger, org, t.id)
                assert (moved.last_fired_at, moved.next_fire_at) == (tick, tick + _MINUTE)
        stored = backend.run(lambda: store.runs(org, runner_id=runner.id))
        assert len(stored) == 12
        assert len({(r.trigger_id, r.scheduled_for) for r in stored}) == 12
        assert len(backend.run(lambda: store.runs(org, agent_id=agent))) == 3
    finally:
        backend.run(store.delete, org, runner.id)
        backend.run(backend.storage.agents.delete, org, agent)


_MINUTE = timedelta(minutes=1)
