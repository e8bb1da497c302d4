"""Every kind of server-side tool in one conversation (docs/tools.md): the real service
process and the built-in `local` model call a webhook tool (a signed receiver on
loopback checks every signature with the docs' receiver), a PostgreSQL
integration (which refuses a write), web fetch and web search (a site and the
Brave Search API fake on loopback) and the plan tools; the turn's trace shows each
call as a `tool` span."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from tests.e2e.service import client, running
from tests.e2e.test_webhook_tools_e2e import ORDER_SCHEMA, Receiver
from tests.e2e.turns import tool_result
from tests.fakes.web import BRAVE_KEY, FakeBrave, FakeSite
from tests.pg import fresh_database, reader_role
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

DB_PASSWORD = "all-tools-db-pw-93c1"


@pytest.fixture
def world(pg_admin_url: str, pg_url: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    receiver, site, brave = Receiver(), FakeSite(), FakeBrave()
    key = f"ask_e2e_{uuid.uuid4().hex}"
    with (
        serve(receiver) as hooks,
        serve(site) as site_url,
        serve(brave) as brave_url,
        reader_role(pg_admin_url, DB_PASSWORD) as role,
        fresh_database(pg_admin_url) as shop,
    ):
        with psycopg.connect(shop, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL)")
            conn.execute("INSERT INTO orders VALUES (1, 'tea'), (2, 'coffee')")
            conn.execute(
                sql.SQL("GRANT SELECT, INSERT ON orders TO {}").format(sql.Identifier(role))
            )
        d = conninfo_to_dict(shop)
        env = {
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": key,
            "AGENTSVC_BOOTSTRAP_ORG": f"tools-{uuid.uuid4().hex[:8]}",
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",  # everything here is on loopback
            "AGENTSVC_WEB_SEARCH_API_KEY": BRAVE_KEY,
            "AGENTSVC_WEB_SEARCH_URL": brave_url,
            "AGENTSVC_DATA_DIR": str(tmp_path / "data"),
        }
        with running(env, log=tmp_path / "svc.log") as svc, client(svc, key) as c:
            receiver.secret = c.get("/api/orgs/settings").json()["signing_secret"]
            yield {
                "c": c,
                "receiver": receiver,
                "hooks": hooks,
                "site": site,
                "site_url": site_url,
                "brave": brave,
                "shop": shop,
                "connection": f"postgresql://{role}:{DB_PASSWORD}@{d.get('host', '127.0.0.1')}:"
                f"{d.get('port', '5432')}/{d['dbname']}",
            }
        assert DB_PASSWORD not in svc.output()


def orders(shop: str) -> int:
    with psycopg.connect(shop) as conn:
        row = conn.execute("SELECT count(*) FROM orders").fetchone()
    assert row is not None
    return int(row[0])


def test_one_conversation_uses_every_kind_of_server_side_tool(world: dict[str, Any]) -> None:
    c = world["c"]
    # the agent: a delegated webhook tool, an attached database, web on, plans on
    tool = c.post(
        "/api/tools",
        json={
            "name": "lookup_order",
            "description": "Look an order up",
            "parameters": ORDER_SCHEMA,
            "url": f"{world['hooks']}/orders",
        },
    ).json()
    integration = c.post(
        "/api/integrations",
        json={"name": "Shop", "type": "postgresql", "connection": world["connection"]},
    )
    assert integration.status_code == 201, integration.text
    agent = c.post("/api/agents", json={"name": "Everything"}).json()
    aid = agent["id"]
    for method, path, body in [
        ("PUT", f"/api/agents/{aid}/delegated", {"toolIds": [tool["id"]]}),
        ("POST", f"/api/agents/{aid}/integrations", {"integrationId": integration.json()["id"]}),
        ("PUT", f"/api/agents/{aid}/web", {"fetchEnabled": True, "searchEnabled": True}),
        ("PUT", f"/api/agents/{aid}/plan", {"enabled": True}),
    ]:
        r = c.request(method, path, json=body)
        assert r.status_code == 200, (path, r.text)
    thread = c.post("/api/threads", json={"agentId": aid}).json()["id"]

    def turn(content: str) -> str:
        return tool_result(c, thread, content)

    # 1. the webhook tool: signed, verified by the docs' receiver
    result = turn('call lookup_order {"orderId": "A-1"}')
    assert json.loads(result) == {"orderId": "A-1", "status": "shipped"}
    assert [call["verified"] for call in world["receiver"].calls] == [True]

    # 2. the database: a read answers rows, a write is refused by the session
    result = turn('call db_shop__query {"sql": "SELECT item FROM orders ORDER BY id"}')
    assert json.loads(result)["rows"] == [["tea"], ["coffee"]]
    result = turn('call db_shop__query {"sql": "INSERT INTO orders VALUES (3, \'cake\')"}')
    assert result == "error: cannot execute INSERT in a read-only transaction"
    assert orders(world["shop"]) == 2

    # 3. the web: a page's text, and search results
    result = turn("call web_fetch " + json.dumps({"url": f"{world['site_url']}/"}))
    assert "How to brew green tea" in result
    result = turn('call web_search {"query": "green tea"}')
    assert result.startswith("Results for 'green tea':")
    assert world["brave"].queries[-1][0] == "green tea"

    # 4. plans: the tool result is the plan; HTTP shows ready following the edge
    result = turn('call plan_create {"title": "Restock"}')
    plan = json.loads(result)
    result = turn(
        'call todo_add {"todos": [{"content": "Count"}, {"content": "Order", "dependsOn": [0]}]}'
    )
    count, order = json.loads(result)["todos"]
    ready = c.get(f"/api/plans/{plan['id']}/ready").json()["ready"]
    assert [t["id"] for t in ready] == [count["id"]]
    c.patch(f"/api/plans/{plan['id']}/todos/{count['id']}", json={"status": "done"})
    ready = c.get(f"/api/plans/{plan['id']}/ready").json()["ready"]
    assert [t["id"] for t in ready] == [order["id"]]

    # every call was a `tool` span of its turn's trace
    traces = c.get("/api/logs", params={"threadId": thread}).json()["traces"]
    called = []
    for trace in traces:
        for span in c.get(f"/api/logs/{trace['id']}").json()["spans"]:
            if span["name"].startswith("execute_tool "):
                assert span["kind"] == "tool", span
                called.append(span["name"].removeprefix("execute_tool "))
    assert sorted(called) == sorted(
        [
            "lookup_order",
            "db_shop__query",
            "db_shop__query",
            "web_fetch",
            "web_search",
            "plan_create",
            "todo_add",
        ]
    )
