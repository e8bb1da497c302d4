"""Plans: the memory and PostgreSQL adapters agree (the random walk of
tests/plan_walk.py on each), and an edit holds its plan against concurrent ones."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

from agentsvc_adapters.clock import SystemClock
from agentsvc_core.entities import Principal
from agentsvc_core.entities.plan import Edge
from agentsvc_core.errors import NotFound
from agentsvc_core.use_cases import Threads
from agentsvc_core.use_cases.plans import DependencyCycle, Plans, TodoDraft
from tests.contract.conftest import Backend
from tests.contract.test_conversations_contract import a_thread
from tests.plan_walk import STEPS, walk


def _plans(backend: Backend) -> Plans:
    s = backend.storage
    return Plans(
        s.plans, Threads(s.threads, s.agents, s.conversations, SystemClock()), SystemClock()
    )


def _thread(backend: Backend) -> tuple[Principal, uuid.UUID]:
    org = backend.fresh_org()
    thread = backend.run(backend.storage.threads.add, a_thread(org))
    return Principal(org_id=org, method="api_key"), thread.id


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=STEPS)
def test_random_walks_agree_with_the_model(backend: Backend, steps: list[Any]) -> None:
    who, thread = _thread(backend)
    backend.run(walk, _plans(backend), who, thread, steps)


def test_round_trip_order_and_deletes(backend: Backend) -> None:
    plans = _plans(backend)
    who, thread = _thread(backend)
    first = backend.run(plans.create, who, thread, "first", [TodoDraft(content="ü\n'\"")])
    second = backend.run(
        plans.create,
        who,
        thread,
        "second",
        [
            TodoDraft(content="a", active_form="doing a", status="in_progress"),
            TodoDraft(content="b", depends_on=(0,), parent_id=None),
        ],
    )
    store = backend.storage.plans
    assert backend.run(store.get, who.org_id, second.id) == second
    assert backend.run(store.for_thread, who.org_id, thread) == [first, second]
    a, b = second.todos
    assert b.blocked_by == (a.id,)
    assert a.blocks == (b.id,)
    assert a.active_form == "doing a"
    # another organization sees nothing
    other = backend.fresh_org()
    with pytest.raises(NotFound):
        backend.run(store.get, other, second.id)
    assert backend.run(store.for_thread, other, thread) == []
    # deleting a blocker drops the edge; deleting the plan drops its todos
    backend.run(plans.delete_todo, who, second.id, a.id)
    left = backend.run(store.get, who.org_id, second.id)
    assert [(t.content, t.position, t.blocked_by) for t in left.todos] == [("b", 0, ())]
    backend.run(plans.delete, who, second.id)
    with pytest.raises(NotFound):
        backend.run(store.get, who.org_id, second.id)
    assert backend.run(store.for_thread, who.org_id, thread) == [first]


def test_an_edit_that_fails_stores_nothing(backend: Backend) -> None:
    plans = _plans(backend)
    who, thread = _thread(backend)
    plan = backend.run(
        plans.create, who, thread, "p", [TodoDraft(content="a"), TodoDraft(content="b")]
    )

    async def broken() -> None:
        async with backend.storage.plans.edit(who.org_id, plan.id) as tx:
            current = await tx.current()
            await tx.save_plan(msgspec.structs.replace(current, title="changed"))
            await tx.save_todos([msgspec.structs.replace(current.todos[0], content="changed")])
            await tx.add_edge(Edge(current.todos[0].id, current.todos[1].id))
            assert (await tx.current()).todos[0].content == "changed"
            raise RuntimeError("midway")

    with pytest.raises(RuntimeError):
        backend.run(broken)
    assert backend.run(backend.storage.plans.get, who.org_id, plan.id) == plan
    with pytest.raises(NotFound):
        backend.run(_enter, backend, who.org_id, uuid.uuid4())


async def _enter(backend: Backend, org: str, plan_id: uuid.UUID) -> None:
    async with backend.storage.plans.edit(org, plan_id):
        pass


def test_concurrent_opposite_edges_admit_exactly_one(backend: Backend) -> None:
    """a -> b and b -> a at once, many times over: exactly one is stored each time.
    (On PostgreSQL each runs on its own pooled connection, in its own transaction.)"""
    plans = _plans(backend)
    who, thread = _thread(backend)
    for _ in range(10):
        plan = backend.run(
            plans.create, who, thread, "race", [TodoDraft(content="a"), TodoDraft(content="b")]
        )
        a, b = (t.id for t in plan.todos)

        async def race(
            plan_id: uuid.UUID = plan.id, a: uuid.UUID = a, b: uuid.UUID = b
        ) -> list[str]:
            outcomes: list[str] = []
            start = anyio.Event()

            async def add(x: uuid.UUID, y: uuid.UUID) -> None:
                await start.wait()
                try:
                    await plans.add_dependency(who, plan_id, x, y)
                    outcomes.append("accepted")
                except DependencyCycle:
                    outcomes.append("refused")

            async with anyio.create_task_group() as tg:
                tg.start_soon(add, a, b)
                tg.start_soon(add, b, a)
                await asyncio.sleep(0.01)
                start.set()
            return sorted(outcomes)

        assert backend.run(race) == ["accepted", "refused"]
        edges = backend.run(backend.storage.plans.get, who.org_id, plan.id).edges()
        assert edges in ([Edge(a, b)], [Edge(b, a)])
