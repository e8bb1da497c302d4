"""Database integrations through the web app, on both storages, against a real
database on loopback (so AGENTSVC_ALLOW_PRIVATE_NETWORK is on, as in development)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import psycopg
import pytest
from litestar.testing import TestClient
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agentsvc_web.settings import Settings
from tests.pg import fresh_database, reader_role
from tests.sse import parse
from tests.web.conftest import bearer, make_jwt
from tests.web.shared import shared_client
from tests.web.turns import result_of, say, thread_of

H = dict[str, str]
Client = TestClient[Any]
PASSWORD = "web-integration-pw-41d2"
PASSWORD2 = "web-integration-second-pw-7c90"


@pytest.fixture(scope="module")
def db_url(pg_admin_url: str) -> Iterator[str]:
    with reader_role(pg_admin_url, PASSWORD) as role, fresh_database(pg_admin_url) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, item text)")
            conn.execute("INSERT INTO orders VALUES (1, 'tea'), (2, 'coffee'), (3, 'cake')")
            conn.execute(sql.SQL("GRANT SELECT ON orders TO {}").format(sql.Identifier(role)))
        d = conninfo_to_dict(url)
        yield (
            f"postgresql://{role}:{PASSWORD}@{d.get('host', '127.0.0.1')}:"
            f"{d.get('port', '5432')}/{d['dbname']}"
        )


@pytest.fixture(scope="module")
def second_url(pg_admin_url: str, db_url: str) -> Iterator[str]:
    """Another role on the same database, which alone may read ``stock``."""
    d = conninfo_to_dict(db_url)
    with reader_role(pg_admin_url, PASSWORD2) as role:
        admin = make_conninfo(pg_admin_url, dbname=d["dbname"])
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE TABLE stock (item text, n int)")
            conn.execute("INSERT INTO stock VALUES ('tea', 12)")
            conn.execute(sql.SQL("GRANT SELECT ON stock TO {}").format(sql.Identifier(role)))
        where = f"{d.get('host', '127.0.0.1')}:{d.get('port', '5432')}/{d['dbname']}"
        yield f"postgresql://{role}:{PASSWORD2}@{where}"


@pytest.fixture
def c(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Client]:
    open_settings = msgspec.structs.replace(settings, allow_private_network=True)
    with shared_client(request, open_settings) as client:
        yield client


def create(c: Client, auth: H, url: str, **body: Any) -> dict[str, Any]:
    r = c.post(
        "/api/integrations",
        json={"name": "Shop DB", "type": "postgresql", "connection": url, **body},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def test_create_answers_the_integration_without_its_connection(
    c: Client, auth: H, db_url: str
) -> None:
    made = create(c, auth, db_url, allowedTables=["orders"], maxRows=50)
    assert PASSWORD not in json.dumps(made)
    assert db_url not in json.dumps(made)
    assert made["slug"] == "shop-db"
    assert made["type"] == "postgresql"
    assert made["has_connection"] is True
    assert made["read_only"] is True
    assert made["allowed_tables"] == ["orders"]
    assert (made["max_rows"], made["max_bytes"], made["statement_timeout_ms"]) == (
        50,
        65536,
        5000,
    )
    assert "connection" not in made
    assert c.get(f"/api/integrations/{made['id']}", headers=auth).json() == made
    assert c.get("/api/integrations", headers=auth).json() == [made]


def test_a_duplicate_name_is_409(c: Client, auth: H, db_url: str) -> None:
    create(c, auth, db_url)
    r = c.post(
        "/api/integrations",
        json={"name": "Shop DB", "type": "postgresql", "connection": db_url},
        headers=auth,
    )
    assert r.status_code == 409, r.text
    assert PASSWORD not in r.text


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ("127.0.0.1:9/x", "could not reach 127.0.0.1:9"),
        # the test server, as a role it knows with its right password (a server that
        # checks passwords refuses a wrong one before it looks for the database)
        ("server", 'database "no_such_db_here" does not exist'),
    ],
)
def test_a_connection_that_fails_is_422_naming_the_problem(
    c: Client, auth: H, db_url: str, where: str, problem: str
) -> None:
    url = f"postgresql://postgres:{PASSWORD}@{where}"
    if where == "server":
        url = db_url.rsplit("/", 1)[0] + "/no_such_db_here"
    r = c.post(
        "/api/integrations",
        json={"name": "Broken", "type": "postgresql", "connection": url},
        headers=auth,
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "VALIDATION_ERROR"
    assert problem in r.json()["detail"]
    assert r.json()["detail"].startswith("connection: ")
    assert PASSWORD not in r.text
    assert c.get("/api/integrations", headers=auth).json() == []


def test_loopback_is_refused_without_private_networks(client: Client, auth: H, db_url: str) -> None:
    r = client.post(
        "/api/integrations",
        json={"name": "Local", "type": "postgresql", "connection": db_url},
        headers=auth,
    )
    assert r.status_code == 422, r.text
    assert "refused by the outbound guard" in r.json()["detail"]
    assert PASSWORD not in r.text


@pytest.mark.parametrize(
    "body",
    [
        {"maxRows": 0},
        {"maxRows": 10_001},
        {"maxBytes": 1023},
        {"statementTimeoutMs": 60_001},
        {"type": "mysql"},
        {"connection": "mysql://x/y"},
    ],
)
def test_bounds_are_422(c: Client, auth: H, db_url: str, body: dict[str, Any]) -> None:
    r = c.post(
        "/api/integrations",
        json={"name": "Shop DB", "type": "postgresql", "connection": db_url, **body},
        headers=auth,
    )
    assert r.status_code == 422, r.text
    assert PASSWORD not in r.text


def test_another_organization_gets_404(c: Client, auth: H, db_url: str) -> None:
    made = create(c, auth, db_url)
    agent = c.post("/api/agents", json={"name": "A"}, headers=auth).json()
    other = bearer(make_jwt(org=f"o-{uuid.uuid4().hex[:8]}", role="admin"))
    assert c.get(f"/api/integrations/{made['id']}", headers=other).status_code == 404
    assert c.delete(f"/api/integrations/{made['id']}", headers=other).status_code == 404
    assert c.get("/api/integrations", headers=other).json() == []
    theirs = c.post("/api/agents", json={"name": "B"}, headers=other).json()
    r = c.post(
        f"/api/agents/{theirs['id']}/integrations",
        json={"integrationId": made["id"]},
        headers=other,
    )
    assert r.status_code == 404
    assert c.get(f"/api/agents/{agent['id']}/integrations", headers=other).status_code == 404
    assert c.get(f"/api/integrations/{made['id']}", headers=auth).status_code == 200


def test_a_member_may_read_but_not_write(c: Client, auth: H, org_id: str, db_url: str) -> None:
    made = create(c, auth, db_url)
    member = bearer(make_jwt(sub="m", org=org_id))
    assert c.get(f"/api/integrations/{made['id']}", headers=member).status_code == 200
    assert c.delete(f"/api/integrations/{made['id']}", headers=member).status_code == 403
    r = c.post(
        "/api/integrations",
        json={"name": "X", "type": "postgresql", "connection": db_url},
        headers=member,
    )
    assert r.status_code == 403


def test_attach_detach_and_delete(c: Client, auth: H, db_url: str) -> None:
    one = create(c, auth, db_url)
    two = create(c, auth, db_url, name="Shop DB copy")
    agent = c.post("/api/agents", json={"name": "Analyst"}, headers=auth).json()
    path = f"/api/agents/{agent['id']}/integrations"
    assert c.get(path, headers=auth).json() == []
    r = c.post(path, json={"integrationId": one["id"]}, headers=auth)
    assert r.status_code == 200, r.text
    assert [i["id"] for i in r.json()] == [one["id"]]
    c.post(path, json={"integrationId": two["id"]}, headers=auth)
    again = c.post(path, json={"integrationId": one["id"]}, headers=auth).json()
    assert [i["id"] for i in again] == [one["id"], two["id"]]  # attaching twice: no change
    assert PASSWORD not in json.dumps(again)
    # detach: ok says whether it was attached; an id that names nothing is 404
    r = c.delete(path, params={"integrationId": one["id"]}, headers=auth)
    assert (r.status_code, r.json()) == (200, {"ok": True})
    r = c.delete(path, params={"integrationId": one["id"]}, headers=auth)
    assert (r.status_code, r.json()) == (200, {"ok": False})
    r = c.delete(path, params={"integrationId": str(uuid.uuid4())}, headers=auth)
    assert r.status_code == 404
    assert [i["id"] for i in c.get(path, headers=auth).json()] == [two["id"]]
    # an integration deleted while attached is skipped, then dropped on the next attach
    assert c.delete(f"/api/integrations/{two['id']}", headers=auth).json() == {"ok": True}
    assert c.get(path, headers=auth).json() == []
    assert c.get(f"/api/integrations/{two['id']}", headers=auth).status_code == 404
    after = c.post(path, json={"integrationId": one["id"]}, headers=auth).json()
    assert [i["id"] for i in after] == [one["id"]]
    missing = c.post(path, json={"integrationId": str(uuid.uuid4())}, headers=auth)
    assert missing.status_code == 404
    assert c.get(f"/api/agents/{uuid.uuid4()}/integrations", headers=auth).status_code == 404


def turn(c: Client, auth: H, agent_id: str, content: str) -> list[Any]:
    """``content`` said in a new thread of ``agent_id``: the answer's events."""
    return say(c, auth, thread_of(c, auth, agent_id), content)


