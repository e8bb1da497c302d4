"""OAuth 2.1 of an MCP server against the real process: the flow a browser makes,
and the tokens it yields never leaving the service (the secret scan checks every
answer and log line of the suite for them; tests/e2e/secret_scan.py)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.conftest import E2E_KEY
from tests.e2e.secret_scan import SCAN
from tests.e2e.service import Service, client
from tests.oauth_server import AuthServer
from tests.web.live import serve

pytestmark = pytest.mark.e2e


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    server.token_prefix = "e2e-oauth-token-secret-"
    with serve(server) as url:
        server.base = url
        yield server


def test_oauth_flow_over_http_keeps_its_tokens_inside(
    service: Service, auth_server: AuthServer
) -> None:
    with client(service, E2E_KEY, timeout=30) as c:
        mcp = c.post(
            "/api/mcps",
            json={
                "name": "OAuth Docs",
                "transport": "streamable_http",
                "url": f"{auth_server.base}/mcp",
            },
        ).json()
        started = c.post(f"/api/mcps/{mcp['id']}/oauth/start")
        assert started.status_code == 200, started.text
        hop = httpx.get(started.json()["redirectUrl"], follow_redirects=False)
        assert hop.status_code == 302
        back = urlsplit(hop.headers["location"])
        # the browser comes back without a bearer token: the state authenticates it
        done = httpx.get(f"{service.url}{back.path}?{back.query}")
        assert (done.status_code, done.json()) == (200, {"ok": True, "mcpServerId": mcp["id"]})
        for token in auth_server.issued:
            SCAN.secret(token, "an OAuth access token")
            SCAN.secret(token.replace("at-", "rt-"), "an OAuth refresh token")
        assert auth_server.issued, "no token was issued"
        # the token is used for the server (it answers 404 there: not an MCP server)
        tested = c.post(f"/api/mcps/{mcp['id']}/test").json()
        assert tested["ok"] is False
        server = c.get(f"/api/mcps/{mcp['id']}").json()
        assert not any(t in str(server) for t in auth_server.issued)
        # the key's grant is there: what it knows, never a token
        grant = c.get(f"/api/mcps/{mcp['id']}/oauth")
        assert grant.status_code == 200, grant.text
        assert (grant.json()["connected"], grant.json()["scope"]) == (True, "tools")
        assert grant.json()["expiresAt"] is not None
        # moving the server drops the user's tokens; the callback cannot be replayed
        moved = c.patch(f"/api/mcps/{mcp['id']}", json={"url": f"{auth_server.base}/elsewhere"})
        assert moved.status_code == 200
        replay = httpx.get(f"{service.url}{back.path}?{back.query}")
        assert replay.status_code == 400
        assert c.get(f"/api/mcps/{mcp['id']}/oauth").json()["connected"] is False


def test_disconnect_over_http_forgets_the_grant(service: Service, auth_server: AuthServer) -> None:
    with client(service, E2E_KEY, timeout=30) as c:
        mcp = c.post(
            "/api/mcps",
            json={
                "name": "OAuth Notes",
                "transport": "streamable_http",
                "url": f"{auth_server.base}/mcp",
            },
        ).json()
        started = c.post(f"/api/mcps/{mcp['id']}/oauth/start").json()
        back = urlsplit(
            httpx.get(started["redirectUrl"], follow_redirects=False).headers["location"]
        )
        assert httpx.get(f"{service.url}{back.path}?{back.query}").status_code == 200
        for token in auth_server.issued:
            SCAN.secret(token, "an OAuth access token")
            SCAN.secret(token.replace("at-", "rt-"), "an OAuth refresh token")
        path = f"/api/mcps/{mcp['id']}/oauth"
        assert c.get(path).json()["connected"] is True
        for _ in range(2):  # the second finds nothing to forget: still 200
            r = c.delete(path)
            assert (r.status_code, r.json()) == (200, {"ok": True})
        assert c.get(path).json() == {"connected": False, "expiresAt": None, "scope": None}
