"""Database integrations end to end: the real service process on PostgreSQL, an
integration to another database on loopback, and the local model calling its
``db_<slug>__query`` tool in a conversation."""

from __future__ import annotations

import contextlib
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

from tests.e2e.service import Service, running
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


@pytest.fixture(scope="module")
def svc(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, dict[str, str]]]:
    tmp_path = tmp_path_factory.mktemp("integrations")
    key = f"ask_e2e_{uuid.uuid4().hex}"
    with running(
        {
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": key,
            "AGENTSVC_BOOTSTRAP_ORG": f"db-{uuid.uuid4().hex[:8]}",
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
            "AGENTSVC_DATA_DIR": str(tmp_path / "data"),
        },
        log=tmp_path / "svc.log",
    ) as service:
        yield service, {"Authorization": f"Bearer {key}"}
        assert PASSWORD not in service.output()


def rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT count(*) FROM orders").fetchone()
    assert found is not None
    return int(found[0])


def connect(c: httpx.Client, shop: tuple[str, str], **bounds: int) -> tuple[str, str]:
    """An integration to ``shop`` attached to a new agent: the agent's id and the
    integration's slug."""
    shop_url, role = shop
    d = conninfo_to_dict(shop_url)
    connection = (
        f"postgresql://{role}:{PASSWORD}@{d.get('host', '127.0.0.1')}:"
        f"{d.get('port', '5432')}/{d['dbname']}"
    )
    name = f"Shop {uuid.uuid4().hex[:6]}"
    r = c.post(
        "/api/integrations",
        json={"name": name, "type": "postgresql", "connection": connection, **bounds},
    )
    assert r.status_code == 201, r.text
    integration = r.json()
    assert integration["has_connection"] is True
    agent = c.post("/api/agents", json={"name": "Analyst"}).json()
    attached = c.post(
        f"/api/agents/{agent['id']}/integrations", json={"integrationId": integration["id"]}
    )
    assert attached.status_code == 200, attached.text
    return str(agent["id"]), str(integration["slug"])


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
    with httpx.Client(base_url=service.url, headers=h, timeout=60) as c:
        agent, slug = connect(c, shop)
        select = '{"sql": "SELECT id, item FROM orders ORDER BY id"}'
        answer = json.loads(tool_result(c, agent, f"call db_{slug}__query {select}"))
        assert answer == {
            "columns": ["id", "item"],
            "rows": [[1, "tea"], [2, "coffee"]],
            "row_count": 2,
            "truncated": False,
        }
        insert = '{"sql": "INSERT INTO orders VALUES (3, \'cake\')"}'
        refused = tool_result(c, agent, f"call db_{slug}__query {insert}")
        assert refused == "error: cannot execute INSERT in a read-only transaction"
        assert rows(shop[0]) == 2


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory since it started, or since its last
    ``reset_peak``."""
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def reset_peak(pid: int) -> None:
    """Peak resident memory starts again from the current (Linux's clear_refs "5");
    where that is not allowed, the peak so far stays the baseline."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def test_a_huge_value_is_cut_by_the_database_not_in_the_service(
    svc: tuple[Service, dict[str, str]], shop: tuple[str, str]
) -> None:
    """A 200 MB value answers 16 KB, and the service's memory never holds it: its
    peak resident memory grows by far less than the value during the call."""
    service, h = svc
    pid = service.proc.pid
    with httpx.Client(base_url=service.url, headers=h, timeout=90) as c:
        agent, slug = connect(c, shop, statementTimeoutMs=60_000)
        small = json.dumps({"sql": "SELECT repeat('y', 20000) AS big"})
        # the same path once, small, so that what it loads and keeps is not counted
        warm = json.loads(tool_result(c, agent, f"call db_{slug}__query {small}"))
        assert warm["truncated"] is True
        big = json.dumps(
            {
                "sql": "SELECT string_agg(repeat('y', 1000000), '') AS big"
                " FROM generate_series(1, 200)"
            }
        )
        reset_peak(pid)
        before = peak_rss_mib(pid)
        answer = json.loads(tool_result(c, agent, f"call db_{slug}__query {big}"))
        grown = peak_rss_mib(pid) - before
    assert answer["columns"] == ["big"]
    assert answer["rows"] == [["y" * 16384 + "…"]]
    assert answer["truncated"] is True
    assert grown < 40, f"the service's peak memory grew by {grown:.0f} MiB"
