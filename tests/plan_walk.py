"""A random walk over one plan's todos and edges, checked after every step against
a model written here independently of the service's code: no accepted edge makes
a cycle, every refused edge would have made one (and the 409 names a real cycle),
the edges and positions are what the steps made them, and ``ready`` is exactly the
pending todos whose blockers are all done or skipped.

Used by the use case's unit test (memory) and the storage contract test (memory and
PostgreSQL)."""

from __future__ import annotations

import itertools
from typing import Any
from uuid import UUID

import pytest
from hypothesis import strategies as st

from agentsvc_core.entities import Principal
from agentsvc_core.entities.plan import TODO_STATUSES
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.use_cases.plans import DependencyCycle, Plans, TodoChanges, TodoDraft

_i = st.integers(0, 30)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("edge"), _i, _i),
        st.tuples(st.just("edge"), _i, _i),  # twice as likely: edges are the point
        st.tuples(st.just("unedge"), _i, _i),
        st.tuples(st.just("status"), _i, st.sampled_from(TODO_STATUSES)),
        st.tuples(st.just("delete"), _i),
        st.tuples(st.just("add"), st.integers(1, 3)),
        st.tuples(st.just("move"), _i, _i),
    ),
    max_size=40,
)


def _reaches(edges: set[tuple[UUID, UUID]], start: UUID, goal: UUID) -> bool:
    """Depth-first: does ``start`` depend on ``goal``, directly or not?"""
    seen, stack = set(), [start]
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(b for a, b in edges if a == node)
    return False


def _acyclic(nodes: list[UUID], edges: set[tuple[UUID, UUID]]) -> bool:
    """Kahn's algorithm: every node can be taken once nothing it depends on is left."""
    left = set(nodes)
    while left:
        free = [n for n in left if not any(a == n and b in left for a, b in edges)]
        if not free:
            return False
        left -= set(free)
    return True


class Model:
    def __init__(self) -> None:
        self.order: list[UUID] = []
        self.status: dict[UUID, str] = {}
        self.edges: set[tuple[UUID, UUID]] = set()
        self.refused = 0
        self.accepted = 0

    def ready(self) -> list[UUID]:
        return [
            t
            for t in self.order
            if self.status[t] == "pending"
            and all(self.status[b] in ("done", "skipped") for a, b in self.edges if a == t)
        ]


async def check(plans: Plans, who: Principal, plan_id: UUID, model: Model) -> None:
    plan = await plans.get(who, plan_id)
    assert [t.id for t in plan.todos] == model.order
    assert [t.position for t in plan.todos] == list(range(len(model.order)))
    assert {t.id: t.status for t in plan.todos} == model.status
    stored = {(e.todo_id, e.depends_on_id) for e in plan.edges()}
    assert stored == model.edges
    assert _acyclic(model.order, stored)
    for t in plan.todos:
        assert set(t.blocks) == {a for a, b in model.edges if b == t.id}
    found = await plans.readiness(who, plan_id, with_blocked=True)
    assert [t.id for t in found.ready] == model.ready()
    assert found.blocked is not None
    waiting = {b.todo_id: set(b.waiting_on) for b in found.blocked}
    for todo_id in model.order:
        if model.status[todo_id] == "pending" and todo_id not in model.ready():
            assert waiting.pop(todo_id) == {
                b
                for a, b in model.edges
                if a == todo_id and model.status[b] not in ("done", "skipped")
            }
    assert waiting == {}


async def walk(plans: Plans, who: Principal, thread_id: UUID, steps: list[Any]) -> Model:
    plan = await plans.create(
        who, thread_id, "walk", [TodoDraft(content=f"t{i}") for i in range(5)]
    )
    model = Model()
    model.order = [t.id for t in plan.todos]
    model.status = dict.fromkeys(model.order, "pending")
    await check(plans, who, plan.id, model)
    for step in steps:
        kind, *args = step
        n = len(model.order)
        if kind == "add":
            added = await plans.add_todos(
                who, plan.id, [TodoDraft(content=f"n{i}") for i in range(args[0])]
            )
            new = [t.id for t in added.todos[n:]]
            model.order += new
            model.status.update(dict.fromkeys(new, "pending"))
        elif n == 0:
            continue
        elif kind == "edge":
            await _edge(
                plans, who, plan.id, model, model.order[args[0] % n], model.order[args[1] % n]
            )
        elif kind == "unedge":
            a, b = model.order[args[0] % n], model.order[args[1] % n]
            try:
                await plans.remove_dependency(who, plan.id, a, b)
                assert (a, b) in model.edges
                model.edges.discard((a, b))
            except NotFound:
                assert (a, b) not in model.edges
        elif kind == "status":
            t = model.order[args[0] % n]
            await plans.update_todo(who, plan.id, t, TodoChanges(status=args[1]))
            model.status[t] = args[1]
        elif kind == "delete":
            t = model.order.pop(args[0] % n)
            await plans.delete_todo(who, plan.id, t)
            del model.status[t]
            model.edges = {(a, b) for a, b in model.edges if t not in (a, b)}
        elif kind == "move":
            t = model.order.pop(args[0] % n)
            model.order.insert(min(args[1], n - 1), t)
            await plans.update_todo(who, plan.id, t, TodoChanges(position=args[1]))
        await check(plans, who, plan.id, model)
    return model


async def _edge(
    plans: Plans, who: Principal, plan_id: UUID, model: Model, a: UUID, b: UUID
) -> None:
    """Make ``a`` depend on ``b``: refused exactly when the model says it must be."""
    if a == b:
        with pytest.raises(InvalidInput):
            await plans.add_dependency(who, plan_id, a, b)
    elif _reaches(model.edges, b, a):
        with pytest.raises(DependencyCycle) as caught:
            await plans.add_dependency(who, plan_id, a, b)
        path = caught.value.path
        assert path[0] == path[-1] == a
        assert path[1] == b
        assert all((x, y) in model.edges for x, y in itertools.pairwise(path[1:]))
        model.refused += 1
    else:
        edge, created = await plans.add_dependency(who, plan_id, a, b)
        assert (edge.todo_id, edge.depends_on_id) == (a, b)
        assert created == ((a, b) not in model.edges)
        model.edges.add((a, b))
        model.accepted += 1
