"""The turn's reads in one statement (two when the agent has MCP servers).

The first returns the thread with its agent, its latest run, the agent's sealed
settings and whether the agent has MCP attachments (one row), then the messages of
the thread this process has not cached yet with the thread's message count, which
proves the cached part whole (see ``_Histories``). Messages come as rows: built as
JSON by PostgreSQL they cost four times its CPU; and one statement costs this
process less than a pipeline of two. Only then, and only if the agent has MCP
attachments, a second reads them with their servers. (Sending that one every time
measured the same CPU per turn; this way an agent without MCP servers, the common
case, costs one round trip.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, NamedTuple
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres._rows import (
    AGENT_COLS,
    ATT_COLS,
    HISTORY,
    MSG_COLS,
    RUN_COLS,
    SERVER_COLS,
    THREAD_COLS,
    count_sql,
    to_agent,
    to_attachment,
    to_message,
    to_run,
    to_server,
    to_thread,
)
from agentsvc_adapters.postgres.pool import Pool, translate
from agentsvc_core.entities import Message
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import SealedRecord, TurnInputs, TurnReader


def _cols(cols: str, alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in cols.split(","))


def _count(cols: str) -> int:
    return len(cols.split(","))


# the history with each message's seq last (the highest is begin_turn's check)
_HISTORY_SEQ = HISTORY.replace(" FROM messages", ", seq FROM messages", 1)
# the thread's message count, then the messages after seq %(after)s (or one row of
# NULLs); both order by seq, which makes the primary key the plan (see HISTORY)
_ADDED = (
    f"SELECT c.n, h.* FROM ({count_sql('%(org)s', '%(thread)s')}) c"
    f" LEFT JOIN LATERAL (SELECT {MSG_COLS}, seq FROM messages"
    " WHERE org_id = %(org)s AND thread_id = %(thread)s AND seq > %(after)s ORDER BY seq) h"
    " ON true ORDER BY h.seq"
)
_T, _A, _R = _count(THREAD_COLS), _count(AGENT_COLS), _count(RUN_COLS)
_N_ATT = _count(ATT_COLS)

_SELECT = (
    f"SELECT {_cols(THREAD_COLS, 't')}, {_cols(AGENT_COLS, 'a')}, {_cols(RUN_COLS, 'r')},"
    " ARRAY(SELECT s.kind FROM org_secrets s WHERE s.org_id = t.org_id"
    "  AND s.kind = ANY(%(kinds)s) AND s.key = t.agent_id::text ORDER BY s.kind),"
    " ARRAY(SELECT s.value FROM org_secrets s WHERE s.org_id = t.org_id"
    "  AND s.kind = ANY(%(kinds)s) AND s.key = t.agent_id::text ORDER BY s.kind),"
    " ARRAY(SELECT s.expires_at FROM org_secrets s WHERE s.org_id = t.org_id"
    "  AND s.kind = ANY(%(kinds)s) AND s.key = t.agent_id::text ORDER BY s.kind),"
    " EXISTS(SELECT 1 FROM mcp_attachments m WHERE m.org_id = t.org_id"
    "  AND m.owner_kind = 'agent' AND m.owner_id = t.agent_id)"
)
_FROM = (
    " FROM threads t"
    " LEFT JOIN agents a ON a.org_id = t.org_id AND a.id = t.agent_id"
    " LEFT JOIN LATERAL (SELECT * FROM runs WHERE runs.org_id = t.org_id"
    "  AND runs.thread_id = t.id ORDER BY runs.started_at DESC LIMIT 1) r ON true"
    " WHERE t.org_id = %(org)s AND t.id = %(thread)s"
)
_N_MAIN = _T + _A + _R + 4  # then: kinds, values, expiries, has_mcp
_N_ADDED = 1 + _count(MSG_COLS) + 1  # count, the message, seq


def _nulls(n: int) -> str:
    return ", ".join(["NULL"] * n)


# Both in one statement (a pipeline of two cost more of this process's CPU than two
# statements in a row): the main row (part 0), then _ADDED's rows (part 1), each
# padded with NULLs to one width. No ORDER BY over the whole: PostgreSQL would sort
# every message row, text and all (1000 messages: 6 ms of its CPU against 2); the
# rows are put in (part, seq) order here, which costs nothing when they come so.
_ONE = (
    f"SELECT 0, {_SELECT.removeprefix('SELECT ')}, {_nulls(_N_ADDED)}{_FROM}"
    f" UNION ALL SELECT 1, {_nulls(_N_MAIN)}, a.* FROM ({_ADDED}) a"
)


def _order(row: tuple[Any, ...]) -> tuple[int, int]:
    return row[0], row[-1] or 0


_MCP = (
    f"SELECT {_cols(ATT_COLS, 'm')}, {_cols(SERVER_COLS, 's')} FROM mcp_attachments m"
    " JOIN mcp_servers s ON s.org_id = m.org_id AND s.id = m.mcp_id"
    " WHERE m.org_id = %(org)s AND m.owner_kind = 'agent' AND m.owner_id = %(agent)s"
    " ORDER BY m.created_at, m.mcp_id"
)


class _Cached(NamedTuple):
    last: int  # the highest seq among the messages
    messages: tuple[Message, ...]
    weight: int  # about the bytes they take in memory


_NOTHING = _Cached(0, (), 0)
_encode = msgspec.json.encode


def _weight(messages: Iterable[Message]) -> int:
    """About the memory ``messages`` take: ~600 bytes each (the struct, its ids and
    timestamp), plus their text, tool calls and provider blocks."""
    total = 0
    for m in messages:
        total += 600 + len(m.content)
        if m.tool_calls:
            total += len(_encode(m.tool_calls))
        if m.provider_blocks:
            total += len(_encode(m.provider_blocks))
    return total


class _Histories:
    """Recently read threads' histories, per process, so a turn reads only the
    messages added since (usually the previous turn's two). Messages are only ever
    appended, never changed or removed one by one, so the thread's message count,
    read in the same statement as the new ones, tells whether anything was missed
    (say, a message that committed after one with a higher seq): the cached count
    plus the new ones must equal it, or the whole history is read again. Bounded:
    ``max_threads`` threads and about ``max_bytes`` of memory in all (a thread
    weighing more than a quarter of that is not kept), least recently used out
    first."""

    def __init__(self, max_threads: int = 1000, max_bytes: int = 128 * 2**20) -> None:
        self._entries: OrderedDict[tuple[str, UUID], _Cached] = OrderedDict()
        self._max_threads = max_threads
        self._max_bytes = max_bytes
        self._total = 0

    def get(self, key: tuple[str, UUID]) -> _Cached:
        entry = self._entries.get(key)
        if entry is None:
            return _NOTHING
        self._entries.move_to_end(key)
        return entry

    def put(self, key: tuple[str, UUID], entry: _Cached) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._total -= old.weight
        if entry.weight > self._max_bytes // 4:
            return  # one thread does not take most of the room
        self._entries[key] = entry
        self._total += entry.weight
        while len(self._entries) > self._max_threads or self._total > self._max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self._total -= dropped.weight


class PostgresTurnReader(TurnReader):
    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._histories = _Histories()

    async def turn_inputs(self, org_id: str, thread_id: UUID, kinds: list[str]) -> TurnInputs:
        key = (org_id, thread_id)
        cached = self._histories.get(key)
        params = {"org": org_id, "thread": thread_id, "kinds": kinds, "after": cached.last}
        async with translate(), self._pool.connection() as conn:
            rows = await conn.hot(_ONE, params)
            rows.sort(key=_order)
            if rows[0][0] != 0:
                raise NotFound("thread not found")
            row = rows[0][1 : 1 + _N_MAIN]
            tail = [r[1 + _N_MAIN :] for r in rows[1:]]
            count, fresh = tail[0][0], [r[1:] for r in tail if r[1] is not None]
            history: tuple[Message, ...]
            if count == len(cached.messages) + len(fresh):
                added = tuple(to_message(r) for r in fresh)
                history = (*cached.messages, *added)
                last = fresh[-1][-1] if fresh else cached.last
                weight = cached.weight + _weight(added)
            else:  # something this process had not seen in seq order: read it all
                every = await (await conn.execute(_HISTORY_SEQ, key)).fetchall()
                history = tuple(to_message(r) for r in every)
                last = every[-1][-1] if every else 0
                weight = _weight(history)
            self._histories.put(key, _Cached(last, history, weight))
            kinds_found, values, expiries, has_mcp = row[_T + _A + _R :]
            servers = []
            if has_mcp:
                params["agent"] = row[2]  # the thread's agent_id
                servers = await (await conn.execute(_MCP, params)).fetchall()
        agent_row, run_row = row[_T : _T + _A], row[_T + _A : _T + _A + _R]
        return TurnInputs(
            thread=to_thread(row[:_T]),
            agent=None if agent_row[0] is None else to_agent(agent_row),
            latest_run=None if run_row[0] is None else to_run(run_row),
            mcp=[(to_attachment(r[:_N_ATT]), to_server(r[_N_ATT:])) for r in servers],
            records={
                k: SealedRecord(value=v, expires_at=e)
                for k, v, e in zip(kinds_found, values, expiries, strict=True)
            },
            history=list(history),
            history_mark=len(history),  # begin_turn compares the count
        )
