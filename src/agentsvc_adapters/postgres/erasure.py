"""Deletion and erasure on PostgreSQL (``ErasureStore``; migration 0029).

A thread's erasure is one transaction: the thread's row is locked first (a send
that begins meanwhile waits, then finds no thread), what has no foreign key to
the thread is deleted or scrubbed by the thread's id and its runs' ids, then the
thread's row goes and ``ON DELETE CASCADE`` takes its participants, runs,
messages, plans (with their todos), thread knowledge (with its chunks), visitor
record and channel chat mappings. Usage records (tokens and costs) stay.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.entities.erasure import ERASED
from agentsvc_core.entities.memory import Memory
from agentsvc_core.errors import ThreadBusy
from agentsvc_core.ports.erasure import ErasureStore, StaleThread, UserThread

# a thread's runs, as a USING clause's table and its join (%(o)s, %(t)s)
_RUNS = "runs r WHERE r.org_id = %(o)s AND r.thread_id = %(t)s AND {alias}.org_id = r.org_id"

# the runner runs that talked in the thread (theirs, or an agent step's there: its
# thread is in the steps' JSON only, a rare write: scanned, no index)
_RUNNER_RUNS = "WHERE org_id = %(o)s AND (thread_id = %(t)s OR steps::text LIKE %(like)s)"
# the thread's traces, and the traces of those runner runs (their thread is the run's)
_TRACES = (
    "({alias}.thread_id = %(t)s OR {alias}.id IN (SELECT trace_id FROM runner_runs "
    + _RUNNER_RUNS
    + " AND trace_id IS NOT NULL))"
)

# each a statement of the erasure's transaction, over %(o)s (organization), %(t)s
# (thread id), %(ts)s (its text) and %(like)s (a LIKE pattern that finds it)
_STEPS = (
    # the sends' idempotency keys (they name the runs), the runs' stored events
    "DELETE FROM idempotency_keys k USING " + _RUNS.format(alias="k") + " AND k.run_id = r.id",
    "DELETE FROM run_events e USING " + _RUNS.format(alias="e") + " AND e.run_id = r.id",
    # traces keep their spans (names, timings, tokens, costs) without payloads
    "UPDATE trace_evaluations v SET detail = NULL FROM traces t"
    " WHERE t.org_id = %(o)s AND " + _TRACES.format(alias="t") + " AND v.org_id = t.org_id"
    " AND v.trace_id = t.id AND v.detail IS NOT NULL",
    "UPDATE traces t SET spans = coalesce((SELECT json_agg(s::jsonb - 'input' - 'output'"
    " - 'error' - 'truncated' - 'original_bytes' ORDER BY n)"
    " FROM json_array_elements(spans) WITH ORDINALITY AS x(s, n)), '[]'::json)"
    " WHERE t.org_id = %(o)s AND " + _TRACES.format(alias="t"),
    "DELETE FROM memories WHERE org_id = %(o)s AND scope = 'thread' AND scope_id = %(ts)s",
    # the events of those runner runs: what the runs' update below drops
    "UPDATE runner_run_events e SET data = (data::jsonb || CASE WHEN e.type = 'step.failed'"
    ' THEN \'{"output": null, "error": null}\'::jsonb ELSE \'{"output": null}\'::jsonb END)::json'
    " FROM runner_runs r WHERE r.org_id = %(o)s AND (r.thread_id = %(t)s"
    " OR r.steps::text LIKE %(like)s) AND e.org_id = r.org_id AND e.run_id = r.id"
    " AND (e.type = 'run.finished' OR e.type IN ('step.finished', 'step.failed')"
    " AND (r.thread_id = %(t)s OR e.data->>'thread_id' = %(ts)s))",
    # runner runs keep their status, tokens and costs; their outputs go, and the
    # outputs and errors of the steps that talked in the thread
    "UPDATE runner_runs SET output = 'null'::json, version = version + 1,"
    " steps = coalesce((SELECT json_agg(CASE WHEN runner_runs.thread_id = %(t)s"
    " OR s->>'thread_id' = %(ts)s THEN s::jsonb || '{\"output\": null, \"error\": null}'"
    " ELSE s::jsonb END ORDER BY n)"
    " FROM json_array_elements(steps) WITH ORDINALITY AS x(s, n)), '[]'::json)"
    " " + _RUNNER_RUNS,
    # a channel's inbound messages keep their event id (a redelivery is still known)
    "UPDATE channel_events SET text = %(erased)s, reply_text = NULL, thread_id = NULL"
    " WHERE org_id = %(o)s AND thread_id = %(t)s",
    "UPDATE channel_contacts SET thread_id = NULL WHERE org_id = %(o)s AND thread_id = %(t)s",
    "DELETE FROM threads WHERE org_id = %(o)s AND id = %(t)s",
)

_MEMORY_COLUMNS = (
    "id, org_id, agent_id, scope, scope_id, content, key, status, superseded_by,"
    " created_at, updated_at"
)

# the threads of organizations with a retention whose last change, message and
# reply are all older than it (the sweep; oldest first)
_STALE = (
    "SELECT t.org_id, t.id FROM thread_retention k"
    " JOIN threads t ON t.org_id = k.org_id"
    " AND t.updated_at < %(now)s - make_interval(days => k.days)"
    " WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.org_id = t.org_id AND r.thread_id = t.id"
    " AND r.started_at >= %(now)s - make_interval(days => k.days))"
    " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.org_id = t.org_id"
    " AND m.thread_id = t.id AND m.created_at >= %(now)s - make_interval(days => k.days))"
    " ORDER BY t.updated_at, t.org_id, t.id LIMIT %(limit)s"
)


class PostgresErasure(Repo, ErasureStore):
    async def erase_thread(self, org_id: str, thread_id: UUID, busy_after: datetime) -> bool:
        params = {
            "o": org_id,
            "t": thread_id,
            "ts": str(thread_id),
            "like": f'%"{thread_id}"%',
            "erased": ERASED,
            "busy": busy_after,
        }
        async with translate(), self._pool.connection() as conn, conn.transaction():
            # the row lock: a send's run insert (its foreign key's KEY SHARE lock)
            # waits for this transaction, then finds no thread
            cur = await conn.execute(
                "SELECT 1 FROM threads WHERE org_id = %(o)s AND id = %(t)s FOR UPDATE", params
            )
            if await cur.fetchone() is None:
                return False
            # a reply a send began after the caller stopped the last (READ COMMITTED:
            # this statement sees every run committed before the lock was taken)
            cur = await conn.execute(
                "SELECT 1 FROM runs WHERE org_id = %(o)s AND thread_id = %(t)s"
                " AND status = 'running' AND heartbeat_at >= %(busy)s",
                params,
            )
            if await cur.fetchone() is not None:
                raise ThreadBusy()
            for sql in _STEPS:
                await conn.execute(sql, params)
        return True

    async def user_threads(self, org_id: str, user_id: str) -> list[UserThread]:
        rows = await self._all(
            "SELECT t.id, v.thread_id IS NOT NULL FROM threads t"
            " LEFT JOIN visitor_threads v ON v.org_id = t.org_id AND v.thread_id = t.id"
            " AND v.visitor_id = %(u)s"
            " WHERE t.org_id = %(o)s AND (t.created_by = %(u)s OR t.id IN (SELECT thread_id"
            " FROM visitor_threads WHERE org_id = %(o)s AND visitor_id = %(u)s))"
            " ORDER BY t.created_at, t.id",
            {"o": org_id, "u": user_id},
        )
        return [UserThread(thread_id=r[0], visitor=bool(r[1])) for r in rows]

    async def user_memories(self, org_id: str, user_id: str) -> list[Memory]:
        rows = await self._all(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE org_id = %s AND scope = 'user'"
            " AND scope_id = %s ORDER BY created_at, id",
            (org_id, user_id),
        )
        names = [c.strip() for c in _MEMORY_COLUMNS.split(",")]
        return [Memory(**dict(zip(names, r, strict=True))) for r in rows]

    async def delete_user_memories(self, org_id: str, user_id: str) -> int:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM memories WHERE org_id = %s AND scope = 'user' AND scope_id = %s",
                (org_id, user_id),
            )
            return cur.rowcount

    async def leave_threads(self, org_id: str, user_id: str) -> int:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM thread_participants WHERE org_id = %s AND user_id = %s",
                (org_id, user_id),
            )
            return cur.rowcount

    async def retention_days(self, org_id: str) -> int | None:
        row = await self._one("SELECT days FROM thread_retention WHERE org_id = %s", (org_id,))
        return None if row is None else int(row[0])

    async def set_retention_days(self, org_id: str, days: int | None) -> None:
        async with translate(), self._pool.connection() as conn:
            if days is None:
                await conn.execute("DELETE FROM thread_retention WHERE org_id = %s", (org_id,))
            else:
                await conn.execute(
                    "INSERT INTO thread_retention (org_id, days) VALUES (%s, %s)"
                    " ON CONFLICT (org_id) DO UPDATE SET days = excluded.days",
                    (org_id, days),
                )

    async def stale_threads(self, now: datetime, limit: int) -> list[StaleThread]:
        rows = await self._all(_STALE, {"now": now, "limit": limit})
        return [StaleThread(org_id=r[0], thread_id=r[1]) for r in rows]