def test_the_model_queries_an_attached_database(c: Client, auth: H, db_url: str) -> None:
    made = create(c, auth, db_url, allowedTables=["orders"])
    agent = c.post("/api/agents", json={"name": "Analyst"}, headers=auth).json()
    c.post(
        f"/api/agents/{agent['id']}/integrations",
        json={"integrationId": made["id"]},
        headers=auth,
    )
    tool = f"db_{made['slug']}__"
    select = '{"sql": "SELECT item FROM orders ORDER BY id"}'
    delete = '{"sql": "DELETE FROM orders"}'
    events = turn(c, auth, agent["id"], f"call {tool}query {select}")
    assert json.loads(result_of(events)) == {
        "columns": ["item"],
        "rows": [["tea"], ["coffee"], ["cake"]],
        "row_count": 3,
        "truncated": False,
    }
    events = turn(c, auth, agent["id"], f"call {tool}query {delete}")
    assert result_of(events) == "error: cannot execute DELETE in a read-only transaction"
    # rows are read only through the service's caps: a statement they cannot hold is
    # refused, with what can be run; a value too long is cut, and says so
    events = turn(c, auth, agent["id"], f'call {tool}query {{"sql": "SHOW work_mem"}}')
    assert result_of(events).startswith("error: this statement answers rows but cannot be read")
    assert "SELECT, VALUES, TABLE and WITH ... SELECT" in result_of(events)
    long = '{"sql": "SELECT repeat(\'y\', 20000) AS long, 1 AS next;"}'
    events = turn(c, auth, agent["id"], f"call {tool}query {long}")
    assert json.loads(result_of(events)) == {
        "columns": ["long", "next"],
        "rows": [["y" * 16384 + "…", 1]],
        "row_count": 1,
        "truncated": True,
    }
    events = turn(c, auth, agent["id"], f"call {tool}list_tables")
    assert json.loads(result_of(events)) == {
        "tables": [{"schema": "public", "name": "orders", "kind": "table"}]
    }
    events = turn(c, auth, agent["id"], f'call {tool}describe_table {{"table": "orders"}}')
    assert json.loads(result_of(events))["rows"][0] == ["id", "integer", False, None]
    events = turn(c, auth, agent["id"], f'call {tool}describe_table {{"table": "pg_class"}}')
    assert result_of(events).startswith("error: the table 'pg_class' is not among")
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM orders").fetchone()
    assert row == (3,)
    # without the attachment the tools are gone
    c.delete(
        f"/api/agents/{agent['id']}/integrations",
        params={"integrationId": made["id"]},
        headers=auth,
    )
    events = turn(c, auth, agent["id"], f"call {tool}list_tables")
    assert not any(e.event == "tool_result" for e in events)


