"""Plans: a thread's list of todos, ordered by ``position``, with dependency edges.

A todo ``depends on`` another (an ``Edge`` from ``todo_id`` to ``depends_on_id``):
it is *ready* when it is pending and every todo it depends on is done or skipped.
Only these edges affect readiness; ``parent_id`` is for display only. The edges of
a plan never form a cycle (the use case refuses an edge that would close one).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Literal, get_args
from uuid import UUID

import msgspec

PlanStatus = Literal["draft", "approved", "in_progress", "completed", "cancelled"]
TodoStatus = Literal["pending", "in_progress", "done", "skipped"]
PLAN_STATUSES: tuple[PlanStatus, ...] = get_args(PlanStatus)
TODO_STATUSES: tuple[TodoStatus, ...] = get_args(TodoStatus)
# a todo in one of these no longer blocks the todos that depend on it
FINISHED: frozenset[str] = frozenset({"done", "skipped"})


class Todo(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    content: str
    active_form: str | None = None  # "Writing the tests" for "Write the tests"
    status: TodoStatus = "pending"
    parent_id: UUID | None = None  # display only: never affects readiness
    position: int  # 0, 1, 2... within the plan, dense
    blocked_by: tuple[UUID, ...] = ()  # the todos it depends on (position order)
    blocks: tuple[UUID, ...] = ()  # the todos that depend on it (position order)
    created_at: datetime
    updated_at: datetime


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    thread_id: UUID
    title: str
    status: PlanStatus = "draft"
    todos: tuple[Todo, ...] = ()  # position order
    created_at: datetime
    updated_at: datetime

    def todo(self, todo_id: UUID) -> Todo | None:
        return next((t for t in self.todos if t.id == todo_id), None)

    def edges(self) -> list[Edge]:
        """Every dependency edge, by the dependent todo's position, then its blocker's."""
        return [Edge(todo_id=t.id, depends_on_id=d) for t in self.todos for d in t.blocked_by]


class Edge(msgspec.Struct, frozen=True):
    """``todo_id`` depends on ``depends_on_id`` (which blocks it until done or skipped)."""

    todo_id: UUID
    depends_on_id: UUID


class Blocked(msgspec.Struct, frozen=True, kw_only=True):
    todo_id: UUID
    waiting_on: tuple[UUID, ...]  # its blockers that are neither done nor skipped


def ordered(todos: Iterable[Todo]) -> list[Todo]:
    """Position order; ties (never stored by the use case) broken by creation, then id."""
    return sorted(todos, key=lambda t: (t.position, t.created_at, t.id))


def with_edges(plan: Plan, todos: Iterable[Todo], edges: Iterable[Edge]) -> Plan:
    """``plan`` with ``todos`` in position order, each with its ``blocked_by`` and
    ``blocks`` from ``edges`` (what a storage adapter reads, assembled one way)."""
    todos = ordered(todos)
    rank = {t.id: i for i, t in enumerate(todos)}
    blocked_by: dict[UUID, list[UUID]] = {}
    blocks: dict[UUID, list[UUID]] = {}
    for e in edges:
        blocked_by.setdefault(e.todo_id, []).append(e.depends_on_id)
        blocks.setdefault(e.depends_on_id, []).append(e.todo_id)
    return msgspec.structs.replace(
        plan,
        todos=tuple(
            msgspec.structs.replace(
                t,
                blocked_by=tuple(sorted(blocked_by.get(t.id, ()), key=rank.__getitem__)),
                blocks=tuple(sorted(blocks.get(t.id, ()), key=rank.__getitem__)),
            )
            for t in todos
        ),
    )


def dependency_path(edges: Iterable[Edge], start: UUID, goal: UUID) -> list[UUID] | None:
    """The shortest chain ``start`` -> ... -> ``goal`` where each depends on the next,
    or ``None``. (An edge ``goal`` -> ``start`` would close it into a cycle.)"""
    after: dict[UUID, list[UUID]] = {}
    for e in edges:
        after.setdefault(e.todo_id, []).append(e.depends_on_id)
    came_from: dict[UUID, UUID | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while (prev := came_from[path[-1]]) is not None:
                path.append(prev)
            return path[::-1]
        for nxt in sorted(after.get(node, ()), key=str):
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    return None


def ready(plan: Plan) -> list[Todo]:
    """The pending todos whose blockers are all done or skipped, in position order."""
    status: Mapping[UUID, str] = {t.id: t.status for t in plan.todos}
    return [
        t
        for t in plan.todos
        if t.status == "pending" and all(status[b] in FINISHED for b in t.blocked_by)
    ]


def blocked(plan: Plan) -> list[Blocked]:
    """The pending todos that are not ready, each with what it waits on."""
    status: Mapping[UUID, str] = {t.id: t.status for t in plan.todos}
    found = []
    for t in plan.todos:
        waiting = tuple(b for b in t.blocked_by if status[b] not in FINISHED)
        if t.status == "pending" and waiting:
            found.append(Blocked(todo_id=t.id, waiting_on=waiting))
    return found
