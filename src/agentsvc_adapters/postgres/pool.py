"""The PostgreSQL adapter's connections, its pool, and its edge.

``Connection`` keeps a cursor for each of the turn's statements (``hot``);
``LifoPool`` hands out the connection returned last; ``translate`` maps psycopg's
and the pool's exceptions to domain errors (they never leave this package); ``Repo``
is the base of every repository: a pool and two ways to run a statement on it.
Every other module of the package imports from here; this one imports none of them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agentsvc_core.errors import Conflict, DomainError, NotFound, StorageError, Unavailable

__all__ = [
    "IDLE_CHECK_S",
    "Connection",
    "LifoPool",
    "Params",
    "Pool",
    "Repo",
    "Row",
    "check_if_idle",
    "configure",
    "pool_use",
    "translate",
]

Row = tuple[Any, ...]
Params = tuple[Any, ...] | list[Any] | dict[str, Any]


class Connection(psycopg.AsyncConnection[Row]):
    """A pooled connection that keeps a cursor for each of the turn's statements.

    ``conn.execute`` makes a new cursor, and with it a new ``Transformer`` that looks
    up the dumper of every parameter and the loader of every column again; a cursor
    that runs the same query object again keeps them (measured: 13-25% less of this
    process's CPU per statement). ``hot`` runs a statement on its own cursor and
    returns the rows; the cursor never leaves this class.

    A kept cursor holds its last parameters and result until it runs again, so
    ``hot`` keeps at most ``HOT_MAX`` (the least recently used goes first) and drops
    the cursor of a run whose parameters weigh more than ``HOT_KEEP_BYTES`` or whose
    result has more than ``HOT_KEEP_ROWS`` rows: what stays is a turn's worth.
    ``close`` drops them all (a cursor refers to its connection: a cycle)."""

    HOT_MAX = 8
    HOT_KEEP_BYTES = 64 * 1024
    HOT_KEEP_ROWS = 16

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the statement's text -> (that text, as the object the cursor last ran; the cursor)
        self._hot: OrderedDict[str, tuple[str, psycopg.AsyncCursor[Row]]] = OrderedDict()
        self.handed_out_at = time.monotonic()  # by the pool (check_if_idle)

    async def hot(self, sql: str, params: Params) -> list[Row]:
        entry = self._hot.get(sql)
        if entry is None:
            entry = self._hot[sql] = (sql, self.cursor())
            if len(self._hot) > self.HOT_MAX:
                self._hot.popitem(last=False)
        else:
            self._hot.move_to_end(sql)
        rows = await (await entry[1].execute(entry[0], params)).fetchall()
        if len(rows) > self.HOT_KEEP_ROWS or _weight(params) > self.HOT_KEEP_BYTES:
            del self._hot[sql]  # and with its cursor, what it holds
        return rows

    async def close(self) -> None:
        self._hot.clear()
        await super().close()


def _weight(params: Params) -> int:
    values = params.values() if isinstance(params, dict) else params
    return sum(len(v) for v in values if isinstance(v, str | bytes))


class LifoPool(AsyncConnectionPool[Connection]):
    """``AsyncConnectionPool`` that hands out the connection returned last.

    psycopg_pool hands out the one idle the longest, so a process that needs one or
    two connections at a time (a turn's statements take a fraction of a millisecond)
    rotates over all of them, and every statement lands on a backend that has gone
    cold: PostgreSQL spent 700-1300 us of CPU per turn with ten connections against
    410-650 us with one (sequential turns; handing out the last one returned:
    420-590 us with ten). The connections idle the longest stay at the end the pool
    shrinks from, so unused ones still close after ``max_idle``. They may sit there
    long enough for a firewall, a NAT or ``idle_session_timeout`` to cut them, which
    the rotation used to hide: ``check_if_idle`` tests one that has been idle longer
    than ``IDLE_CHECK_S`` before handing it out (the pool then takes another)."""

    async def _get_ready_connection(self, timeout: float | None) -> Connection | None:  # noqa: ASYNC109 (the overridden signature)
        conn = await super()._get_ready_connection(timeout)  # the one idle the longest
        if conn is not None and self._pool:
            self._pool.appendleft(conn)
            conn = self._pool.pop()
        return conn


Pool = AsyncConnectionPool[Connection]
IDLE_CHECK_S = 30.0


def pool_use(pool: Pool) -> dict[str, float]:
    """What the pool is doing now, from ``get_stats()`` (counters it keeps anyway),
    under stable names for ``/metrics``: read at scrape time, nothing per request.
    Gauges: ``size``, ``available``, ``waiting``, ``max``; totals since start:
    ``requests``, ``requests_errors``, ``requests_wait_seconds``,
    ``connections_errors``, ``connections_lost``. psycopg_pool leaves a counter
    out until it first counts, hence the zeros."""
    stats = pool.get_stats()
    return {
        "size": stats.get("pool_size", 0),
        "available": stats.get("pool_available", 0),
        "waiting": stats.get("requests_waiting", 0),
        "max": stats.get("pool_max", 0),
        "requests": stats.get("requests_num", 0),
        "requests_errors": stats.get("requests_errors", 0),
        "requests_wait_seconds": stats.get("requests_wait_ms", 0) / 1000,
        "connections_errors": stats.get("connections_errors", 0),
        "connections_lost": stats.get("connections_lost", 0),
    }


async def check_if_idle(conn: Connection) -> None:
    """The pool's ``check``, run as it hands ``conn`` out: one empty statement if
    ``conn`` was last handed out more than ``IDLE_CHECK_S`` ago (a checkout lasts
    milliseconds, so that is how long it sat idle), none otherwise; raises if it is
    broken. (Not the pool's ``reset``: with one, the pool takes every connection back
    through a worker task, later and at a cost.)"""
    now = time.monotonic()
    idle, conn.handed_out_at = now - conn.handed_out_at, now
    if idle > IDLE_CHECK_S:
        await AsyncConnectionPool.check_connection(conn)


def gone_project(exc: psycopg.errors.ForeignKeyViolation) -> NotFound | None:
    """``NotFound`` when the key broken is a member's project (migration 0016 names
    those keys ``<table>_project``): an agent or a runner naming a project that is
    not its organization's, or was deleted meanwhile."""
    if (exc.diag.constraint_name or "").endswith("_project"):
        return NotFound("project not found")
    return None


@asynccontextmanager
async def translate() -> AsyncIterator[None]:
    """Map driver and pool failures to domain errors (the adapter's edge)."""
    try:
        yield
    except DomainError:
        raise
    except PoolTimeout as exc:
        raise Unavailable("storage is busy or unreachable; try again") from exc
    except psycopg.errors.UniqueViolation as exc:
        raise Conflict("the resource already exists") from exc
    except psycopg.errors.ForeignKeyViolation as exc:
        raise (gone_project(exc) or StorageError("storage failed")) from exc
    except psycopg.OperationalError as exc:
        raise Unavailable("storage is unreachable; try again") from exc
    except psycopg.Error as exc:
        raise StorageError("storage failed") from exc


class Repo:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def _one(self, sql: str, params: Params) -> tuple[Any, ...] | None:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchone()

    async def _all(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchall()


async def configure(conn: Connection) -> None:
    # Timestamps come back in UTC whatever the server's default time zone is.
    await conn.execute("SET TIME ZONE 'UTC'")
