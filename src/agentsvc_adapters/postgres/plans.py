"""Plans on PostgreSQL (``plans``, ``plan_todos``, ``plan_todo_deps``; migration 0011).

A plan is read in one statement (its todos and edges as JSON arrays beside its
row), so a read sees one moment. An edit is one transaction that starts by locking
the plan's row ``FOR UPDATE``: two edits of one plan run one after the other, and
the second's statements (READ COMMITTED: a snapshot per statement) see what the
first committed. That is what makes the cycle check safe: two edges a -> b and
b -> a added at once are checked one after the other, and the second sees the
first. The check itself is a recursive CTE (what the new edge's blocker reaches);
only when it finds a cycle are the plan's edges read to name its path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres.pool import Connection, Repo, Row, translate
from agentsvc_core.entities.plan import (
    Edge,
    Plan,
    PlanStatus,
    Todo,
    TodoStatus,
    dependency_path,
    with_edges,
)
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.plans import PlanEdit, PlanStore

_TodoRow = tuple[UUID, str, str | None, TodoStatus, UUID | None, int, datetime, datetime]
_todos = msgspec.json.Decoder(list[_TodoRow])
_edges = msgspec.json.Decoder(list[tuple[UUID, UUID]])

_SELECT = """
SELECT p.org_id, p.id, p.thread_id, p.title, p.status, p.created_at, p.updated_at,
    (SELECT coalesce(json_agg(json_build_array(t.id, t.content, t.active_form, t.status,
        t.parent_id, t.position, t.created_at, t.updated_at)), '[]')::text
     FROM plan_todos t WHERE t.org_id = p.org_id AND t.plan_id = p.id),
    (SELECT coalesce(json_agg(json_build_array(d.todo_id, d.depends_on_id)), '[]')::text
     FROM plan_todo_deps d WHERE d.org_id = p.org_id AND d.plan_id = p.id)
