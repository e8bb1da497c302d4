"""Threads, participants, runs, messages and usage records on PostgreSQL.

A turn costs two statements, each atomic on its own (data-modifying CTEs, no
transaction block): ``begin_turn`` (insert the run and the user's message, check
by its message count that the thread is as ``turn_inputs`` read it; a stale run
in the way is swept and the statement retried once) and ``finish_turn`` (the
run's final state, the assistant messages, the usage records). One reply per
thread is enforced by a partial unique index on running runs, so two processes
racing to start a reply on one thread cannot both succeed. Each run records the
process that runs it (``owner``, see ``owners``), so a run whose process is gone
can be told at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres._rows import (
    EVENTS_INSERT,
    HISTORY,
    KEY_CLAIM,
    MSG_COLS,
    RUN_COLS,
    count_sql,
    event_params,
    key_claim_params,
    to_message,
    to_run,
    trace_ctes,
)
from agentsvc_adapters.postgres.owners import ORPHANED
from agentsvc_adapters.postgres.pool import Connection, Pool, Repo, translate
from agentsvc_core.entities import (
    Message,
    Run,
    TraceRecord,
    Usage,
    UsageRecord,
    visible_in_history,
)
from agentsvc_core.errors import (
    Conflict,
    IdempotencyKeyInUse,
    ThreadBusy,
)
from agentsvc_core.ports import ConversationStore, EventBatch
from agentsvc_core.ports.idempotency import IdempotencyClaim
from agentsvc_core.ports.storage import RUN_MESSAGES_WINDOW

_enc = msgspec.json.Encoder()
_meta = msgspec.json.Decoder(dict[str, str])
_TICK = timedelta(microseconds=1)
_MAX_BUMPS = 10_000


def _json(value: object) -> str:
    return _enc.encode(value).decode()


# --- runs, messages, usage ------------------------------------------------------

_MSG_INSERT_HEAD = (
    "INSERT INTO messages (id, org_id, thread_id, role, content, created_at, sender_name,"
    " sender_id, tool_calls, tool_call_id, status, run_id, visible, provider_blocks, parent_id)"
    " VALUES "
)
_MSG_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s, %s, %s, %s, %s::json, %s)"
# a branched thread's turn moves its head to the last message it stores
_HEAD = ", h AS (UPDATE threads SET head_id = %s WHERE org_id = %s AND id = %s)"
_USAGE_INSERT_HEAD = (
    "INSERT INTO usage_records (org_id, id, agent_id, thread_id, run_id, message_id, provider,"
    " model, input_tokens, output_tokens, cached_input_tokens, key_source, metadata, created_at,"
    " cost_usd, purpose) VALUES "
)
_USAGE_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s, %s, %s)"


def _rows(row: str, n: int) -> str:
    return ", ".join([row] * n)


_COUNT = count_sql("%s", "%s")
# A page of a thread's visible messages and how many there are, in one statement
# (the count row stands alone, its message columns null, past the last page).
_HISTORY_PAGE = (
    "WITH n AS (SELECT count(*) AS n FROM messages WHERE org_id = %s AND thread_id = %s"
    " AND visible)"
    f" SELECT n.n, page.* FROM n LEFT JOIN LATERAL (SELECT {MSG_COLS}, seq FROM messages"
    " WHERE org_id = %s AND thread_id = %s AND visible ORDER BY seq OFFSET %s LIMIT %s)"
    " page ON true ORDER BY page.seq"
)


def _begin_statement(
    run: Run, new: list[Message], owner: int, head: UUID | None
) -> tuple[str, list[Any]]:
    """Insert the run (run by process ``owner``) and the messages, move the thread's
    head (a branched thread's), then count the thread's messages (as they were
    before the statement)."""
    sql = (
        "WITH r AS (INSERT INTO runs (id, org_id, thread_id, status, started_at, heartbeat_at,"
        " owner) VALUES (%s, %s, %s, %s, %s, %s, %s))"
    )
    params: list[Any] = [
        run.id,
        run.org_id,
        run.thread_id,
        run.status,
        run.started_at,
        run.heartbeat_at,
        owner,
    ]
    if new:
        sql += f", m AS ({_MSG_INSERT_HEAD}{_rows(_MSG_ROW, len(new))})"
        params.extend(p for m in new for p in _message_params(m))
    if head is not None:
        sql += _HEAD
        params.extend([head, run.org_id, run.thread_id])
    sql += f" {_COUNT}"
    params.extend([run.org_id, run.thread_id])
    return sql, params


def _message_params(m: Message) -> tuple[Any, ...]:
    return (
        m.id,
        m.org_id,
        m.thread_id,
        m.role,
        m.content,
        m.created_at,
        m.sender_name,
        m.sender_id,
        _json(m.tool_calls) if m.tool_calls else None,
        m.tool_call_id,
        m.status,
        m.run_id,
        visible_in_history(m),
        _json(m.provider_blocks) if m.provider_blocks else None,
        m.parent_id,
    )


def _usage_params(u: UsageRecord) -> tuple[Any, ...]:
    return (
        u.org_id,
        u.id,
        u.agent_id,
        u.thread_id,
        u.run_id,
        u.message_id,
        u.provider,
        u.model,
        u.usage.input_tokens,
        u.usage.output_tokens,
        u.usage.cached_input_tokens,
        u.key_source,
        _json(u.metadata),
        u.created_at,
        u.cost_usd,
        u.purpose,
    )


async def _claim(conn: Connection, run: Run, claim: IdempotencyClaim) -> None:
    cur = await conn.execute(KEY_CLAIM, key_claim_params(run.org_id, claim, run.id))
    if await cur.fetchone() is None:
        raise IdempotencyKeyInUse()


class PostgresConversations(Repo, ConversationStore):
    def __init__(self, pool: Pool, owner: int) -> None:
        """``owner``: this process's id, recorded on the runs it begins."""
        super().__init__(pool)
        self._owner = owner

    async def begin_turn(
        self,
        run: Run,
        new: list[Message],
        stale_before: datetime,
        seen: int | None = None,
        claim: IdempotencyClaim | None = None,
        *,
        head: UUID | None = None,
    ) -> list[Message] | None:
        # One statement (atomic without a transaction block): insert the run and the
        # messages, and count the thread's messages as they were before it: equal to
        # ``seen`` (the count turn_inputs read), nothing came since. A running run
        # makes the run insert a unique violation; if that run's heartbeat is stale it
        # is marked interrupted and the statement tried once more.
        sql, params = _begin_statement(run, new, self._owner, head)
        for attempt in (1, 2):
            try:
                async with translate(), self._pool.connection() as conn:
                    if claim is None:
                        rows = await conn.hot(sql, params)
                    else:  # the key first, in the same transaction
                        async with conn.transaction():
                            await _claim(conn, run, claim)
                            rows = await conn.hot(sql, params)
                    if rows[0][0] == seen:
                        return None
                    # A message came after the read (another process's turn, or a reply
                    # thought dead finishing late), or no read was named: read the thread
                    # now that this statement has committed, so nothing committed
                    # meanwhile is missed.
                    cur = await conn.execute(HISTORY, (run.org_id, run.thread_id))
                    return [to_message(r) for r in await cur.fetchall()]
            except IdempotencyKeyInUse:
                raise
            except Conflict as exc:
                if attempt == 1 and await self._interrupt_stale_run(run, stale_before):
                    continue
                raise ThreadBusy() from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _interrupt_stale_run(self, run: Run, stale_before: datetime) -> bool:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = %s"
                " WHERE org_id = %s AND thread_id = %s AND status = 'running'"
                " AND heartbeat_at < %s",
                (run.started_at, run.org_id, run.thread_id, stale_before),
            )
            return cur.rowcount > 0

    async def add_message(self, message: Message) -> None:
        async with translate(), self._pool.connection() as conn:
            await conn.execute(f"{_MSG_INSERT_HEAD}{_MSG_ROW}", _message_params(message))

    async def heartbeat(self, runs: list[tuple[str, UUID]], at: datetime) -> None:
        if not runs:
            return
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                "UPDATE runs SET heartbeat_at = %s FROM unnest(%s::text[], %s::uuid[]) AS b(o, i)"
                " WHERE runs.org_id = b.o AND runs.id = b.i AND runs.status = 'running'",
                (at, [o for o, _ in runs], [i for _, i in runs]),
            )

    async def finish_turn(
        self,
        run: Run,
        new: list[Message],
        usage: list[UsageRecord],
        events: EventBatch | None = None,
        trace: TraceRecord | None = None,
        *,
        head: UUID | None = None,
    ) -> None:
        # One statement: the run's final state, its messages, its usage records, its
        # last batch of events, its trace (and a branched thread's new head).
        parts = [
            "WITH r AS (UPDATE runs SET status = %s, finished_at = %s, heartbeat_at = %s,"
            " pending_tool_calls = %s::json WHERE org_id = %s AND id = %s)"
        ]
        params: list[Any] = [
            run.status,
            run.finished_at,
            run.heartbeat_at,
            _json(run.pending_tool_calls),
            run.org_id,
            run.id,
        ]
        if new:
            parts.append(f", m AS ({_MSG_INSERT_HEAD}{_rows(_MSG_ROW, len(new))})")
            params.extend(p for m in new for p in _message_params(m))
        if head is not None:
            parts.append(_HEAD)
            params.extend([head, run.org_id, run.thread_id])
        if usage:
            parts.append(f", u AS ({_USAGE_INSERT_HEAD}{_rows(_USAGE_ROW, len(usage))})")
            params.extend(p for u in usage for p in _usage_params(u))
        if events is not None:
            parts.append(f", e AS ({EVENTS_INSERT})")
            params.extend(event_params(run.org_id, run.id, events))
        if trace is not None:
            sql, more = trace_ctes(trace)
            parts.append(sql)
            params.extend(more)
        parts.append(" SELECT 1")
        async with translate(), self._pool.connection() as conn:
            await conn.hot("".join(parts), params)

    async def running(self, org_id: str, thread_id: UUID, stale_before: datetime) -> Run | None:
        row = await self._one(
            f"SELECT {RUN_COLS} FROM runs WHERE org_id = %s AND thread_id = %s"
            " AND status = 'running' AND heartbeat_at >= %s",
            (org_id, thread_id, stale_before),
        )
        return None if row is None else to_run(row)

    async def latest_run(self, org_id: str, thread_id: UUID) -> Run | None:
        row = await self._one(
            f"SELECT {RUN_COLS} FROM runs WHERE org_id = %s AND thread_id = %s"
            " ORDER BY started_at DESC LIMIT 1",
            (org_id, thread_id),
        )
        return None if row is None else to_run(row)

    async def interrupt_orphaned(self, org_id: str, run_id: UUID, at: datetime) -> bool:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = %s"
                f" WHERE org_id = %s AND id = %s AND status = 'running' AND {ORPHANED}",
                (at, org_id, run_id),
            )
            return cur.rowcount > 0

    async def interrupt_stale(self, stale_before: datetime, at: datetime) -> int:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = %s"
                f" WHERE status = 'running' AND (heartbeat_at < %s OR {ORPHANED})",
                (at, stale_before),
            )
            return cur.rowcount

    async def history(
        self, org_id: str, thread_id: UUID, *, offset: int, limit: int
    ) -> tuple[list[Message], int]:
        # One statement, so one snapshot: the page and the count read apart could
        # disagree when a message was stored between them (a total of 2 beside a
        # page of 1), which a client paging by ``total`` would trip on.
        rows = await self._all(_HISTORY_PAGE, (org_id, thread_id, org_id, thread_id, offset, limit))
        total = int(rows[0][0]) if rows else 0
        return [to_message(r[1:]) for r in rows if r[1] is not None], total

    async def thread_messages(self, org_id: str, thread_id: UUID) -> list[Message]:
        return [to_message(r) for r in await self._all(HISTORY, (org_id, thread_id))]

    async def copy_messages(
        self, org_id: str, from_thread: UUID, ids: list[UUID], to_thread: UUID
    ) -> int:
        # One statement, the text never leaves the server: the messages in the order
        # stored, each a new id in the new thread, one line (no parents, no run).
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO messages (id, org_id, thread_id, role, content, created_at,"
                " sender_name, sender_id, tool_calls, tool_call_id, status, run_id, visible,"
                " provider_blocks, parent_id)"
                " SELECT gen_random_uuid(), org_id, %s, role, content, created_at, sender_name,"
                " sender_id, tool_calls, tool_call_id, status, NULL, visible, provider_blocks,"
                " NULL FROM messages WHERE org_id = %s AND thread_id = %s AND id = ANY(%s)"
                " ORDER BY seq",
                (to_thread, org_id, from_thread, ids),
            )
            return cur.rowcount

    async def run_messages(self, org_id: str, thread_id: UUID, run_id: UUID) -> list[Message]:
        rows = await self._all(
            f"SELECT {MSG_COLS} FROM (SELECT * FROM messages WHERE org_id = %s"
            " AND thread_id = %s ORDER BY seq DESC LIMIT %s) AS m WHERE run_id = %s"
            " ORDER BY seq",
            (org_id, thread_id, RUN_MESSAGES_WINDOW, run_id),
        )
        return [to_message(r) for r in rows]

    async def add_usage(self, records: list[UsageRecord]) -> None:
        if not records:
            return
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                f"{_USAGE_INSERT_HEAD}{_rows(_USAGE_ROW, len(records))}",
                [p for u in records for p in _usage_params(u)],
            )

    async def usage(self, org_id: str, thread_id: UUID) -> list[UsageRecord]:
        rows = await self._all(
            "SELECT id, org_id, agent_id, thread_id, run_id, message_id, provider, model,"
            " input_tokens, output_tokens, cached_input_tokens, key_source, metadata::text,"
            " created_at, cost_usd, purpose FROM usage_records WHERE org_id = %s AND thread_id = %s"
            " ORDER BY created_at, id",
            (org_id, thread_id),
        )
        return [
            UsageRecord(
                id=r[0],
                org_id=r[1],
                agent_id=r[2],
                thread_id=r[3],
                run_id=r[4],
                message_id=r[5],
                provider=r[6],
                model=r[7],
                usage=Usage(input_tokens=r[8], output_tokens=r[9], cached_input_tokens=r[10]),
                key_source=r[11],
                metadata=_meta.decode(r[12]),
                created_at=r[13],
                cost_usd=r[14],
                purpose=r[15],
            )
            for r in rows
        ]