def test_an_attachment_makes_its_chosen_tools_wait_for_approval(
    c: Client, auth: H, db_url: str
) -> None:
    """docs/tools.md, "Approval before a call": ``requireApproval`` on the attachment."""
    made = create(c, auth, db_url, allowedTables=["orders"])
    agent = c.post("/api/agents", json={"name": "Careful analyst"}, headers=auth).json()
    path = f"/api/agents/{agent['id']}/integrations"
    bad = c.post(
        path, json={"integrationId": made["id"], "requireApproval": ["drop"]}, headers=auth
    )
    assert bad.status_code in (400, 422), bad.text
    r = c.post(path, json={"integrationId": made["id"], "requireApproval": ["query"]}, headers=auth)
    assert r.status_code == 200, r.text
    assert [i["require_approval"] for i in r.json()] == [["query"]]
    assert [i["require_approval"] for i in c.get(path, headers=auth).json()] == [["query"]]
    thread = thread_of(c, auth, agent["id"])
    tool = f"db_{made['slug']}__"
    # list_tables runs at once; query waits, then runs once approved
    assert "tables" in result_of(say(c, auth, thread, f"call {tool}list_tables"))
    select = '{"sql": "SELECT count(*) AS n FROM orders"}'
    events = say(c, auth, thread, f"call {tool}query {select}")
    assert [e.event for e in events] == ["meta", "requires_action", "done"]
    [waiting] = events[1].data["toolCalls"]
    assert (waiting["kind"], waiting["name"]) == ("approval", f"{tool}query")
    answer = {"toolCallId": waiting["id"], "approved": True}
    r = c.post(
        f"/api/threads/{thread}/messages",
        json={"content": "", "toolApprovals": [answer]},
        headers=auth,
    )
    assert json.loads(result_of(parse(r.text)))["rows"] == [[3]]
    # attached again without it: nothing waits; detached: the choice goes with it
    r = c.post(path, json={"integrationId": made["id"]}, headers=auth)
    assert [i["require_approval"] for i in r.json()] == [[]]
    c.post(path, json={"integrationId": made["id"], "requireApproval": ["query"]}, headers=auth)
    c.delete(path, params={"integrationId": made["id"]}, headers=auth)
    r = c.post(path, json={"integrationId": made["id"]}, headers=auth)
    assert [i["require_approval"] for i in r.json()] == [[]]


