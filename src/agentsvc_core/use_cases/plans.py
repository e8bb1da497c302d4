"""Plans of a thread: todos, their order, dependency edges and what is ready
(docs/api.md#plans). The model edits them with the plan tools (``plan_tools.py``).

Access follows the thread: whoever may use the thread may read and change its
plans (members included, as with the thread's messages); a plan of a thread the
caller may not use is ``NotFound``, like another organization's.

Every change runs in one ``PlanStore.edit`` (the plan held for the block), so the
cycle check and the edge it allows, and the renumbering of positions, are never
interleaved with another change of the same plan.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.entities.plan import (
    Blocked,
    Edge,
    Plan,
    PlanStatus,
    Todo,
    TodoStatus,
    blocked,
    ready,
)
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import Clock
from agentsvc_core.ports.plans import PlanEdit, PlanStore
from agentsvc_core.rules import MAX_TITLE, check_text
from agentsvc_core.use_cases.threads import Threads

__all__ = [
    "MAX_ADD",
    "MAX_TODOS",
    "MAX_TODO_TEXT",
    "DependencyCycle",
    "PlanChanges",
    "Plans",
    "Readiness",
    "TodoChanges",
    "TodoDraft",
]

MAX_TODOS = 500  # in one plan
MAX_ADD = 100  # in one request
MAX_TODO_TEXT = 2000  # content, active_form
MAX_EDGE_CHANGES = 100


class DependencyCycle(Conflict):
    """The edge would close a cycle; ``path`` is the cycle, first todo repeated last."""

    def __init__(self, path: list[UUID]) -> None:
        super().__init__(
            "this dependency would close a cycle (each todo depends on the next): "
            + " -> ".join(str(t) for t in path),
            code="DEPENDENCY_CYCLE",
        )
        self.path = path


class TodoDraft(msgspec.Struct, frozen=True, kw_only=True):
    content: str
    active_form: str | None = None
    status: TodoStatus = "pending"
    parent_id: UUID | None = None
    # todos it depends on: an id of the plan's, or the index of a todo of the same call
    depends_on: tuple[UUID | int, ...] = ()


class TodoChanges(msgspec.Struct, frozen=True, kw_only=True):
    """``UNSET`` leaves a field alone; ``None`` clears ``active_form``/``parent_id``."""

    content: str | UnsetType = UNSET
    active_form: str | UnsetType | None = UNSET
    status: TodoStatus | UnsetType = UNSET
    parent_id: UUID | UnsetType | None = UNSET
    position: int | UnsetType = UNSET  # past the end: the end
    add_depends_on: tuple[UUID, ...] = ()
    remove_depends_on: tuple[UUID, ...] = ()


class PlanChanges(msgspec.Struct, frozen=True, kw_only=True):
    title: str | UnsetType = UNSET
    status: PlanStatus | UnsetType = UNSET


class Readiness(msgspec.Struct, frozen=True, kw_only=True):
    ready: tuple[Todo, ...]
    blocked: tuple[Blocked, ...] | None = None  # only when asked for


def _text(field: str, value: str | None, *, required: bool = False) -> None:
    if value is not None:
        check_text(field, value, max_len=MAX_TODO_TEXT, required=required)


def _dirty(before: Plan, order: list[Todo], now: datetime) -> list[Todo]:
    """The todos of ``order`` (the plan's new order) numbered 0, 1, 2...: those that
    differ from ``before``'s, with ``updated_at`` set to ``now``."""
    old = {t.id: t for t in before.todos}
    out = []
    for i, todo in enumerate(order):
        numbered = msgspec.structs.replace(todo, position=i)
        if numbered != old.get(todo.id):
            out.append(msgspec.structs.replace(numbered, updated_at=now))
    return out


class Plans:
    def __init__(self, store: PlanStore, threads: Threads, clock: Clock) -> None:
        self._store = store
        self._threads = threads
        self._clock = clock

    # --- access ---------------------------------------------------------------

    async def _thread(self, who: Principal, thread_id: UUID) -> None:
        """The thread exists and ``who`` may use it; else ``NotFound``."""
        try:
            await self._threads.visible(who, thread_id)
        except PermissionDenied:
            raise NotFound("thread not found") from None

    async def _visible(self, who: Principal, plan_id: UUID) -> Plan:
        plan = await self._store.get(who.org_id, plan_id)
        if not who.acts_for_org:
            try:
                await self._thread(who, plan.thread_id)
            except NotFound:
                raise NotFound("plan not found") from None
        return plan

    async def _may_edit(self, who: Principal, plan_id: UUID) -> None:
        """An organization's key may edit any of its plans (the edit finds it or
        not); a user's plan is checked through its thread first (a plan never
        moves to another thread, so the check holds for the edit)."""
        if not who.acts_for_org:
            await self._visible(who, plan_id)

    # --- plans ----------------------------------------------------------------

    async def create(
        self, who: Principal, thread_id: UUID, title: str, todos: list[TodoDraft] | None = None
    ) -> Plan:
        await self._thread(who, thread_id)
        return await self.create_in(who.org_id, thread_id, title, todos)

    async def create_in(
        self, org: str, thread_id: UUID, title: str, todos: list[TodoDraft] | None = None
    ) -> Plan:
        """A new draft plan of a thread the caller may use (checked already)."""
        check_text("title", title, max_len=MAX_TITLE, required=True)
        now = self._clock.now()
        plan = Plan(
            id=uuid.uuid4(),
            org_id=org,
            thread_id=thread_id,
            title=title,
            created_at=now,
            updated_at=now,
        )
        if todos:
            self._check_drafts(plan, todos)
        await self._store.add(plan)
        if not todos:
            return plan
        try:
            return await self.add_todos_in(org, plan.id, todos)
        except Exception:
            await self._store.delete(org, plan.id)  # all or nothing
            raise

    async def list_for_thread(self, who: Principal, thread_id: UUID) -> list[Plan]:
        await self._thread(who, thread_id)
        return await self._store.for_thread(who.org_id, thread_id)

    async def latest_in(self, org: str, thread_id: UUID) -> Plan | None:
        plans = await self._store.for_thread(org, thread_id)
        return plans[-1] if plans else None

    async def get(self, who: Principal, plan_id: UUID) -> Plan:
        return await self._visible(who, plan_id)

    async def get_in(self, org: str, plan_id: UUID) -> Plan:
        return await self._store.get(org, plan_id)

    async def update(self, who: Principal, plan_id: UUID, changes: PlanChanges) -> Plan:
        await self._may_edit(who, plan_id)
        return await self.update_in(who.org_id, plan_id, changes)

    async def update_in(self, org: str, plan_id: UUID, changes: PlanChanges) -> Plan:
        fields: dict[str, Any] = {}
        if changes.title is not UNSET:
            fields["title"] = check_text("title", changes.title, max_len=MAX_TITLE, required=True)
        if changes.status is not UNSET:
            fields["status"] = changes.status
        async with self._store.edit(org, plan_id) as tx:
            plan = await tx.current()
            if not fields:
                return plan
            await tx.save_plan(
                msgspec.structs.replace(plan, updated_at=self._clock.now(), **fields)
            )
            return await tx.current()

    async def delete(self, who: Principal, plan_id: UUID) -> None:
        await self._may_edit(who, plan_id)
        await self._store.delete(who.org_id, plan_id)

    # --- todos ----------------------------------------------------------------

    @staticmethod
    def _check_drafts(plan: Plan, drafts: list[TodoDraft]) -> None:
        if not drafts:
            raise InvalidInput("todos", "must hold at least one todo")
        if len(drafts) > MAX_ADD:
            raise InvalidInput("todos", f"at most {MAX_ADD} todos at a time")
        if len(plan.todos) + len(drafts) > MAX_TODOS:
            raise InvalidInput("todos", f"a plan holds at most {MAX_TODOS} todos")
        known = {t.id for t in plan.todos}
        for d in drafts:
            _text("content", d.content, required=True)
            _text("active_form", d.active_form)
            if d.parent_id is not None and d.parent_id not in known:
                raise InvalidInput("parent_id", "must be a todo of this plan")
            if len(d.depends_on) > MAX_EDGE_CHANGES:
                raise InvalidInput("depends_on", f"at most {MAX_EDGE_CHANGES} dependencies")
            for dep in d.depends_on:
                if isinstance(dep, int) and not 0 <= dep < len(drafts):
                    raise InvalidInput(
                        "depends_on", "an index must name a todo of the same request"
                    )

    async def add_todos(self, who: Principal, plan_id: UUID, drafts: list[TodoDraft]) -> Plan:
        await self._may_edit(who, plan_id)
        return await self.add_todos_in(who.org_id, plan_id, drafts)

    async def add_todos_in(self, org: str, plan_id: UUID, drafts: list[TodoDraft]) -> Plan:
        """Append the todos (in order, after the plan's), with their dependencies:
        all of them or, when one is refused (a cycle among them), none."""
        now = self._clock.now()
        async with self._store.edit(org, plan_id) as tx:
            plan = await tx.current()
            self._check_drafts(plan, drafts)
            new = [
                Todo(
                    id=uuid.uuid4(),
                    content=d.content,
                    active_form=d.active_form,
                    status=d.status,
                    parent_id=d.parent_id,
                    position=len(plan.todos) + i,
                    created_at=now,
                    updated_at=now,
                )
                for i, d in enumerate(drafts)
            ]
            await tx.save_todos(new)
            known = {t.id for t in plan.todos} | {t.id for t in new}
            for todo, d in zip(new, drafts, strict=True):
                for dep in d.depends_on:
                    target = new[dep].id if isinstance(dep, int) else dep
                    await self._link(tx, known, Edge(todo.id, target))
            return await self._touched(tx, plan, now)

    async def update_todo(
        self, who: Principal, plan_id: UUID, todo_id: UUID, changes: TodoChanges
    ) -> Plan:
        await self._may_edit(who, plan_id)
        return await self.update_todo_in(who.org_id, plan_id, todo_id, changes)

    async def update_todo_in(
        self, org: str, plan_id: UUID, todo_id: UUID, changes: TodoChanges
    ) -> Plan:
        now = self._clock.now()
        c = changes
        if c.content is not UNSET:
            _text("content", c.content, required=True)
        if c.active_form is not UNSET:
            _text("active_form", c.active_form)
        if c.position is not UNSET and c.position < 0:
            raise InvalidInput("position", "must be 0 or more")
        if len(c.add_depends_on) + len(c.remove_depends_on) > MAX_EDGE_CHANGES:
            raise InvalidInput("depends_on", f"at most {MAX_EDGE_CHANGES} changes at a time")
        async with self._store.edit(org, plan_id) as tx:
            plan = await tx.current()
            todo = plan.todo(todo_id)
            if todo is None:
                raise NotFound("todo not found")
            fields: dict[str, Any] = {
                f: getattr(c, f)
                for f in ("content", "active_form", "status", "parent_id")
                if getattr(c, f) is not UNSET
            }
            if fields.get("parent_id") is not None:
                self._check_parent(plan, todo_id, fields["parent_id"])
            changed = msgspec.structs.replace(todo, **fields)
            order = [t for t in plan.todos if t.id != todo_id]
            at = todo.position if c.position is UNSET else c.position
            order.insert(min(at, len(order)), changed)
            await tx.save_todos(_dirty(plan, order, now))
            known = {t.id for t in plan.todos}
            for dep in c.remove_depends_on:
                await tx.remove_edge(Edge(todo_id, dep))
            for dep in c.add_depends_on:
                await self._link(tx, known, Edge(todo_id, dep))
            return await self._touched(tx, plan, now)

    @staticmethod
    def _check_parent(plan: Plan, todo_id: UUID, parent_id: UUID) -> None:
        """The parent is a todo of the plan and not the todo or one of its children
        (the tree a client draws has no loop)."""
        parents = {t.id: t.parent_id for t in plan.todos}
        if parent_id not in parents:
            raise InvalidInput("parent_id", "must be a todo of this plan")
        node: UUID | None = parent_id
        while node is not None:
            if node == todo_id:
                raise InvalidInput("parent_id", "must not be the todo or one of its children")
            node = parents.get(node)

    async def delete_todo(self, who: Principal, plan_id: UUID, todo_id: UUID) -> Plan:
        """Its edges go; its children take its parent; the todos after it move up."""
        await self._may_edit(who, plan_id)
        now = self._clock.now()
        async with self._store.edit(who.org_id, plan_id) as tx:
            plan = await tx.current()
            todo = plan.todo(todo_id)
            if todo is None:
                raise NotFound("todo not found")
            await tx.delete_todo(todo_id)
            rest = [
                msgspec.structs.replace(t, parent_id=todo.parent_id)
                if t.parent_id == todo_id
                else t
                for t in plan.todos
                if t.id != todo_id
            ]
            await tx.save_todos(_dirty(plan, rest, now))
            return await self._touched(tx, plan, now)

    # --- dependencies ---------------------------------------------------------

    @staticmethod
    async def _link(tx: PlanEdit, known: set[UUID], edge: Edge) -> bool:
        if edge.depends_on_id == edge.todo_id:
            raise InvalidInput("depends_on", "a todo cannot depend on itself")
        if edge.depends_on_id not in known:
            raise InvalidInput("depends_on", "must be a todo of this plan")
        chain = await tx.cycle(edge)
        if chain is not None:
            raise DependencyCycle([edge.todo_id, *chain])
        return await tx.add_edge(edge)

    async def add_dependency(
        self, who: Principal, plan_id: UUID, todo_id: UUID, depends_on: UUID
    ) -> tuple[Edge, bool]:
        """The edge, and whether it is new (``False``: it was there already)."""
        await self._may_edit(who, plan_id)
        return await self.add_dependency_in(who.org_id, plan_id, todo_id, depends_on)

    async def add_dependency_in(
        self, org: str, plan_id: UUID, todo_id: UUID, depends_on: UUID
    ) -> tuple[Edge, bool]:
        now = self._clock.now()
        edge = Edge(todo_id, depends_on)
        async with self._store.edit(org, plan_id) as tx:
            plan = await tx.current()
            if plan.todo(todo_id) is None:
                raise NotFound("todo not found")
            created = await self._link(tx, {t.id for t in plan.todos}, edge)
            if created:
                await self._touched(tx, plan, now)
        return edge, created

    async def dependencies(self, who: Principal, plan_id: UUID, todo_id: UUID) -> list[Edge]:
        """The todo's edges: what it depends on, then what depends on it."""
        todo = (await self._visible(who, plan_id)).todo(todo_id)
        if todo is None:
            raise NotFound("todo not found")
        return [Edge(todo_id, d) for d in todo.blocked_by] + [Edge(b, todo_id) for b in todo.blocks]

    async def remove_dependency(
        self, who: Principal, plan_id: UUID, todo_id: UUID, depends_on: UUID
    ) -> None:
        await self._may_edit(who, plan_id)
        now = self._clock.now()
        async with self._store.edit(who.org_id, plan_id) as tx:
            plan = await tx.current()
            if plan.todo(todo_id) is None:
                raise NotFound("todo not found")
            if not await tx.remove_edge(Edge(todo_id, depends_on)):
                raise NotFound("no such dependency")
            await self._touched(tx, plan, now)

    async def readiness(self, who: Principal, plan_id: UUID, *, with_blocked: bool) -> Readiness:
        plan = await self._visible(who, plan_id)
        return Readiness(
            ready=tuple(ready(plan)), blocked=tuple(blocked(plan)) if with_blocked else None
        )

    async def _touched(self, tx: PlanEdit, plan: Plan, now: datetime) -> Plan:
        await tx.save_plan(msgspec.structs.replace(plan, updated_at=now))
        return await tx.current()
