"""Code agents, code sessions and their timelines on PostgreSQL (``code_agents``,
``code_sessions``, ``code_session_events``; migration 0025).

``change`` reads the session ``FOR UPDATE`` and writes it and its new events in
one transaction: the row lock serialises the job's writes and a user's (a
cancel, a follow-up), and the events' numbers follow the stored
``last_event_seq`` with no gap and no repeat."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.entities.code_session import (
    CodeAgent,
    CodeSession,
    Computer,
    SessionEvent,
    SessionUsage,
    SessionWork,
)
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.code_sessions import Change, CodeSessionStore, NewEvent

_enc = msgspec.json.Encoder()
_AFIELDS = tuple(f.name for f in msgspec.structs.fields(CodeAgent))
_ACOLS = ", ".join(_AFIELDS)
_SFIELDS = tuple(f.name for f in msgspec.structs.fields(CodeSession))
_SCOLS = ", ".join(_SFIELDS)
_JSON = {"computer", "usage", "work"}
_TYPES: dict[str, type[Any]] = {
    "computer": Computer,
    "usage": SessionUsage,
    "work": SessionWork,
}


def _marks(fields: Sequence[str]) -> str:
    return ", ".join("%s::jsonb" if f in _JSON else "%s" for f in fields)


def _values(item: msgspec.Struct, fields: Sequence[str]) -> tuple[object, ...]:
    return tuple(
        _enc.encode(getattr(item, f)).decode() if f in _JSON else getattr(item, f) for f in fields
    )


def _read(row: Row, fields: Sequence[str]) -> dict[str, Any]:
    return {
        f: msgspec.convert(v, _TYPES[f]) if f in _JSON else v
        for f, v in zip(fields, row, strict=True)
    }


def _agent(row: Row) -> CodeAgent:
    return CodeAgent(**_read(row, _AFIELDS))


def _session(row: Row) -> CodeSession:
    return CodeSession(**_read(row, _SFIELDS))


def _event(row: Row) -> SessionEvent:
    return SessionEvent(session_id=row[0], seq=row[1], type=row[2], data=row[3], created_at=row[4])


_AGENT_SET = ", ".join(f"{f} = %s::jsonb" if f in _JSON else f"{f} = %s" for f in _AFIELDS[2:])
_SESSION_SET = ", ".join(f"{f} = %s::jsonb" if f in _JSON else f"{f} = %s" for f in _SFIELDS[2:])


def _numbered(
    session: CodeSession, events: Sequence[NewEvent], at: datetime
) -> tuple[CodeSession, list[SessionEvent]]:
    """``session``'s new events numbered after its ``last_event_seq``, and the
    session with the last of them."""
    seq = session.last_event_seq
    made: list[SessionEvent] = []
    for e in events:
        seq += 1
        made.append(
            SessionEvent(session_id=session.id, seq=seq, type=e.type, data=e.data, created_at=at)
        )
    return msgspec.structs.replace(session, last_event_seq=seq), made


async def _insert(conn: AsyncConnection[Any], org_id: str, made: list[SessionEvent]) -> None:
    if not made:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO code_session_events (org_id, session_id, seq, type, data,"
            " created_at) VALUES (%s, %s, %s, %s, %s::jsonb, %s)",
            [
                (org_id, m.session_id, m.seq, m.type, _enc.encode(m.data).decode(), m.created_at)
                for m in made
            ],
        )


class PostgresCodeSessions(Repo, CodeSessionStore):
    # --- code agents ------------------------------------------------------------

    async def add_agent(self, agent: CodeAgent) -> CodeAgent:
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                f"INSERT INTO code_agents ({_ACOLS}) VALUES ({_marks(_AFIELDS)})",
                _values(agent, _AFIELDS),
            )
        return agent

    async def get_agent(self, org_id: str, agent_id: UUID) -> CodeAgent:
        row = await self._one(
            f"SELECT {_ACOLS} FROM code_agents WHERE org_id = %s AND id = %s", (org_id, agent_id)
        )
        if row is None:
            raise NotFound("code agent not found")
        return _agent(row)

    async def agents(self, org_id: str) -> list[CodeAgent]:
        rows = await self._all(
            f"SELECT {_ACOLS} FROM code_agents WHERE org_id = %s ORDER BY created_at, id",
            (org_id,),
        )
        return [_agent(r) for r in rows]

    async def modify_agent(
        self, org_id: str, agent_id: UUID, change: Callable[[CodeAgent], CodeAgent]
    ) -> CodeAgent:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_ACOLS} FROM code_agents WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, agent_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("code agent not found")
            changed = change(_agent(row))
            await conn.execute(
                f"UPDATE code_agents SET {_AGENT_SET} WHERE org_id = %s AND id = %s",
                (*_values(changed, _AFIELDS[2:]), org_id, agent_id),
            )
        return changed

    async def delete_agent(self, org_id: str, agent_id: UUID) -> bool:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM code_agents WHERE org_id = %s AND id = %s", (org_id, agent_id)
            )
            return cur.rowcount > 0

    # --- sessions ---------------------------------------------------------------

    async def add_session(
        self, session: CodeSession, events: Sequence[NewEvent]
    ) -> tuple[CodeSession, list[SessionEvent]]:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            stored, made = _numbered(session, events, session.created_at)
            await conn.execute(
                f"INSERT INTO code_sessions ({_SCOLS}) VALUES ({_marks(_SFIELDS)})",
                _values(stored, _SFIELDS),
            )
            await _insert(conn, session.org_id, made)
        return stored, made

    async def get_session(self, org_id: str, session_id: UUID) -> CodeSession:
        row = await self._one(
            f"SELECT {_SCOLS} FROM code_sessions WHERE org_id = %s AND id = %s",
            (org_id, session_id),
        )
        if row is None:
            raise NotFound("code session not found")
        return _session(row)

    async def sessions(
        self,
        org_id: str,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
        code_agent_id: UUID | None = None,
    ) -> list[CodeSession]:
        where = ["org_id = %s"]
        params: list[object] = [org_id]
        if code_agent_id is not None:
            where.append("code_agent_id = %s")
            params.append(code_agent_id)
        if before is not None:
            where.append("(created_at, id) < (%s, %s)")
            params += [before[0], before[1]]
        rows = await self._all(
            f"SELECT {_SCOLS} FROM code_sessions WHERE {' AND '.join(where)}"
            " ORDER BY created_at DESC, id DESC LIMIT %s",
            (*params, limit),
        )
        return [_session(r) for r in rows]

    async def change(
        self, org_id: str, session_id: UUID, change: Change
    ) -> tuple[CodeSession, list[SessionEvent]]:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_SCOLS} FROM code_sessions WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, session_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("code session not found")
            current = _session(row)
            went = change(current)
            if went is None:
                return current, []
            changed, made = _numbered(went[0], went[1], went[0].updated_at)
            await _insert(conn, org_id, made)
            await conn.execute(
                f"UPDATE code_sessions SET {_SESSION_SET} WHERE org_id = %s AND id = %s",
                (*_values(changed, _SFIELDS[2:]), org_id, session_id),
            )
        return changed, made

    async def events(
        self, org_id: str, session_id: UUID, *, after: int, limit: int
    ) -> list[SessionEvent]:
        rows = await self._all(
            "SELECT session_id, seq, type, data, created_at FROM code_session_events"
            " WHERE org_id = %s AND session_id = %s AND seq > %s ORDER BY seq LIMIT %s",
            (org_id, session_id, after, limit),
        )
        return [_event(r) for r in rows]