def test_patch_changes_only_the_fields_given(c: Client, auth: H, db_url: str) -> None:
    made = create(c, auth, db_url, allowedTables=["orders"], maxRows=50)
    path = f"/api/integrations/{made['id']}"
    r = c.patch(path, json={"maxBytes": 2048}, headers=auth)
    assert r.status_code == 200, r.text
    changed = r.json()
    assert changed["max_bytes"] == 2048
    untouched = ("id", "name", "slug", "type", "allowed_tables", "max_rows", "created_at")
    assert {k: changed[k] for k in untouched} == {k: made[k] for k in untouched}
    assert changed["statement_timeout_ms"] == made["statement_timeout_ms"]
    assert changed["has_connection"] is True
    assert changed["updated_at"] >= made["updated_at"]
    assert c.get(path, headers=auth).json() == changed
    # allowedTables: null opens every table; a rename gives a new slug
    r = c.patch(
        path,
        json={"allowedTables": None, "name": "Orders DB", "statementTimeoutMs": 100},
        headers=auth,
    )
    assert r.status_code == 200, r.text
    assert (r.json()["allowed_tables"], r.json()["name"], r.json()["slug"]) == (
        None,
        "Orders DB",
        "orders-db",
    )
    assert (r.json()["statement_timeout_ms"], r.json()["max_bytes"]) == (100, 2048)
    assert c.patch(path, json={}, headers=auth).json()["name"] == "Orders DB"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"maxRows": 0}, "maxRows"),
        ({"maxRows": 10_001}, "maxRows"),
        ({"maxBytes": 1023}, "maxBytes"),
        ({"statementTimeoutMs": 60_001}, "statementTimeoutMs"),
        ({"allowedTables": [""]}, "allowedTables"),
        ({"type": "mysql"}, "type"),
        ({"name": ""}, "name"),
        ({"name": None}, "name"),
        ({"connection": "mysql://x/y"}, "connection"),
        ({"connection": ""}, "connection"),
        ({"connection": f"postgresql://postgres:{PASSWORD}@127.0.0.1:9/x"}, "connection"),
    ],
)
def test_patch_checks_as_create_does_and_changes_nothing_when_refused(
    c: Client, auth: H, db_url: str, body: dict[str, Any], field: str
) -> None:
    made = create(c, auth, db_url)
    r = c.patch(f"/api/integrations/{made['id']}", json=body, headers=auth)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "VALIDATION_ERROR"
    assert field in r.json()["detail"]
    assert PASSWORD not in r.text
    assert c.get(f"/api/integrations/{made['id']}", headers=auth).json() == made


