"""Threads and their participants on PostgreSQL (the thread listing and its search).

The search (``list_for_agent`` with ``words``) is PostgreSQL's full text search with
the ``simple`` configuration (no stemming, no stop words): a thread is found when its
title, or one of its shown messages (the first ``SEARCH_CHARS`` characters of each),
holds every word, each as the start of one of its words (``'tea':*``). The messages'
side is served by the expression index ``messages_search`` (migration 0030): the
matching threads' ids come from it, then the listing's own filters apply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres._rows import (
    PART_COLS,
    THREAD_COLS,
    to_participant,
    to_thread,
)
from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.entities import Participant, Thread
from agentsvc_core.errors import NotFound, StorageError
from agentsvc_core.ports import ThreadRepository
from agentsvc_core.ports.storage import SEARCH_CHARS

__all__ = ["PostgresThreads"]

_enc = msgspec.json.Encoder()
_TICK = timedelta(microseconds=1)
_MAX_BUMPS = 10_000


def _json(value: object) -> str:
    return _enc.encode(value).decode()


# --- threads ------------------------------------------------------------------


def _shown(alias: str) -> str:
    """The thread's columns and its running reply's id (``active_run_id``): an index
    probe of ``runs_one_running``."""
    return (
        f"{THREAD_COLS}, (SELECT r.id FROM runs r WHERE r.org_id = {alias}.org_id"
        f" AND r.thread_id = {alias}.id AND r.status = 'running')"
    )


# a thread whose title holds the words, or one of whose shown messages does (the
# messages' side by the index messages_search: its expression, exactly)
_WORDS = "to_tsquery('simple'::regconfig, %(q)s)"
_SEARCH = (
    " AND (%(q)s::text IS NULL"
    f" OR to_tsvector('simple'::regconfig, coalesce(t.title, '')) @@ {_WORDS}"
    " OR t.id IN (SELECT m.thread_id FROM messages m WHERE m.org_id = %(org)s AND m.visible"
    f" AND to_tsvector('simple'::regconfig, left(m.content, {SEARCH_CHARS})) @@ {_WORDS}))"
)


class PostgresThreads(Repo, ThreadRepository):
    async def add(self, thread: Thread) -> Thread:
        created = thread.created_at
        async with translate(), self._pool.connection() as conn:
            for _ in range(_MAX_BUMPS):
                cur = await conn.execute(
                    f"INSERT INTO threads ({THREAD_COLS.replace('::text', '')})"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s::json, %s, %s, %s, %s)"
                    " ON CONFLICT (org_id, created_at) DO NOTHING RETURNING created_at",
                    (
                        thread.id,
                        thread.org_id,
                        thread.agent_id,
                        thread.title,
                        thread.kind,
                        thread.status,
                        thread.active_profile,
                        thread.system_prompt_overlay,
                        _json(thread.metadata),
                        _json(thread.resource_bindings),
                        thread.created_by,
                        created,
                        thread.updated_at,
                        thread.head_id,
                    ),
                )
                if await cur.fetchone() is not None:
                    return msgspec.structs.replace(thread, created_at=created)
                created += _TICK  # another thread of this org has this instant
        raise StorageError("could not find a free creation time for the thread")

    async def get(self, org_id: str, thread_id: UUID) -> Thread:
        row = await self._one(
            f"SELECT {_shown('threads')} FROM threads WHERE org_id = %s AND id = %s",
            (org_id, thread_id),
        )
        if row is None:
            raise NotFound("thread not found")
        return to_thread(row)

    async def modify(
        self, org_id: str, thread_id: UUID, change: Callable[[Thread], Thread]
    ) -> Thread:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_shown('threads')} FROM threads WHERE org_id = %s AND id = %s"
                " FOR UPDATE OF threads",
                (org_id, thread_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("thread not found")
            t = change(to_thread(row))
            await conn.execute(
                "UPDATE threads SET title = %s, active_profile = %s, system_prompt_overlay = %s,"
                " metadata = %s::json, resource_bindings = %s::json, status = %s, updated_at = %s,"
                " head_id = %s WHERE org_id = %s AND id = %s",
                (
                    t.title,
                    t.active_profile,
                    t.system_prompt_overlay,
                    _json(t.metadata),
                    _json(t.resource_bindings),
                    t.status,
                    t.updated_at,
                    t.head_id,
                    org_id,
                    thread_id,
                ),
            )
            return t

    async def list_for_agent(
        self,
        org_id: str,
        agent_id: UUID,
        *,
        before: datetime | None,
        limit: int,
        visible_to: str | None = None,
        words: Sequence[str] = (),
    ) -> list[Thread]:
        # the words are letters and digits only (the port's contract), so quoting
        # each one makes a tsquery term; the query itself is a parameter
        query = " & ".join(f"'{w}':*" for w in words) or None
        rows = await self._all(
            f"SELECT {_shown('t')} FROM threads t WHERE t.org_id = %(org)s"
            " AND t.agent_id = %(agent)s"
            " AND (%(before)s::timestamptz IS NULL OR t.created_at < %(before)s)"
            " AND (%(user)s::text IS NULL OR t.created_by = %(user)s OR EXISTS ("
            "   SELECT 1 FROM thread_participants p WHERE p.org_id = t.org_id"
            "   AND p.thread_id = t.id AND p.user_id = %(user)s))"
            f"{_SEARCH}"
            " ORDER BY t.created_at DESC LIMIT %(limit)s",
            {
                "org": org_id,
                "agent": agent_id,
                "before": before,
                "user": visible_to,
                "limit": limit,
                "q": query,
            },
        )
        return [to_thread(r) for r in rows]

    async def put_participant(self, participant: Participant) -> Participant:
        p = participant
        row = await self._one(
            f"INSERT INTO thread_participants ({PART_COLS}) VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (org_id, thread_id, user_id) DO UPDATE"
            " SET display_name = EXCLUDED.display_name, role = EXCLUDED.role"
            f" RETURNING {PART_COLS}",
            (p.org_id, p.thread_id, p.user_id, p.display_name, p.role, p.added_at),
        )
        assert row is not None
        return to_participant(row)

    async def participants(self, org_id: str, thread_id: UUID) -> list[Participant]:
        rows = await self._all(
            f"SELECT {PART_COLS} FROM thread_participants WHERE org_id = %s AND thread_id = %s"
            " ORDER BY added_at, user_id",
            (org_id, thread_id),
        )
        return [to_participant(r) for r in rows]

    async def participant(self, org_id: str, thread_id: UUID, user_id: str) -> Participant | None:
        row = await self._one(
            f"SELECT {PART_COLS} FROM thread_participants"
            " WHERE org_id = %s AND thread_id = %s AND user_id = %s",
            (org_id, thread_id, user_id),
        )
        return None if row is None else to_participant(row)

    async def remove_participant(self, org_id: str, thread_id: UUID, user_id: str) -> bool:
        row = await self._one(
            "DELETE FROM thread_participants WHERE org_id = %s AND thread_id = %s AND user_id = %s"
            " RETURNING user_id",
            (org_id, thread_id, user_id),
        )
        return row is not None
