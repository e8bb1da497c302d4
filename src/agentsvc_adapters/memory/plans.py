"""Plans in memory. An edit holds a lock per plan (it awaits between its reads and
writes, unlike the other memory repositories' operations) and works on a copy,
stored when the block ends without an exception, as a transaction would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from uuid import UUID

import msgspec

from agentsvc_core.entities.plan import Edge, Plan, Todo, dependency_path, with_edges
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.plans import PlanEdit, PlanStore

Key = tuple[str, UUID]


class _State(msgspec.Struct, kw_only=True):
    plan: Plan  # without todos
    todos: dict[UUID, Todo]  # without edges
    edges: set[Edge]

    def copy(self) -> _State:
        return _State(plan=self.plan, todos=dict(self.todos), edges=set(self.edges))

    def assembled(self) -> Plan:
        return with_edges(self.plan, self.todos.values(), self.edges)


class _Edit(PlanEdit):
    def __init__(self, state: _State) -> None:
        self.state = state

    async def current(self) -> Plan:
        return self.state.assembled()

    async def save_plan(self, plan: Plan) -> None:
        self.state.plan = msgspec.structs.replace(
            self.state.plan, title=plan.title, status=plan.status, updated_at=plan.updated_at
        )

    async def save_todos(self, todos: Sequence[Todo]) -> None:
        for t in todos:
            self.state.todos[t.id] = msgspec.structs.replace(t, blocked_by=(), blocks=())

    async def delete_todo(self, todo_id: UUID) -> None:
        self.state.todos.pop(todo_id, None)
        self.state.edges = {
            e for e in self.state.edges if todo_id not in (e.todo_id, e.depends_on_id)
        }

    async def cycle(self, edge: Edge) -> list[UUID] | None:
        return dependency_path(self.state.edges, edge.depends_on_id, edge.todo_id)

    async def add_edge(self, edge: Edge) -> bool:
        if edge in self.state.edges:
            return False
        self.state.edges.add(edge)
        return True

    async def remove_edge(self, edge: Edge) -> bool:
        if edge not in self.state.edges:
            return False
        self.state.edges.discard(edge)
        return True


class MemoryPlans(PlanStore):
    def __init__(self) -> None:
        self._plans: dict[Key, _State] = {}
        self._locks: dict[Key, asyncio.Lock] = {}

    def _state(self, org_id: str, plan_id: UUID) -> _State:
        try:
            return self._plans[(org_id, plan_id)]
        except KeyError:
            raise NotFound("plan not found") from None

    async def add(self, plan: Plan) -> None:
        self._plans[(plan.org_id, plan.id)] = _State(
            plan=msgspec.structs.replace(plan, todos=()), todos={}, edges=set()
        )

    def drop_thread(self, org_id: str, thread_id: UUID) -> None:
        """A thread's plans go with it."""
        for key in [
            k for k, s in self._plans.items() if k[0] == org_id and s.plan.thread_id == thread_id
        ]:
            self._plans.pop(key, None)
            self._locks.pop(key, None)

    async def get(self, org_id: str, plan_id: UUID) -> Plan:
        return self._state(org_id, plan_id).assembled()

    async def for_thread(self, org_id: str, thread_id: UUID) -> list[Plan]:
        found = [
            s.assembled()
            for (org, _), s in self._plans.items()
            if org == org_id and s.plan.thread_id == thread_id
        ]
        return sorted(found, key=lambda p: (p.created_at, str(p.id)))

    async def delete(self, org_id: str, plan_id: UUID) -> None:
        key = (org_id, plan_id)
        self._state(org_id, plan_id)
        async with self._locks.setdefault(key, asyncio.Lock()):
            self._state(org_id, plan_id)  # still there after the wait
            del self._plans[key]
        self._locks.pop(key, None)

    @asynccontextmanager
    async def edit(self, org_id: str, plan_id: UUID) -> AsyncIterator[PlanEdit]:
        key = (org_id, plan_id)
        self._state(org_id, plan_id)
        async with self._locks.setdefault(key, asyncio.Lock()):
            work = _Edit(self._state(org_id, plan_id).copy())
            yield work
            if key in self._plans:
                self._plans[key] = work.state
