"""PostgreSQL only: ``analyze_grown`` gives new statistics to the tables that at least
doubled since their last ones (or reached ``MIN_ROWS`` without any), and with them
new plans to the statements prepared while the tables were small."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from anyio.from_thread import BlockingPortal
from psycopg import sql

from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.postgres.statistics import MIN_ROWS

pytestmark = pytest.mark.postgres

_THREADS = (
    "INSERT INTO threads (org_id, id, agent_id, kind, status, metadata, resource_bindings,"
    " created_at, updated_at) SELECT %(org)s, gen_random_uuid(), gen_random_uuid(), 'chat',"
    " 'idle', '{}', '[]', now() + g * interval '1 ms', now() FROM generate_series(1, %(n)s) g"
)
# the turn's lookup of its thread (and the foreign keys' checks of runs and messages)
_LOOKUP = "PREPARE lookup(text, uuid) AS SELECT 1 FROM threads WHERE org_id = $1 AND id = $2"


def _add_threads(conn: psycopg.Connection[Any], org: str, n: int) -> None:
    with conn.transaction():
        conn.execute(_THREADS, {"org": org, "n": n})
        # counted in pg_stat_user_tables as it commits, not up to a second later
        conn.execute("SELECT pg_stat_force_next_flush()")


def _analyzes(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'threads'::regclass"
    ).fetchone()
    assert row is not None
    return int(row[0])


def _lookup(org: str, explain: bool = False) -> sql.Composed:
    """The prepared lookup of a thread that is not there (or its plan)."""
    head = "EXPLAIN (FORMAT JSON) EXECUTE" if explain else "EXECUTE"
    return sql.SQL(head + " lookup({}, {})").format(
        sql.Literal(org), sql.Literal(str(uuid.uuid4()))
    )


def _lookup_scan(conn: psycopg.Connection[Any], org: str) -> dict[str, Any]:
    """The plan the session's prepared lookup runs with now (its generic plan)."""
    row = conn.execute(_lookup(org, explain=True)).fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    node: dict[str, Any] = plan[0]["Plan"]
    while "Index Name" not in node and node.get("Plans"):
        node = node["Plans"][0]
    return node


def test_tables_that_doubled_are_analyzed_and_their_cached_plans_made_again(
    own_pg_url: str, portal: BlockingPortal
) -> None:
    storage = PostgresStorage(own_pg_url, min_size=1, max_size=2)
    portal.call(storage.open)
    org = f"org-{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(own_pg_url, autocommit=True) as conn:
            conn.execute("INSERT INTO organizations VALUES (%s, now())", (org,))
            assert "threads" not in portal.call(storage.analyze_grown)  # empty: nothing
            # a young database: the lookup's generic plan is made on a table of a few
            # rows without statistics, and kept
            _add_threads(conn, org, 5)
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute(_LOOKUP)
            conn.execute(_lookup(org))
            assert "threads" not in portal.call(storage.analyze_grown)  # under MIN_ROWS
            _add_threads(conn, org, MIN_ROWS * 20)
            before = _lookup_scan(conn, org)
            # the plan made for the small table: the organization's every thread
            # (an index on org_id alone, filtered by id), not the primary key
            assert "id = $2" not in before.get("Index Cond", ""), before

            assert "threads" in portal.call(storage.analyze_grown)
            analyzed = _analyzes(conn)
            after = _lookup_scan(conn, org)
            assert after["Index Name"] == "threads_pkey", after
            assert "id = $2" in after["Index Cond"], after

            # not again until the table has doubled since
            assert "threads" not in portal.call(storage.analyze_grown)
            _add_threads(conn, org, MIN_ROWS * 10)  # half as many again
            assert "threads" not in portal.call(storage.analyze_grown)
            assert _analyzes(conn) == analyzed
            _add_threads(conn, org, MIN_ROWS * 11)
            assert "threads" in portal.call(storage.analyze_grown)
            assert _analyzes(conn) == analyzed + 1
    finally:
        portal.call(storage.close)
