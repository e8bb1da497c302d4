"""Database integrations end to end: the real service process on PostgreSQL, an
integration to another database on loopback, and the local model calling its
``db_<slug>__query`` tool in a conversation."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from tests.e2e.service import Service
from tests.pg import fresh_database, reader_role
from tests.sse import parse

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PASSWORD = "e2e-integration-password-5b7f"


@pytest.fixture
def shop(pg_admin_url: str) -> Iterator[tuple[str, str]]:
    """A customer's database with a table (as a plain conninfo, for the test's own
    checks), and a role that may read *and write* it: only the session's read-only
    transaction stands between the model and a write."""
    with reader_role(pg_admin_url, PASSWORD) as role, fresh_database(pg_admin_url) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL)")
            conn.execute("INSERT INTO orders VALUES (1, 'tea'), (2, 'coffee')")
            conn.execute(
                sql.SQL("GRANT SELECT, INSERT ON orders TO {}").format(sql.Identifier(role))
            )
        yield url, role


@pytest.fixture
def svc(pg_url: str, tmp_path: Path) -> Iterator[tuple[Service, dict[str, str]]]:
    key = f"ask_e2e_{uuid.uuid4().hex}"
    service = Service(
        {
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": key,
            "AGENTSVC_BOOTSTRAP_ORG": f"db-{uuid.uuid4().hex[:8]}",
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
            "AGENTSVC_DATA_DIR": str(tmp_path / "data"),
        },
        log=tmp_path / "svc.log",
    )
    try:
        service.wait_ready()
        yield service, {"Authorization": f"Bearer {key}"}
        assert PASSWORD not in service.output()
    finally:
        service.stop()


def rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT count(*) FROM orders").fetchone()
    assert found is not None
    return int(found[0])


def tool_result(c: httpx.Client, agent_id: str, content: str) -> str:
    thread = c.post("/api/threads", json={"agentId": agent_id}).json()
    r = c.post(f"/api/threads/{thread['id']}/messages", json={"content": content})
    assert r.status_code == 200, r.text
    events: list[Any] = parse(r.text)
    return str(next(e for e in events if e.event == "tool_result").data["result"])


def test_the_model_reads_a_database_and_cannot_write_it(
    svc: tuple[Service, dict[str, str]], shop: tuple[str, str]
) -> None:
    service, h = svc
    shop_url, role = shop
    d = conninfo_to_dict(shop_url)
    connection = (
        f"postgresql://{role}:{PASSWORD}@{d.get('host', '127.0.0.1')}:"
        f"{d.get('port', '5432')}/{d['dbname']}"
    )
    with httpx.Client(base_url=service.url, headers=h, timeout=60) as c:
        r = c.post(
            "/api/integrations",
            json={"name": "Shop", "type": "postgresql", "connection": connection},
        )
        assert r.status_code == 201, r.text
        integration = r.json()
        assert integration["has_connection"] is True
        agent = c.post("/api/agents", json={"name": "Analyst"}).json()
        attached = c.post(
            f"/api/agents/{agent['id']}/integrations", json={"integrationId": integration["id"]}
        )
        assert attached.status_code == 200, attached.text

        select = '{"sql": "SELECT id, item FROM orders ORDER BY id"}'
        answer = json.loads(tool_result(c, agent["id"], f"call db_shop__query {select}"))
        assert answer == {
            "columns": ["id", "item"],
            "rows": [[1, "tea"], [2, "coffee"]],
            "row_count": 2,
            "truncated": False,
        }
        insert = '{"sql": "INSERT INTO orders VALUES (3, \'cake\')"}'
        refused = tool_result(c, agent["id"], f"call db_shop__query {insert}")
        assert refused == "error: cannot execute INSERT in a read-only transaction"
        assert rows(shop_url) == 2
