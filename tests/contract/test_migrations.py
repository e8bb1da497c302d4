"""Migrations: several processes starting at once apply each migration exactly once."""

from __future__ import annotations

import asyncio

import psycopg

from agentsvc_adapters.postgres import migrate
from agentsvc_adapters.postgres.migrate import migrations
from tests.pg import fresh_database


def test_concurrent_migrations_apply_each_version_once(pg_admin_url: str) -> None:
    expected = [v for v, _, _ in migrations()]
    assert expected, "the package ships its migrations"
    with fresh_database(pg_admin_url) as url:

        async def race() -> list[list[int]]:
            return await asyncio.gather(*(migrate(url) for _ in range(6)))

        results = asyncio.run(race())
        # exactly one caller applied everything; the others found nothing to do
        assert sorted(results, key=len) == [[]] * 5 + [expected]
        assert asyncio.run(migrate(url)) == []
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
            assert [r[0] for r in rows] == expected
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
                ).fetchall()
            }
            assert {"organizations", "api_keys", "agents", "schema_migrations"} <= tables


def test_every_table_and_index_leads_with_org_id(pg_url: str) -> None:
    """The layout that lets the schema shard by organization (see docs/deploy.md)."""
    with psycopg.connect(pg_url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = 'public'"
                # the service's own bookkeeping: which migrations ran, how far the
                # analytics fold has gone; the job queue's tables (PgQueuer's own
                # schema: a job names its organization in its payload)
                " AND table_name NOT IN ('schema_migrations', 'rollup_marks')"
                " AND table_name NOT LIKE 'pgqueuer%'"
            ).fetchall()
        ]
        assert tables
        for table in tables:
            cols = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
                    (table,),
                ).fetchall()
            ]
            assert "org_id" in cols, table
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
            " AND tablename NOT IN ('schema_migrations', 'rollup_marks')"
            " AND tablename NOT LIKE 'pgqueuer%'"
        ).fetchall()
        global_lookups = {
            "api_keys_key_hash",  # a key names its org: documented exception
            # the sweep's purges of every organization's expired rows (BRIN: next to
            # nothing on the insert path); no request reads through them
            "run_events_keep_until",
            "idempotency_keys_expires",
            "traces_keep_until",
            "traces_stored",
            "usage_records_stored",
            "trace_evaluations_keep_until",
            # full text search (GIN over the tsvector: a GIN index cannot lead with a
            # text column without the btree_gin extension); every search also filters
            # by org_id and agent_id
            "memories_search",
            "knowledge_chunks_search",
            "messages_search",  # the thread search: also by org_id and agent_id
            # the sweep's look for indexings that should be running, of every organization
            "knowledge_documents_pending",
            # runners: the inbound webhook's token (it names no organization), the
            # scheduler's due cron triggers and the sweep's stale runs, of every
            # organization (partial indexes: what is due or going)
            "runner_triggers_token",
            "runner_triggers_due",
            "runner_runs_stale",
            # marketplace profiles: a handle is one agent's across the service, and
            # the public avatar's URL names the agent alone (its id is unique)
            "marketplace_profiles_handle",
            "marketplace_profiles_agent",
            # published chats: a slug is one chat's across the service (the public
            # routes name the chat alone), and the public marketplace listing's
            # active public chats of every organization (a partial index)
            "published_chats_slug",
            "published_chats_listed",
            # channels: the public inbound endpoint names the channel alone (its id
            # is unique across the service)
            "channels_id",
            # computers: the idle sweep's running instances of every organization
            # (a partial index)
            "computer_instances_running",
            # event webhooks: the sweep's pending deliveries (a partial index) and
            # events past their retention, of every organization
            "event_webhook_deliveries_pending",
            "event_webhook_events_created",
        }
        for name, definition in indexes:
            if name in global_lookups:
                continue
            # vector search (made when embeddings are configured on a server with
            # pgvector, one per vector length): an HNSW index holds the vector only;
            # every search also filters by org_id and agent_id
            if name.startswith("knowledge_vectors_hnsw_"):
                continue
            assert "(org_id" in definition, definition
