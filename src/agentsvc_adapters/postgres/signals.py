"""Stop signals across processes with PostgreSQL LISTEN/NOTIFY.

Each process keeps one dedicated connection that LISTENs on ``agentsvc_stop``;
``publish`` NOTIFYs the run id through the pool. A process that runs the named
reply sets its local event. The listener reconnects with backoff if the
connection drops (stops sent meanwhile are lost; the client can stop again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from uuid import UUID

import psycopg

from agentsvc_adapters.postgres.storage import Pool, _translate
from agentsvc_core.ports import LocalStopBus

log = logging.getLogger("agentsvc.stop")
CHANNEL = "agentsvc_stop"


class PostgresStopBus(LocalStopBus):
    def __init__(self, conninfo: str, pool: Pool) -> None:
        super().__init__()
        self._conninfo = conninfo
        self._pool = pool
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="agentsvc-stop-listener")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), 10)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def publish(self, run_id: UUID) -> None:
        # Deliver locally at once (the common case: this process runs it), and tell
        # the others.
        self.deliver(run_id)
        async with _translate(), self._pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(run_id)))

    async def _listen(self) -> None:
        delay = 0.5
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    delay = 0.5
                    async for note in conn.notifies():
                        with contextlib.suppress(ValueError):
                            self.deliver(UUID(note.payload))
            except asyncio.CancelledError:
                raise
            except psycopg.Error as exc:
                log.warning("stop listener lost its connection (%s); retrying", type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
