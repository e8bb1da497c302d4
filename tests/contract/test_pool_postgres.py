"""PostgreSQL only: the pooled connection's statement cursors (``Connection.hot``)
give each run of a statement its own results, and stay bounded; the pool hands out
the connection returned last (``LifoPool``)."""

from __future__ import annotations

import pytest
from anyio.from_thread import BlockingPortal

from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.postgres.storage import Connection

pytestmark = pytest.mark.postgres

_SQL = "SELECT %(a)s::int + 1, %(b)s::text, ARRAY[%(a)s::int]"


async def _runs(url: str) -> None:
    conn = await Connection.connect(url, autocommit=True)
    try:
        # the same statement, as equal strings that are not the same object
        for i in range(5):
            text = "".join([_SQL[:10], _SQL[10:]])
            rows = await (await conn.hot(text, {"a": i, "b": f"v{i}"})).fetchall()
            assert rows == [(i + 1, f"v{i}", [i])]
        assert len(conn._hot) == 1  # one cursor served them all
        # a failed run leaves the cursor usable for the next
        with pytest.raises(Exception, match="invalid input syntax"):
            await conn.hot(_SQL, {"a": "x", "b": "y"})
        rows = await (await conn.hot(_SQL, {"a": 41, "b": "ok"})).fetchall()
        assert rows == [(42, "ok", [41])]
        # bounded: many distinct statements never keep more than the limit
        for i in range(Connection._HOT_MAX * 2 + 3):
            rows = await (await conn.hot(f"SELECT {i}", {})).fetchall()
            assert rows == [(i,)]
            assert len(conn._hot) <= Connection._HOT_MAX
    finally:
        await conn.close()


def test_hot_cursors_give_each_run_its_results_and_stay_bounded(
    pg_url: str, portal: BlockingPortal
) -> None:
    portal.call(_runs, pg_url)


async def _backends(url: str) -> tuple[list[int], set[int], int]:
    storage = PostgresStorage(url, min_size=4, max_size=4)
    await storage.open()
    try:
        await storage.pool.wait()
        pids = []
        for _ in range(8):  # one at a time: always the connection returned last
            async with storage.pool.connection() as conn:
                row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
                assert row is not None
                pids.append(row[0])
        both: set[int] = set()
        for _ in range(4):  # two at a time: the same two
            async with storage.pool.connection() as a, storage.pool.connection() as b:
                for conn in (a, b):
                    row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
                    assert row is not None
                    both.add(row[0])
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
