"""The replies' stored events on PostgreSQL (``run_events``, migration 0007).

``stream`` reads the run and its batches in one statement, so a reader sees either
the batches and status before the reply's final write or all of them after it.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from agentsvc_adapters.postgres._rows import EVENTS_INSERT, RUN_COLS, event_params, to_run
from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.ports import EventBatch, StoredStream, StreamStore

_RUN = ", ".join(f"runs.{c.strip()}" for c in RUN_COLS.split(","))
_STREAM = (
    f"SELECT {_RUN}, e.first, e.data FROM runs"
    " LEFT JOIN run_events e ON e.org_id = runs.org_id AND e.run_id = runs.id"
    " AND e.seq_end > %s"
    " WHERE runs.org_id = %s AND runs.id = %s ORDER BY e.first, e.seq_end"
)
_N_RUN = RUN_COLS.count(",") + 1


class PostgresStreams(Repo, StreamStore):
    async def append_events(self, org_id: str, run_id: UUID, batch: EventBatch) -> None:
        async with translate(), self._pool.connection() as conn:
            await conn.execute(EVENTS_INSERT, event_params(org_id, run_id, batch))

    async def stream(self, org_id: str, run_id: UUID, after: int) -> StoredStream | None:
        rows = await self._all(_STREAM, (after, org_id, run_id))
        if not rows:
            return None
        run = to_run(rows[0][:_N_RUN])
        batches = [(int(r[_N_RUN]), bytes(r[_N_RUN + 1])) for r in rows if r[_N_RUN] is not None]
        return StoredStream(run=run, batches=batches)

    async def purge_events(self, now: datetime) -> int:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute("DELETE FROM run_events WHERE keep_until < %s", (now,))
            return cur.rowcount
