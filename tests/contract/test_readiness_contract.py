"""``Storage.check_ready``: the readiness probe's question to storage (docs/operations.md,
"Probes: `/healthz` and `/readyz`")."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from agentsvc_adapters.postgres import PostgresStorage, migrate
from agentsvc_core.errors import Unavailable
from tests.contract.conftest import Backend
from tests.pg import fresh_database


def test_a_working_migrated_storage_is_ready(backend: Backend) -> None:
    backend.run(backend.storage.check_ready)  # returns, raises nothing


async def _reason(url: str, *, open_pool: bool = True) -> str:
    storage = PostgresStorage(url, min_size=1, max_size=1)
    if open_pool:
        await storage.open()
    try:
        with pytest.raises(Unavailable) as caught:
            await storage.check_ready()
        return caught.value.detail
    finally:
        await storage.close()


@pytest.fixture
def empty_database(pg_admin_url: str) -> Iterator[str]:
    with fresh_database(pg_admin_url) as url:
        yield url


@pytest.mark.postgres
def test_a_database_nobody_migrated_is_not_ready(empty_database: str) -> None:
    assert "no schema" in asyncio.run(_reason(empty_database))


@pytest.mark.postgres
def test_a_database_with_pending_migrations_is_not_ready(empty_database: str) -> None:
    asyncio.run(migrate(empty_database))
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM schema_migrations"
            " WHERE version = (SELECT max(version) FROM schema_migrations)"
        )
    assert "pending" in asyncio.run(_reason(empty_database))


@pytest.mark.postgres
def test_an_unreachable_database_is_not_ready(pg_url: str) -> None:
    # a pool that is not open (as when the database was down at start): no
    # connection to be had; the reason names no driver message and no URL
    detail = asyncio.run(_reason(pg_url, open_pool=False))
    assert "unreachable" in detail
    assert "postgres" not in detail
