"""MCP servers, their attachment to agents and their tools in a turn (docs/mcp.md),
through the web app, on both storages; the MCP servers are a test double (the real
client is tested in tests/unit/test_mcp_client.py)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import psycopg
import pytest
from litestar.testing import TestClient

from agentsvc_core.ports import McpTool
from agentsvc_web.settings import Settings
from tests.sse import names, parse
from tests.web.conftest import JWT_SECRET, bearer, make_jwt
from tests.web.harness import Harness, SharedHarness

H = dict[str, str]
Client = TestClient[Any]
SECRET = "Bearer top-secret-token-9f8e7d"


@pytest.fixture
def open_settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, allow_private_network=True, allow_stdio_mcp=True)


@pytest.fixture
def mh(
    request: pytest.FixtureRequest, open_settings: Settings, org_id: str, boot_key: str
) -> Iterator[SharedHarness]:
    """The harness of these settings, its MCP app (or with ``indirect``
    parametrization, ``live-mcp``: its live server) started once per process."""
    mode = getattr(request, "param", "mcp")
    h = SharedHarness(request, open_settings, org_id, boot_key, mode=mode)
    h.mcp.servers["http://127.0.0.1:9/mcp"] = [
        McpTool(
            name="search",
            description="Search the docs",
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        ),
        McpTool(name="delete_all", description="Dangerous"),
        McpTool(name="fail", description="Always fails"),
    ]
    try:
        yield h
    finally:
        h.finish()


def create(c: Client, auth: H, **body: Any) -> dict[str, Any]:
    payload = {
        "name": "Docs Server",
        "transport": "streamable_http",
        "url": "http://127.0.0.1:9/mcp",
        **body,
    }
    r = c.post("/api/mcps", json=payload, headers=auth)
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def test_create_answers_the_camel_case_server_without_secrets(mh: SharedHarness, auth: H) -> None:
    with mh.mcp_client() as c:
        s = create(
            c, auth, credentials={"headers": {"Authorization": SECRET}}, allowedTools=["search"]
        )
        assert set(s) >= {
            "id",
            "name",
            "slug",
            "transport",
            "url",
            "status",
            "hasCredentials",
            "toolsCache",
            "createdAt",
        }
        assert (s["slug"], s["transport"], s["status"], s["hasCredentials"], s["toolsCache"]) == (
            "docs-server",
            "streamable_http",
            "active",
            True,
            [],
        )
        assert "credentials" not in s
        for r in (c.get(f"/api/mcps/{s['id']}", headers=auth), c.get("/api/mcps", headers=auth)):
            assert SECRET not in r.text
            assert "top-secret" not in r.text
        assert c.get(f"/api/mcps/{s['id']}", headers=auth).json() == s


def test_slugs_are_derived_and_unique(mh: SharedHarness, auth: H) -> None:
    with mh.mcp_client() as c:
        a = create(c, auth, name="Docs Server")
        b = create(c, auth, name="docs  server!")
        d = create(c, auth, name="Ünïcode ✓ Tools")
        e = create(c, auth, name="✓ ✓")
        f = create(c, auth, name="A" * 47 + " tail")
        # lowercase ASCII letters and digits; every other run becomes one dash, none
        # at either end; at most 48 characters; nothing left: "mcp"
        assert (a["slug"], b["slug"]) == ("docs-server", "docs-server-2")
        assert (d["slug"], e["slug"], f["slug"]) == ("n-code-tools", "mcp", "a" * 47)
        r = c.patch(f"/api/mcps/{b['id']}", json={"name": "Other Thing"}, headers=auth)
        assert r.json()["slug"] == "other-thing"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"slug": "mine"}, "slug"),
        ({"transport": "ftp"}, "transport"),
        ({"url": None}, "url"),
        ({"transport": "sse", "url": None}, "url"),
        ({"transport": "stdio", "url": None}, "command"),
        ({"name": ""}, "name"),
        ({"credentials": {"headers": {"X": 1}}}, "credentials"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "http://127.0.0.1:9/m cp"}, "url"),
        ({"url": "http://127.0.0.1:9/mcp\tx"}, "url"),
        ({"url": "http://127.0.0.1:9/mcp\r\nX-Evil: 1"}, "url"),
        ({"url": "http://127.0.0.1:9/\u2028mcp"}, "url"),
        ({"url": "http://127.0.0.1:9/mcp\u007f"}, "url"),
        ({"credentials": {"headers": {"X-Key": "a\r\nX-Evil: 1"}}}, "credentials.headers"),
        ({"credentials": {"headers": {"X-Key": "a\nb"}}}, "credentials.headers"),
        ({"credentials": {"headers": {"X-Key": "a\u0000"}}}, "credentials.headers"),
        ({"credentials": {"headers": {"X Key": "a"}}}, "credentials.headers"),
        ({"credentials": {"headers": {"X-Key:": "a"}}}, "credentials.headers"),
        ({"credentials": {"headers": {"X-K\u00e9y": "a"}}}, "credentials.headers"),
    ],
)
def test_invalid_servers_are_422(
    mh: SharedHarness, auth: H, body: dict[str, Any], field: str
) -> None:
    with mh.mcp_client() as c:
        payload = {
            "name": "S",
            "transport": "streamable_http",
            "url": "http://127.0.0.1:9/mcp",
            **body,
        }
        r = c.post(
            "/api/mcps", json={k: v for k, v in payload.items() if v is not None}, headers=auth
        )
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert field in r.json()["detail"]
        assert "Evil" not in r.text  # a refused value is not repeated


@pytest.mark.parametrize(
    "body",
    [
        {"url": "http://127.0.0.1:9/m cp"},
        {"url": " http://127.0.0.1:9/mcp"},
        {"credentials": {"headers": {"X-Key": "a\r\nb"}}},
        {"credentials": {"headers": {"Bad Name": "a"}}},
    ],
)
def test_invalid_changes_are_422(mh: SharedHarness, auth: H, body: dict[str, Any]) -> None:
    with mh.mcp_client() as c:
        s = create(c, auth, credentials={"headers": {"X-Key": "tab\tis fine"}})
        r = c.patch(f"/api/mcps/{s['id']}", json=body, headers=auth)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert c.get(f"/api/mcps/{s['id']}", headers=auth).json() == s


def test_private_addresses_and_stdio_are_refused_by_default(settings: Settings, auth: H) -> None:
    h = Harness(settings)  # the defaults: no private network, no stdio
    with h.mcp_client() as c:
        for url in (
            "http://127.0.0.1:9/mcp",
            "https://10.0.0.5/mcp",
            "https://169.254.169.254/latest",
            "https://[::1]/x",
            "https://2130706433/",
        ):
            r = c.post(
                "/api/mcps",
                json={"name": "S", "transport": "streamable_http", "url": url},
                headers=auth,
            )
            assert r.status_code == 422, (url, r.text)
            assert "url" in r.json()["detail"]
        r = c.post(
            "/api/mcps",
            json={"name": "S", "transport": "stdio", "command": "python3"},
            headers=auth,
        )
        assert r.status_code == 422
        assert "AGENTSVC_ALLOW_STDIO_MCP" in r.json()["detail"]


def test_patch_credentials_and_allowed_tools(mh: SharedHarness, auth: H) -> None:
    with mh.mcp_client() as c:
        s = create(c, auth)
        assert s["hasCredentials"] is False
        r = c.patch(
            f"/api/mcps/{s['id']}",
            json={"credentials": {"headers": {"X-Key": "k"}}, "allowedTools": ["search"]},
            headers=auth,
        )
        assert (r.json()["hasCredentials"], r.json()["allowedTools"]) == (True, ["search"])
        r = c.patch(
            f"/api/mcps/{s['id']}", json={"credentials": None, "allowedTools": None}, headers=auth
        )
        assert (r.json()["hasCredentials"], r.json()["allowedTools"]) == (False, None)
        assert c.patch(f"/api/mcps/{s['id']}", json={"slug": "x"}, headers=auth).status_code == 422


def test_test_lists_tools_and_refreshes_the_cache(mh: SharedHarness, auth: H) -> None:
    with mh.mcp_client() as c:
        s = create(c, auth, credentials={"headers": {"Authorization": SECRET}})
        r = c.post(f"/api/mcps/{s['id']}/test", headers=auth)
        assert r.status_code == 200
        body = r.json()
        assert body["ok"] is True
        assert body["tools"][0] == {
            "name": "search",
            "description": "Search the docs",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
        assert [
            t["name"] for t in c.get(f"/api/mcps/{s['id']}", headers=auth).json()["toolsCache"]
        ] == ["search", "delete_all", "fail"]
        assert mh.mcp.seen[-1].headers == {"Authorization": SECRET}  # decrypted for the call only
        down = create(c, auth, name="Down", url="http://127.0.0.1:1/nothing")
        body = c.post(f"/api/mcps/{down['id']}/test", headers=auth).json()
        assert body["ok"] is False
        assert body["tools"] == []
        assert "cannot connect" in body["error"]


def test_attachments_and_effective_tools(mh: SharedHarness, auth: H) -> None:
    with mh.mcp_client() as c:
        s = create(c, auth, allowedTools=["search", "fail"])
        c.post(f"/api/mcps/{s['id']}/test", headers=auth)
        a = c.post("/api/agents", json={"name": "A"}, headers=auth).json()
        url = f"/api/agents/{a['id']}/mcps"
        r = c.post(
            url,
            json={"mcpServerId": s["id"], "allowedTools": ["search", "delete_all"]},
            headers=auth,
        )
        assert r.status_code == 200, r.text
        assert r.json()["effectiveTools"] == ["search"]  # the intersection
        listed = c.get(url, headers=auth).json()
        assert [(x["mcpServerId"], x["allowedTools"]) for x in listed] == [
            (s["id"], ["search", "delete_all"])
        ]
        assert c.post(url, json={"mcpServerId": str(uuid.uuid4())}, headers=auth).status_code == 404
        assert (
            c.post(
                f"/api/agents/{uuid.uuid4()}/mcps", json={"mcpServerId": s["id"]}, headers=auth
            ).status_code
            == 404
        )
        # a runner's attachment needs the runner (an unknown one is 404, as an agent)
        unknown = f"/api/runners/{uuid.uuid4()}/mcps"
        assert c.post(unknown, json={"mcpServerId": s["id"]}, headers=auth).status_code == 404
        assert c.get(unknown, headers=auth).status_code == 404
        made = c.post("/api/runners", json={"name": "R"}, headers=auth)
        assert made.status_code == 201, made.text
        runner = f"/api/runners/{made.json()['id']}/mcps"
        assert c.post(runner, json={"mcpServerId": s["id"]}, headers=auth).status_code == 200
        assert len(c.get(runner, headers=auth).json()) == 1
        # deleting the server removes every attachment
        assert c.delete(f"/api/mcps/{s['id']}", headers=auth).json() == {"ok": True}
        assert c.get(url, headers=auth).json() == []
        assert c.get(runner, headers=auth).json() == []
        assert c.get(f"/api/mcps/{s['id']}", headers=auth).status_code == 404


def test_detach(mh: SharedHarness, auth: H) -> None:
    with mh.mcp_client() as c:
        s = create(c, auth)
        a = c.post("/api/agents", json={"name": "A"}, headers=auth).json()
        url = f"/api/agents/{a['id']}/mcps"
        c.post(url, json={"mcpServerId": s["id"]}, headers=auth)
        r = c.request("DELETE", url, json={"mcpServerId": s["id"]}, headers=auth)
        assert (r.status_code, r.json()) == (200, {"ok": True})
        assert c.request("DELETE", url, json={"mcpServerId": s["id"]}, headers=auth).json() == {
            "ok": False
        }
        assert c.get(url, headers=auth).json() == []


@pytest.mark.parametrize("mh", ["live-mcp"], indirect=True)
def test_mcp_tools_in_the_turn(mh: SharedHarness, auth: H) -> None:
    with mh.live(auth, mcp=True) as c:
        s = c.post(
            "/api/mcps",
            json={
                "name": "Docs",
                "transport": "streamable_http",
                "url": "http://127.0.0.1:9/mcp",
                "credentials": {"headers": {"Authorization": SECRET}},
            },
        ).json()
        a = c.post("/api/agents", json={"name": "A"}).json()
        c.post(
            f"/api/agents/{a['id']}/mcps",
            json={"mcpServerId": s["id"], "allowedTools": ["search", "fail"]},
        )
        t = c.post("/api/threads", json={"agentId": a["id"]}).json()
        r = c.post(
            f"/api/threads/{t['id']}/messages",
            json={"content": 'call docs__search {"q": "refunds"}'},
        )
        events = parse(r.text)
        assert names(events)[:4] == ["meta", "tool_call", "tool_executing", "tool_result"]
        assert events[1].data["tool"]["name"] == "docs__search"
        assert events[3].data["result"] == "search ran with [('q', 'refunds')]"
        assert "search ran with" in events[-1].data["content"]
        offered = {tl.name for tl in mh.model.requests[0].tools}
        assert offered == {"docs__search", "docs__fail"}  # delete_all is not allowed
        assert mh.mcp.calls == [("search", {"q": "refunds"})]
        assert mh.mcp.seen[-1].headers == {"Authorization": SECRET}
        # a failing tool is a result the model sees, not a broken stream
        r = c.post(f"/api/threads/{t['id']}/messages", json={"content": "call docs__fail"})
        events = parse(r.text)
        result = next(e for e in events if e.event == "tool_result")
        assert result.data["result"] == "error: the tool failed"
        assert names(events)[-1] == "done"
        assert SECRET not in r.text


def test_stored_credentials_are_sealed_and_bound_to_their_row(
    pg_url: str, boot_key: str, org_id: str
) -> None:
    """Reads the database rows, so PostgreSQL only."""
    open_settings = Settings(
        storage="postgres",
        database_url=pg_url,
        migrate_on_start=False,
        bootstrap_api_key=boot_key,
        bootstrap_org=org_id,
        jwt_secret=JWT_SECRET,
        jwt_algorithms=("HS256",),
        allow_private_network=True,
    )
    mh = Harness(open_settings)
    mh.mcp.servers["http://127.0.0.1:9/mcp"] = []
    auth = bearer(boot_key)
    other = bearer(make_jwt(org=f"o-{uuid.uuid4().hex[:8]}", role="admin"))
    with mh.mcp_client() as c:
        mine = create(
            c,
            auth,
            credentials={
                "headers": {"Authorization": SECRET},
                "env": {"API_TOKEN": "env-secret-123"},
            },
        )
        theirs = create(c, other, name="Theirs", credentials={"headers": {"X": "y"}})
        assert open_settings.database_url is not None
        with psycopg.connect(open_settings.database_url, autocommit=True) as db:
            raw = db.execute(
                "SELECT credentials FROM mcp_servers WHERE id = %s", (mine["id"],)
            ).fetchone()
            assert raw is not None
            everything = str(db.execute("SELECT * FROM mcp_servers").fetchall())
            assert "top-secret" not in everything
            assert "env-secret-123" not in everything
            assert raw[0].startswith("v1.")
            # another organization's row with this ciphertext does not open
            db.execute(
                "UPDATE mcp_servers SET credentials = %s WHERE id = %s", (raw[0], theirs["id"])
            )
        r = c.post(f"/api/mcps/{theirs['id']}/test", headers=other)
        assert r.status_code == 200
        assert r.json()["ok"] is False
        assert "does not belong here" in r.json()["error"]
        assert SECRET not in r.text


@pytest.mark.parametrize(
    ("change", "kept"),
    [
        ({"url": "http://127.0.0.1:10/mcp"}, False),
        ({"url": "http://127.0.0.1:9/mcp"}, True),  # the same address: nothing moved
        ({"name": "Renamed"}, True),
        ({"allowedTools": ["search"]}, True),
        ({"url": "http://127.0.0.1:10/mcp", "credentials": {"headers": {"X-New": "n"}}}, True),
    ],
)
def test_moving_a_server_drops_its_stored_credentials(
    mh: SharedHarness, auth: H, change: dict[str, Any], kept: bool
) -> None:
    """Secrets given for one address are never sent to another (docs/mcp.md, "Security model")."""
    mh.mcp.servers["http://127.0.0.1:10/mcp"] = [McpTool(name="search", description="s")]
    with mh.mcp_client() as c:
        s = create(c, auth, credentials={"headers": {"Authorization": SECRET}})
        r = c.patch(f"/api/mcps/{s['id']}", json=change, headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["hasCredentials"] is kept
        assert c.get(f"/api/mcps/{s['id']}", headers=auth).json()["hasCredentials"] is kept
        mh.mcp.seen.clear()
        assert c.post(f"/api/mcps/{s['id']}/test", headers=auth).json()["ok"] is True
        sent = mh.mcp.seen[-1].headers
        if "credentials" in change:
            assert sent == {"X-New": "n"}
        else:
            assert ("Authorization" in sent) is kept
            assert SECRET not in str(sent) if not kept else sent["Authorization"] == SECRET


def test_moving_a_stdio_server_drops_its_env(mh: SharedHarness, auth: H) -> None:
    with mh.mcp_client() as c:
        s = create(
            c,
            auth,
            transport="stdio",
            url=None,
            command="mcp-docs",
            args=["--safe"],
            credentials={"env": {"DOCS_TOKEN": "t0p-s3cret"}},
        )
        assert s["hasCredentials"] is True
        r = c.patch(f"/api/mcps/{s['id']}", json={"args": ["--safe"]}, headers=auth)
        assert r.json()["hasCredentials"] is True  # the same arguments
        r = c.patch(f"/api/mcps/{s['id']}", json={"args": ["--other"]}, headers=auth)
        assert r.json()["hasCredentials"] is False
        s = create(
            c,
            auth,
            name="Two",
            transport="stdio",
            url=None,
            command="mcp-docs",
            credentials={"env": {"DOCS_TOKEN": "t0p-s3cret"}},
        )
        r = c.patch(f"/api/mcps/{s['id']}", json={"command": "something-else"}, headers=auth)
        assert r.json()["hasCredentials"] is False


class _Redirects(BaseHTTPRequestHandler):
    """Every request: 307 to another origin (the same port of another host name),
    to a path that carries a key: the SDK follows redirects within an origin only."""

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        assert isinstance(self.server, ThreadingHTTPServer)
        port = self.server.server_port
        self.send_response(307)
        self.send_header("Location", f"http://localhost:{port}/{REDIRECT_PATH}/mcp?k=1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def log_message(self, *_: Any) -> None:
        pass


REDIRECT_PATH = "path-key-7c1f9a0e5b"


@pytest.fixture
def redirecting() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirects)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_a_redirect_is_not_followed_and_its_error_names_the_host_only(
    open_settings: Settings,
    auth: H,
    redirecting: str,
    transport: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The real MCP client (not the double): the SDK's own words repeat the whole
    redirect target, which can carry a key in its path; the answer and the log
    name its host only."""
    with Harness(open_settings).client() as c, caplog.at_level(logging.INFO):
        s = create(c, auth, transport=transport, url=f"{redirecting}/mcp")
        body = c.post(f"/api/mcps/{s['id']}/test", headers=auth).json()
    assert body["ok"] is False
    assert REDIRECT_PATH not in body["error"]
    if transport == "streamable_http":  # the SSE transport says "HTTP 307"
        assert "redirect (to http://localhost:" in body["error"], body["error"]
    assert REDIRECT_PATH not in caplog.text