def test_patch_to_a_name_taken_is_409_and_roles_and_organizations_apply(
    c: Client, auth: H, org_id: str, db_url: str
) -> None:
    made = create(c, auth, db_url)
    other = create(c, auth, db_url, name="Other DB")
    path = f"/api/integrations/{other['id']}"
    r = c.patch(path, json={"name": "Shop DB"}, headers=auth)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "CONFLICT"
    assert c.get(path, headers=auth).json() == other
    # its own name again is no conflict
    assert (
        c.patch(
            f"/api/integrations/{made['id']}", json={"name": "Shop DB"}, headers=auth
        ).status_code
        == 200
    )
    member = bearer(make_jwt(sub="m", org=org_id))
    assert c.patch(path, json={"maxRows": 5}, headers=member).status_code == 403
    stranger = bearer(make_jwt(org=f"o-{uuid.uuid4().hex[:8]}", role="admin"))
    assert c.patch(path, json={"maxRows": 5}, headers=stranger).status_code == 404
    assert c.patch(f"/api/integrations/{uuid.uuid4()}", json={}, headers=auth).status_code == 404
    assert c.get(path, headers=auth).json() == other


def test_an_attached_agents_next_turn_uses_the_changed_settings(
    c: Client, auth: H, db_url: str, second_url: str
) -> None:
    made = create(c, auth, db_url, allowedTables=["orders"])
    agent = c.post("/api/agents", json={"name": "Analyst"}, headers=auth).json()
    attach = c.post(
        f"/api/agents/{agent['id']}/integrations",
        json={"integrationId": made["id"], "requireApproval": ["describe_table"]},
        headers=auth,
    )
    assert attach.status_code == 200, attach.text
    select = '{"sql": "SELECT item FROM orders ORDER BY id"}'
    stock = '{"sql": "SELECT item, n FROM stock"}'
    tool = f"db_{made['slug']}__"
    assert (
        json.loads(result_of(turn(c, auth, agent["id"], f"call {tool}query {select}")))["row_count"]
        == 3
    )
    assert "permission denied" in result_of(turn(c, auth, agent["id"], f"call {tool}query {stock}"))

    path = f"/api/integrations/{made['id']}"
    r = c.patch(path, json={"maxRows": 1}, headers=auth)
    assert r.status_code == 200, r.text
    rows = json.loads(result_of(turn(c, auth, agent["id"], f"call {tool}query {select}")))
    assert (rows["rows"], rows["truncated"]) == ([["tea"]], True)

    # another connection: tested, sealed, never answered back; the turn uses it
    r = c.patch(path, json={"connection": second_url, "maxRows": 200}, headers=auth)
    assert r.status_code == 200, r.text
    for secret in (PASSWORD2, second_url, PASSWORD, db_url):
        assert secret not in r.text
    assert "connection" not in r.json()
    got = json.loads(result_of(turn(c, auth, agent["id"], f"call {tool}query {stock}")))
    assert got["rows"] == [["tea", 12]]
    assert "permission denied" in result_of(
        turn(c, auth, agent["id"], f"call {tool}query {select}")
    )

    # renamed: the attachment (and what waits for approval) stays, the tools follow the slug
    r = c.patch(path, json={"name": "Stock room"}, headers=auth)
    assert r.json()["slug"] == "stock-room"
    attached = c.get(f"/api/agents/{agent['id']}/integrations", headers=auth).json()
    assert [(i["id"], i["name"], i["require_approval"]) for i in attached] == [
        (made["id"], "Stock room", ["describe_table"])
    ]
    events = turn(c, auth, agent["id"], f"call db_stock-room__query {stock}")
    assert json.loads(result_of(events))["rows"] == [["tea", 12]]
