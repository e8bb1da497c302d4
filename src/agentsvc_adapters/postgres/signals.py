"""Signals across processes with PostgreSQL LISTEN/NOTIFY: stops, revocations,
follow requests and thread news.

Each process keeps one dedicated connection that LISTENs on ``agentsvc_stop``,
``agentsvc_revoked``, ``agentsvc_follow`` and ``agentsvc_thread``; ``publish``
NOTIFYs the run id (``publish_revoked`` the API key id, ``publish_follow`` the run
id, ``publish_news`` the thread id) through the pool. A process that runs the named
reply sets its local event (or, for a follow request, starts writing the reply's
events in batches); every process drops a revoked key from its lookup cache, and
wakes its followers of a thread that has news. The
listener reconnects with backoff if the connection drops: stops sent meanwhile
are lost (the client can stop again), and since revocations may have been
missed too, each (re)connection tells the caches to drop everything.

That connection also holds the advisory lock that tells other processes this one
is alive (``owners``): it lives exactly as long as the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from uuid import UUID

import psycopg

from agentsvc_adapters.postgres.owners import LOCK
from agentsvc_adapters.postgres.pool import Pool, translate
from agentsvc_adapters.signals import (
    LocalFollows,
    LocalRevocations,
    LocalStopBus,
    LocalThreadNews,
)

log = logging.getLogger("agentsvc.stop")
CHANNEL = "agentsvc_stop"
REVOKED = "agentsvc_revoked"
FOLLOW = "agentsvc_follow"
NEWS = "agentsvc_thread"


class PostgresStopBus(LocalStopBus, LocalRevocations, LocalFollows, LocalThreadNews):
    def __init__(self, conninfo: str, pool: Pool, owner: int) -> None:
        """``owner``: this process's id (``PostgresStorage.owner``), whose lock the
        listening connection holds."""
        LocalStopBus.__init__(self)
        LocalRevocations.__init__(self)
        LocalFollows.__init__(self)
        LocalThreadNews.__init__(self)
        self._conninfo = conninfo
        self._pool = pool
        self._owner = owner
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._conn: psycopg.AsyncConnection[Any] | None = None  # the listening one
        self._closing = False

    async def start(self) -> None:
        self._closing = False
        self._task = asyncio.create_task(self._listen(), name="agentsvc-stop-listener")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), 10)

    async def close(self) -> None:
        """End the listener by closing its connection, which ends ``notifies()``
        at once. (Cancelling the task instead makes psycopg cancel the wait on the
        server, which the cancellation interrupts: a WARNING at every shutdown.)"""
        if self._task is None:
            return
        self._closing = True
        if self._conn is not None:
            await self._conn.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), 2)
        except TimeoutError:  # still connecting, or stuck: cancel it
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def publish(self, run_id: UUID) -> None:
        # Deliver locally at once (the common case: this process runs it), and tell
        # the others.
        self.deliver(run_id)
        async with translate(), self._pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(run_id)))

    async def publish_revoked(self, key_id: UUID) -> None:
        self.deliver_revoked(key_id)
        async with translate(), self._pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (REVOKED, str(key_id)))

    async def publish_follow(self, run_id: UUID) -> None:
        self.deliver_follow(run_id)
        async with translate(), self._pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (FOLLOW, str(run_id)))

    async def publish_news(self, thread_id: UUID) -> None:
        self.deliver_news(thread_id)
        async with translate(), self._pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (NEWS, str(thread_id)))

    async def _listen(self) -> None:
        delay = 0.5
        while not self._closing:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    self._conn = conn
                    held = await (await conn.execute(LOCK, (self._owner,))).fetchone()
                    if not held or not held[0]:  # another process drew the same 63 bits
                        log.warning("this process's liveness lock is held by another")
                    await conn.execute(
                        f"LISTEN {CHANNEL}; LISTEN {REVOKED}; LISTEN {FOLLOW}; LISTEN {NEWS}"
                    )
                    self.deliver_revoked(None)  # notices may have been missed until now
                    self._ready.set()
                    delay = 0.5
                    async for note in conn.notifies():
                        with contextlib.suppress(ValueError):
                            if note.channel == REVOKED:
                                self.deliver_revoked(UUID(note.payload))
                            elif note.channel == FOLLOW:
                                self.deliver_follow(UUID(note.payload))
                            elif note.channel == NEWS:
                                self.deliver_news(UUID(note.payload))
                            else:
                                self.deliver(UUID(note.payload))
            except asyncio.CancelledError:
                raise
            except psycopg.Error as exc:
                if self._closing:
                    return  # close() closed the connection
                log.warning("stop listener lost its connection (%s); retrying", type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
