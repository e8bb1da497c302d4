"""Storage of plans (``Storage.plans``): a plan, its todos and their dependency edges.

Every call is scoped by organization; another organization's plan is ``NotFound``.
Changes go through ``edit``, which holds the plan for the length of the block (a
row lock in PostgreSQL, a lock per plan in memory), so a check and the write it
allows (no edge closes a cycle; positions stay dense) cannot interleave with
another edit of the same plan. Adapters raise what storage raises (``NotFound``,
``StorageError``, ``Unavailable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol
from uuid import UUID

from agentsvc_core.entities.plan import Edge, Plan, Todo

__all__ = ["PlanEdit", "PlanStore"]


class PlanEdit(Protocol):
    """One plan, held for an edit. Writes are seen by this edit's later calls and
    stored when the block ends without an exception (nothing is, otherwise)."""

    async def current(self) -> Plan:
        """The plan as it is now in this edit: todos in position order, with edges."""
        ...

    async def save_plan(self, plan: Plan) -> None:
        """Store the plan's title, status and ``updated_at`` (not its todos)."""
        ...

    async def save_todos(self, todos: Sequence[Todo]) -> None:
        """Insert or update these todos of the plan (every field but the edges,
        which are ``add_edge``'s and ``remove_edge``'s)."""
        ...

    async def delete_todo(self, todo_id: UUID) -> None:
        """Delete the todo and every edge that names it."""
        ...

    async def cycle(self, edge: Edge) -> list[UUID] | None:
        """The chain ``depends_on_id`` -> ... -> ``todo_id`` (each depending on the
        next) that ``edge`` would close into a cycle, or ``None`` when it closes none."""
        ...

    async def add_edge(self, edge: Edge) -> bool:
        """Store the edge (both todos are the plan's); ``False`` if it was there."""
        ...

    async def remove_edge(self, edge: Edge) -> bool:
        """``False`` if there was no such edge."""
        ...


class PlanStore(Protocol):
    async def add(self, plan: Plan) -> None:
        """Store a new plan without todos (its thread exists)."""
        ...

    async def get(self, org_id: str, plan_id: UUID) -> Plan:
        """With its todos and edges, read at one moment. Raises ``NotFound``."""
        ...

    async def for_thread(self, org_id: str, thread_id: UUID) -> list[Plan]:
        """The thread's plans, oldest first (by ``created_at``, then id)."""
        ...

    async def delete(self, org_id: str, plan_id: UUID) -> None:
        """The plan, its todos and edges. Raises ``NotFound``."""
        ...

    def edit(self, org_id: str, plan_id: UUID) -> AbstractAsyncContextManager[PlanEdit]:
        """Hold the plan for an edit (see the module). Raises ``NotFound`` on entry."""
        ...