FROM plans p
"""
_BY_ID = _SELECT + "WHERE p.org_id = %s AND p.id = %s"
_BY_THREAD = _SELECT + "WHERE p.org_id = %s AND p.thread_id = %s ORDER BY p.created_at, p.id"
# what the new edge's blocker depends on, directly or not (UNION: each todo once)
_REACHES = """
WITH RECURSIVE reach(id) AS (
    SELECT %(start)s::uuid
    UNION
    SELECT d.depends_on_id FROM reach r JOIN plan_todo_deps d
        ON d.org_id = %(org)s AND d.plan_id = %(plan)s AND d.todo_id = r.id
)
SELECT EXISTS (SELECT 1 FROM reach WHERE id = %(goal)s)
"""


def _plan(row: Row) -> Plan:
    org, plan_id, thread_id, title, status, created_at, updated_at, todos, edges = row
    status_: PlanStatus = status
    plan = Plan(
        id=plan_id,
        org_id=org,
        thread_id=thread_id,
        title=title,
        status=status_,
        created_at=created_at,
        updated_at=updated_at,
    )
    return with_edges(
        plan,
        (
            Todo(
                id=t[0],
                content=t[1],
                active_form=t[2],
                status=t[3],
                parent_id=t[4],
                position=t[5],
                created_at=t[6],
                updated_at=t[7],
            )
            for t in _todos.decode(todos)
        ),
        (Edge(a, b) for a, b in _edges.decode(edges)),
    )


class _Edit(PlanEdit):
    def __init__(self, conn: Connection, org_id: str, plan_id: UUID) -> None:
        self._conn = conn
        self._org = org_id
        self._plan = plan_id

    async def current(self) -> Plan:
        cur = await self._conn.execute(_BY_ID, (self._org, self._plan))
        row = await cur.fetchone()
        assert row is not None  # locked by this transaction
        return _plan(row)

    async def save_plan(self, plan: Plan) -> None:
        await self._conn.execute(
            "UPDATE plans SET title = %s, status = %s, updated_at = %s"
            " WHERE org_id = %s AND id = %s",
            (plan.title, plan.status, plan.updated_at, self._org, self._plan),
        )

    async def save_todos(self, todos: Sequence[Todo]) -> None:
        if not todos:
            return
        async with self._conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO plan_todos (org_id, plan_id, id, content, active_form, status,"
                " parent_id, position, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (org_id, plan_id, id) DO UPDATE SET content = EXCLUDED.content,"
                " active_form = EXCLUDED.active_form, status = EXCLUDED.status,"
                " parent_id = EXCLUDED.parent_id, position = EXCLUDED.position,"
                " updated_at = EXCLUDED.updated_at",
                [
                    (
                        self._org,
                        self._plan,
                        t.id,
                        t.content,
                        t.active_form,
                        t.status,
                        t.parent_id,
                        t.position,
                        t.created_at,
                        t.updated_at,
                    )
                    for t in todos
                ],
            )

    async def delete_todo(self, todo_id: UUID) -> None:
        # its edges go with it (ON DELETE CASCADE)
        await self._conn.execute(
            "DELETE FROM plan_todos WHERE org_id = %s AND plan_id = %s AND id = %s",
            (self._org, self._plan, todo_id),
        )

    async def cycle(self, edge: Edge) -> list[UUID] | None:
        cur = await self._conn.execute(
            _REACHES,
            {
                "org": self._org,
                "plan": self._plan,
                "start": edge.depends_on_id,
                "goal": edge.todo_id,
            },
        )
        row = await cur.fetchone()
        if row is None or not row[0]:
            return None
        cur = await self._conn.execute(
            "SELECT todo_id, depends_on_id FROM plan_todo_deps WHERE org_id = %s AND plan_id = %s",
            (self._org, self._plan),
        )
        edges = [Edge(a, b) for a, b in await cur.fetchall()]
        return dependency_path(edges, edge.depends_on_id, edge.todo_id)

    async def add_edge(self, edge: Edge) -> bool:
        cur = await self._conn.execute(
            "INSERT INTO plan_todo_deps (org_id, plan_id, todo_id, depends_on_id)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
            (self._org, self._plan, edge.todo_id, edge.depends_on_id),
        )
        return await cur.fetchone() is not None

    async def remove_edge(self, edge: Edge) -> bool:
        cur = await self._conn.execute(
            "DELETE FROM plan_todo_deps WHERE org_id = %s AND plan_id = %s AND todo_id = %s"
            " AND depends_on_id = %s RETURNING 1",
            (self._org, self._plan, edge.todo_id, edge.depends_on_id),
        )
        return await cur.fetchone() is not None


class PostgresPlans(Repo, PlanStore):
    async def add(self, plan: Plan) -> None:
        await self._one(
            "INSERT INTO plans (org_id, id, thread_id, title, status, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                plan.org_id,
                plan.id,
                plan.thread_id,
                plan.title,
                plan.status,
                plan.created_at,
                plan.updated_at,
            ),
        )

    async def get(self, org_id: str, plan_id: UUID) -> Plan:
        row = await self._one(_BY_ID, (org_id, plan_id))
        if row is None:
            raise NotFound("plan not found")
        return _plan(row)

    async def for_thread(self, org_id: str, thread_id: UUID) -> list[Plan]:
        return [_plan(r) for r in await self._all(_BY_THREAD, (org_id, thread_id))]

    async def delete(self, org_id: str, plan_id: UUID) -> None:
        # todos and edges go with it (ON DELETE CASCADE)
        row = await self._one(
            "DELETE FROM plans WHERE org_id = %s AND id = %s RETURNING id", (org_id, plan_id)
        )
        if row is None:
            raise NotFound("plan not found")

    @asynccontextmanager
    async def edit(self, org_id: str, plan_id: UUID) -> AsyncIterator[PlanEdit]:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT 1 FROM plans WHERE org_id = %s AND id = %s FOR UPDATE", (org_id, plan_id)
            )
            if await cur.fetchone() is None:
                raise NotFound("plan not found")
            yield _Edit(conn, org_id, plan_id)