def test_an_attachment_makes_its_chosen_tools_wait_for_approval(mh: SharedHarness, auth: H) -> None:
    """docs/tools.md, "Approval before a call": ``requireApproval`` on the attachment."""
    with mh.mcp_client() as c:
        s = create(c, auth)
        agent = c.post("/api/agents", json={"name": "Careful"}, headers=auth).json()["id"]
        r = c.post(
            f"/api/agents/{agent}/mcps",
            json={"mcpServerId": s["id"], "requireApproval": ["delete_all"]},
            headers=auth,
        )
        assert r.status_code in (200, 201), r.text
        assert r.json()["requireApproval"] == ["delete_all"]
        listed = c.get(f"/api/agents/{agent}/mcps", headers=auth).json()
        assert [a["requireApproval"] for a in listed] == [["delete_all"]]
        thread = c.post("/api/threads", json={"agentId": agent}, headers=auth).json()["id"]
        path = f"/api/threads/{thread}/messages"

        # a tool not named runs at once
        r = c.post(path, json={"content": 'call docs-server__search {"q": "x"}'}, headers=auth)
        assert "tool_result" in names(parse(r.text))
        assert mh.mcp.calls == [("search", {"q": "x"})]

        r = c.post(path, json={"content": "call docs-server__delete_all {}"}, headers=auth)
        events = parse(r.text)
        assert names(events) == ["meta", "requires_action", "done"]
        [waiting] = events[1].data["toolCalls"]
        assert (waiting["kind"], waiting["name"]) == ("approval", "docs-server__delete_all")
        assert len(mh.mcp.calls) == 1  # not called

        answer = {"toolCallId": waiting["id"], "approved": True}
        r = c.post(path, json={"content": "", "toolApprovals": [answer]}, headers=auth)
        assert r.status_code == 200, r.text
        assert names(parse(r.text))[:4] == ["meta", "tool_call", "tool_executing", "tool_result"]
        assert mh.mcp.calls[-1] == ("delete_all", {})

        # attaching again without the list: no tool waits any more
        c.post(f"/api/agents/{agent}/mcps", json={"mcpServerId": s["id"]}, headers=auth)
        assert c.get(f"/api/agents/{agent}/mcps", headers=auth).json()[0]["requireApproval"] == []
        r = c.post(path, json={"content": "call docs-server__delete_all {}"}, headers=auth)
        assert "requires_action" not in names(parse(r.text))
        assert len(mh.mcp.calls) == 3
