"""PostgreSQL only: the pooled connection's statement cursors (``Connection.hot``)
give each run of a statement its own results, reuse psycopg's adaptation and keep
little; the pool hands out the connection returned last (``LifoPool``) and tests
one that sat idle before handing it out."""

from __future__ import annotations

import time

import pytest
from anyio.from_thread import BlockingPortal
from psycopg_pool import AsyncConnectionPool

from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.postgres.pool import IDLE_CHECK_S, Connection

pytestmark = pytest.mark.postgres

_SQL = "SELECT %(a)s::int + 1, %(b)s::text, ARRAY[%(a)s::int]"


async def _runs(url: str) -> None:
    conn = await Connection.connect(url, autocommit=True)
    try:
        # the same statement, as equal strings that are not the same object
        adapters = set()
        for i in range(5):
            text = "".join([_SQL[:10], _SQL[10:]])
            assert await conn.hot(text, {"a": i, "b": f"v{i}"}) == [(i + 1, f"v{i}", [i])]
            ((_, cursor),) = conn._hot.values()
            adapters.add(id(cursor._tx))
        assert len(adapters) == 1  # one cursor, one Transformer, served them all
        # a failed run leaves the cursor usable for the next
        with pytest.raises(Exception, match="invalid input syntax"):
            await conn.hot(_SQL, {"a": "x", "b": "y"})
        assert await conn.hot(_SQL, {"a": 41, "b": "ok"}) == [(42, "ok", [41])]
        # bounded, least recently used out first
        for i in range(Connection.HOT_MAX * 2):
            assert await conn.hot(f"SELECT {i}", {}) == [(i,)]
            assert await conn.hot(_SQL, {"a": i, "b": "x"}) == [(i + 1, "x", [i])]
            assert len(conn._hot) <= Connection.HOT_MAX
        assert _SQL in conn._hot  # used all along, so kept
        assert "SELECT 0" not in conn._hot
        # a run with heavy parameters or many rows does not keep its cursor
        big = "y" * (Connection.HOT_KEEP_BYTES + 1)
        assert await conn.hot("SELECT length(%(b)s)", {"b": big}) == [(len(big),)]
        assert "SELECT length(%(b)s)" not in conn._hot
        many = "SELECT generate_series(1, %(n)s)"
        assert len(await conn.hot(many, {"n": Connection.HOT_KEEP_ROWS + 1})) > 16
        assert many not in conn._hot
        assert len(await conn.hot(many, {"n": 2})) == 2
        assert many in conn._hot
    finally:
        await conn.close()
    assert not conn._hot  # closing drops the cursors (they refer to the connection)


def test_hot_cursors_reuse_adaptation_and_keep_little(pg_url: str, portal: BlockingPortal) -> None:
    portal.call(_runs, pg_url)


async def _pid(conn: Connection) -> int:
    """The PostgreSQL backend serving ``conn``."""
    row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
    assert row is not None
    return int(row[0])


async def _backends(url: str) -> tuple[list[int], set[int], int]:
    storage = PostgresStorage(url, min_size=4, max_size=4)
    await storage.open()
    try:
        await storage.pool.wait()
        pids = []
        for _ in range(8):  # one at a time: always the connection returned last
            async with storage.pool.connection() as conn:
                pids.append(await _pid(conn))
        both: set[int] = set()
        for _ in range(4):  # two at a time: the same two
            async with storage.pool.connection() as a, storage.pool.connection() as b:
                both.update([await _pid(a), await _pid(b)])
        return pids, both, storage.pool.get_stats()["pool_size"]
    finally:
        await storage.close()


def test_the_pool_hands_out_the_connection_returned_last(
    pg_url: str, portal: BlockingPortal
) -> None:
    pids, both, size = portal.call(_backends, pg_url)
    assert size == 4  # four open ...
    assert len(set(pids)) == 1  # ... and one serves a caller that needs one at a time
    assert len(both) == 2


async def _idle(url: str, checks: list[object]) -> tuple[int, int, bool]:
    storage = PostgresStorage(url, min_size=1, max_size=2)
    await storage.open()
    try:
        async with storage.pool.connection() as conn:
            first = await _pid(conn)
        async with storage.pool.connection() as conn:  # just returned: not tested
            await conn.execute("SELECT 1")
        untested = len(checks)
        # the connection sits idle, and the server ends it meanwhile
        async with await Connection.connect(url, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (first,))
        conn.handed_out_at = time.monotonic() - IDLE_CHECK_S - 1
        async with storage.pool.connection() as conn:  # tested, found dead, replaced
            replacement = await _pid(conn)
        return untested, len(checks), replacement != first
    finally:
        await storage.close()


def test_a_connection_idle_for_long_is_tested_and_replaced_when_dead(
    pg_url: str, portal: BlockingPortal, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: list[object] = []
    real = AsyncConnectionPool.check_connection

    async def counted(conn: Connection) -> None:
        checks.append(conn)
        await real(conn)

    monkeypatch.setattr(AsyncConnectionPool, "check_connection", counted)
    untested, tested, replaced = portal.call(_idle, pg_url, checks)
    assert untested == 0
    assert tested >= 1
    assert replaced
