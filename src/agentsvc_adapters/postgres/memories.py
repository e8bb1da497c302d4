"""Memories on PostgreSQL (``memories``; migration 0012).

``save`` (and ``edit``) is one transaction that first takes a transaction-scoped advisory lock
named by the organization and agent: two saves of one agent run one after the
other, and the second's statements (READ COMMITTED) see what the first committed,
so the identical-fact check, the supersede by key and the cap hold. The search is
PostgreSQL's full text search with the ``simple`` configuration (no stemming):
``websearch_to_tsquery`` of the terms joined by ``or`` (any term matches; the
terms are words, so a query has no operators of its own), ranked by ``ts_rank``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.entities.memory import Memory, MemoryScope, MemoryStatus, fingerprint
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.memories import MemoryStore, Saved, ScopeFilter

_COLUMNS = (
    "org_id, id, agent_id, scope, scope_id, content, key, status, superseded_by,"
    " created_at, updated_at"
)
_PLACE = (
    "org_id = %(org)s AND agent_id = %(agent)s AND scope = %(scope)s"
    " AND scope_id IS NOT DISTINCT FROM %(sid)s AND status = 'active'"
)
_SAME_FACT = f"SELECT {_COLUMNS} FROM memories WHERE {_PLACE} AND fingerprint = %(mark)s"
_COUNT_AND_KEY = (
    "SELECT count(*), (SELECT id FROM memories WHERE "
    + _PLACE
    + " AND key = %(key)s) FROM memories"
    " WHERE org_id = %(org)s AND agent_id = %(agent)s AND status = 'active'"
)


def _memory(row: Row) -> Memory:
    org, mid, agent, scope, sid, content, key, status, by, created, updated = row[:11]
    scope_: MemoryScope = scope
    status_: MemoryStatus = status
    return Memory(
        id=mid,
        org_id=org,
        agent_id=agent,
        scope=scope_,
        scope_id=sid,
        content=content,
        key=key,
        status=status_,
        superseded_by=by,
        created_at=created,
        updated_at=updated,
    )


def _within(scopes: Sequence[ScopeFilter], params: dict[str, Any]) -> str:
    """The condition that a row is in one of ``scopes`` (non-empty); adds its parameters."""
    parts = []
    for i, (scope, sid) in enumerate(scopes):
        params[f"s{i}"], params[f"i{i}"] = scope, sid
        parts.append(f"(scope = %(s{i})s AND (%(i{i})s::text IS NULL OR scope_id = %(i{i})s))")
    return f"({' OR '.join(parts)})"


class PostgresMemories(Repo, MemoryStore):
    async def save(self, memory: Memory, max_active: int) -> Saved:
        place = {
            "org": memory.org_id,
            "agent": memory.agent_id,
            "scope": memory.scope,
            "sid": memory.scope_id,
            "mark": fingerprint(memory.content),
            "key": memory.key,
        }
        async with translate(), self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"memories:{memory.org_id}:{memory.agent_id}",),
            )
            cur = await conn.execute(_SAME_FACT, place)
            same = await cur.fetchone()
            if same is not None:
                return Saved(outcome="existing", memory=_memory(same))
            cur = await conn.execute(_COUNT_AND_KEY, place)
            counted = await cur.fetchone()
            assert counted is not None
            active, old = counted
            if active - (old is not None) >= max_active:
                return Saved(outcome="full")
            if old is not None:
                await conn.execute(
                    "UPDATE memories SET status = 'superseded', superseded_by = %s,"
                    " updated_at = %s WHERE org_id = %s AND id = %s",
                    (memory.id, memory.created_at, memory.org_id, old),
                )
            try:
                await conn.execute(
                    f"INSERT INTO memories ({_COLUMNS}, fingerprint)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        memory.org_id,
                        memory.id,
                        memory.agent_id,
                        memory.scope,
                        memory.scope_id,
                        memory.content,
                        memory.key,
                        memory.status,
                        memory.superseded_by,
                        memory.created_at,
                        memory.updated_at,
                        place["mark"],
                    ),
                )
            except psycopg.errors.ForeignKeyViolation:
                raise NotFound("agent not found") from None
        return Saved(outcome="saved", memory=memory, superseded=old)

    async def edit(
        self, org_id: str, agent_id: UUID, memory_id: UUID, content: str, now: datetime
    ) -> Saved:
        mark = fingerprint(content)
        async with translate(), self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"memories:{org_id}:{agent_id}",),
            )
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE org_id = %s AND id = %s"
                " AND agent_id = %s FOR UPDATE",
                (org_id, memory_id, agent_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("memory not found")
            memory = _memory(row)
            if memory.status == "active":
                place = {
                    "org": org_id,
                    "agent": agent_id,
                    "scope": memory.scope,
                    "sid": memory.scope_id,
                    "mark": mark,
                    "id": memory_id,
                }
                cur = await conn.execute(f"{_SAME_FACT} AND id <> %(id)s", place)
                same = await cur.fetchone()
                if same is not None:
                    return Saved(outcome="existing", memory=_memory(same))
            # ``search`` is a generated column: the new words are searched at once
            cur = await conn.execute(
                "UPDATE memories SET content = %s, fingerprint = %s, updated_at = %s"
                f" WHERE org_id = %s AND id = %s RETURNING {_COLUMNS}",
                (content, mark, now, org_id, memory_id),
            )
            changed = await cur.fetchone()
            assert changed is not None  # locked above: a delete waits for this
        return Saved(outcome="saved", memory=_memory(changed))

    async def get(self, org_id: str, agent_id: UUID, memory_id: UUID) -> Memory:
        row = await self._one(
            f"SELECT {_COLUMNS} FROM memories WHERE org_id = %s AND id = %s AND agent_id = %s",
            (org_id, memory_id, agent_id),
        )
        if row is None:
            raise NotFound("memory not found")
        return _memory(row)

    async def page(
        self,
        org_id: str,
        agent_id: UUID,
        *,
        scopes: Sequence[ScopeFilter] | None,
        status: MemoryStatus | None,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[Memory]:
        if scopes is not None and not scopes:
            return []
        where = ["org_id = %(org)s", "agent_id = %(agent)s"]
        params: dict[str, Any] = {"org": org_id, "agent": agent_id, "limit": limit}
        if scopes is not None:
            where.append(_within(scopes, params))
        if status is not None:
            where.append("status = %(status)s")
            params["status"] = status
        if before is not None:
            where.append("(created_at, id) < (%(at)s, %(id)s)")
            params["at"], params["id"] = before
        rows = await self._all(
            f"SELECT {_COLUMNS} FROM memories WHERE {' AND '.join(where)}"
            " ORDER BY created_at DESC, id DESC LIMIT %(limit)s",
            params,
        )
        return [_memory(r) for r in rows]

    async def search(
        self,
        org_id: str,
        agent_id: UUID,
        terms: Sequence[str],
        scopes: Sequence[ScopeFilter] | None,
        limit: int,
    ) -> list[tuple[Memory, float]]:
        if not terms or (scopes is not None and not scopes):
            return []
        params: dict[str, Any] = {
            "org": org_id,
            "agent": agent_id,
            "q": " or ".join(terms),
            "limit": limit,
        }
        where = "" if scopes is None else f" AND {_within(scopes, params)}"
        rows = await self._all(
            f"SELECT {_COLUMNS}, ts_rank(search, q) AS score"
            " FROM memories, websearch_to_tsquery('simple', %(q)s) AS q"
            " WHERE org_id = %(org)s AND agent_id = %(agent)s AND status = 'active'"
            f" AND search @@ q{where}"
            " ORDER BY score DESC, created_at DESC, id DESC LIMIT %(limit)s",
            params,
        )
        return [(_memory(r), float(r[11])) for r in rows]

    async def delete(self, org_id: str, agent_id: UUID, memory_id: UUID) -> None:
        row = await self._one(
            "DELETE FROM memories WHERE org_id = %s AND id = %s AND agent_id = %s RETURNING id",
            (org_id, memory_id, agent_id),
        )
        if row is None:
            raise NotFound("memory not found")
