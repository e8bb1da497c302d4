"""The turn's reads in one round trip (two when the agent has MCP servers).

A pipeline of two statements: one reads the thread with its agent, its latest
run, the agent's sealed settings and whether the agent has MCP attachments (one
row); the other the thread's history (one row per message; built as JSON by
PostgreSQL it cost four times the server's CPU). Only then, and only if the agent
has MCP attachments, a third reads them with their servers. (A pipeline sending
that one every time measured the same CPU per turn; this way an agent without
MCP servers, the common case, costs one round trip.)
"""

from __future__ import annotations

from uuid import UUID

from agentsvc_adapters.postgres.conversations import (
    _HISTORY,
    _RUN_COLS,
    _THREAD_COLS,
    _message,
    _run,
    _thread,
)
from agentsvc_adapters.postgres.mcps import _ATT_COLS, _COLS, _attachment, _server
from agentsvc_adapters.postgres.storage import _AGENT_COLS, Pool, _agent, _translate
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import TurnInputs, TurnReader
from agentsvc_core.ports.oauth import SealedRecord


def _cols(cols: str, alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in cols.split(","))


def _count(cols: str) -> int:
    return len(cols.split(","))


# the history with each message's seq last (the highest is begin_turn's check)
_HISTORY_SEQ = _HISTORY.replace(" FROM messages", ", seq FROM messages", 1)
_T, _A, _R = _count(_THREAD_COLS), _count(_AGENT_COLS), _count(_RUN_COLS)
_N_ATT = _count(_ATT_COLS)

_MAIN = (
    f"SELECT {_cols(_THREAD_COLS, 't')}, {_cols(_AGENT_COLS, 'a')}, {_cols(_RUN_COLS, 'r')},"
    " ARRAY(SELECT s.kind FROM org_secrets s WHERE s.org_id = t.org_id"
    "  AND s.kind = ANY(%(kinds)s) AND s.key = t.agent_id::text ORDER BY s.kind),"
    " ARRAY(SELECT s.value FROM org_secrets s WHERE s.org_id = t.org_id"
    "  AND s.kind = ANY(%(kinds)s) AND s.key = t.agent_id::text ORDER BY s.kind),"
    " ARRAY(SELECT s.expires_at FROM org_secrets s WHERE s.org_id = t.org_id"
    "  AND s.kind = ANY(%(kinds)s) AND s.key = t.agent_id::text ORDER BY s.kind),"
    " EXISTS(SELECT 1 FROM mcp_attachments m WHERE m.org_id = t.org_id"
    "  AND m.owner_kind = 'agent' AND m.owner_id = t.agent_id)"
    " FROM threads t"
    " LEFT JOIN agents a ON a.org_id = t.org_id AND a.id = t.agent_id"
    " LEFT JOIN LATERAL (SELECT * FROM runs WHERE runs.org_id = t.org_id"
    "  AND runs.thread_id = t.id ORDER BY runs.started_at DESC LIMIT 1) r ON true"
    " WHERE t.org_id = %(org)s AND t.id = %(thread)s"
)
_MCP = (
    f"SELECT {_cols(_ATT_COLS, 'm')}, {_cols(_COLS, 's')} FROM mcp_attachments m"
    " JOIN mcp_servers s ON s.org_id = m.org_id AND s.id = m.mcp_id"
    " WHERE m.org_id = %(org)s AND m.owner_kind = 'agent' AND m.owner_id = %(agent)s"
    " ORDER BY m.created_at, m.mcp_id"
)


class PostgresTurnReader(TurnReader):
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def turn_inputs(self, org_id: str, thread_id: UUID, kinds: list[str]) -> TurnInputs:
        params = {"org": org_id, "thread": thread_id, "kinds": kinds}
        async with _translate(), self._pool.connection() as conn:
            async with conn.pipeline():  # one round trip for both
                main = await conn.execute(_MAIN, params)
                history = await conn.execute(_HISTORY_SEQ, (org_id, thread_id))
            row = await main.fetchone()
            if row is None:
                raise NotFound("thread not found")
            messages = await history.fetchall()
            kinds_found, values, expiries, has_mcp = row[_T + _A + _R :]
            servers = []
            if has_mcp:
                params["agent"] = row[2]  # the thread's agent_id
                servers = await (await conn.execute(_MCP, params)).fetchall()
        agent_row, run_row = row[_T : _T + _A], row[_T + _A : _T + _A + _R]
        return TurnInputs(
            thread=_thread(row[:_T]),
            agent=None if agent_row[0] is None else _agent(agent_row),
            latest_run=None if run_row[0] is None else _run(run_row),
            mcp=[(_attachment(r[:_N_ATT]), _server(r[_N_ATT:])) for r in servers],
            records={
                k: SealedRecord(value=v, expires_at=e)
                for k, v, e in zip(kinds_found, values, expiries, strict=True)
            },
            history=[_message(r) for r in messages],
            history_mark=messages[-1][-1] if messages else 0,
        )
