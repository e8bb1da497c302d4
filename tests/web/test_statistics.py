"""The service keeps the planner's statistics of tables that grow fast: with
PostgreSQL storage each process looks every ``AGENTSVC_ANALYZE_EVERY_MS`` for tables
that doubled since their last ``ANALYZE`` and analyzes them (postgres/statistics.py)."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from agentsvc_adapters.postgres.statistics import MIN_ROWS
from agentsvc_web.bootstrap import build_services
from agentsvc_web.settings import Settings, SettingsError

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _threads_analyzed(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'threads'::regclass"
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def test_a_table_that_grew_is_analyzed_while_the_service_runs(own_pg_url: str) -> None:
    settings = Settings(storage="postgres", database_url=own_pg_url, analyze_every_ms=50)
    services = build_services(settings)
    async with services.running():
        before = await _threads_analyzed(own_pg_url)
        org = f"org-{uuid.uuid4().hex[:12]}"
        async with await psycopg.AsyncConnection.connect(own_pg_url, autocommit=True) as conn:
            await conn.execute("INSERT INTO organizations VALUES (%s, now())", (org,))
            await conn.execute(
                "INSERT INTO threads (org_id, id, agent_id, kind, status, metadata,"
                " resource_bindings, created_at, updated_at) SELECT %s, gen_random_uuid(),"
                " gen_random_uuid(), 'chat', 'idle', '{}', '[]', now() + g * interval '1 ms',"
                " now() FROM generate_series(1, %s) g",
                (org, MIN_ROWS * 4),
            )
        for _ in range(600):  # 30 s; the statistics system reports within a second or so
            if await _threads_analyzed(own_pg_url) > before:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the grown table was not analyzed")


def test_the_interval_is_a_setting_and_zero_turns_it_off() -> None:
    assert Settings.from_env({}).analyze_every_ms == 2000
    assert Settings.from_env({"AGENTSVC_ANALYZE_EVERY_MS": "0"}).analyze_every_ms == 0
    with pytest.raises(SettingsError, match="AGENTSVC_ANALYZE_EVERY_MS"):
        Settings.from_env({"AGENTSVC_ANALYZE_EVERY_MS": "-1"})
