"""OAuth 2.1 for MCP servers against a local authorization server (tests/oauth_server.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import msgspec
import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_core.entities import Principal
from agentsvc_core.errors import McpAuthRequired
from agentsvc_core.ports import McpEndpoint, McpTool, SealedRecord
from agentsvc_core.use_cases.mcp_oauth import _Grant, user_key
from agentsvc_web.settings import Settings
from tests.oauth_server import AuthServer
from tests.sse import parse
from tests.web.conftest import bearer, make_jwt
from tests.web.harness import FakeMcpClient, Harness
from tests.web.live import serve

H = dict[str, str]


class AuthRequiringClient(FakeMcpClient):
    """An MCP server that answers 401 unless it gets a bearer token it issued."""

    def __init__(self, auth: AuthServer) -> None:
        super().__init__()
        self.auth = auth

    def _tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        self.seen.append(endpoint)
        token = endpoint.headers.get("Authorization", "").removeprefix("Bearer ")
        if token not in self.auth.issued:
            raise McpAuthRequired("the MCP server answered 401")
        return [McpTool(name="search", description="search")]


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    with serve(server) as url:
        server.base = url
        yield server


@pytest.fixture
def oh(settings: Settings, auth_server: AuthServer) -> Harness:
    h = Harness(
        msgspec.structs.replace(settings, allow_private_network=True, public_url="http://svc.test")
    )
    h.mcp = AuthRequiringClient(auth_server)
    h.mcp_services.mcp_client = h.mcp
    h.mcp_services.mcps._client = h.mcp
    h.mcp_services.conversation._tools._sources[0]._client = h.mcp  # type: ignore[attr-defined]
    return h


def authorize(c: Any, auth: H, mcp_id: str) -> dict[str, Any]:
    """start, then what a browser does: follow the authorization URL, come back to the callback."""
    r = c.post(f"/api/mcps/{mcp_id}/oauth/start", headers=auth)
    assert r.status_code == 200, r.text
    started = r.json()
    hop = httpx.get(started["redirectUrl"], follow_redirects=False)
    assert hop.status_code == 302
    back = urlsplit(hop.headers["location"])
    assert back.netloc == "svc.test"
    done = c.get(f"{back.path}?{back.query}")  # no Authorization header: the state authenticates
    assert done.status_code == 200, done.text
    return {**started, "callback": f"{back.path}?{back.query}"}


def register(c: Any, auth: H, base: str) -> dict[str, Any]:
    r = c.post(
        "/api/mcps",
        json={"name": "Secure Docs", "transport": "streamable_http", "url": f"{base}/mcp"},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def test_start_builds_a_pkce_s256_authorization_url(
    oh: Harness, auth: H, auth_server: AuthServer
) -> None:
    with oh.mcp_client() as c:
        s = register(c, auth, auth_server.base)
        started = c.post(f"/api/mcps/{s['id']}/oauth/start", headers=auth).json()
        url = urlsplit(started["redirectUrl"])
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert f"{url.scheme}://{url.netloc}{url.path}" == f"{auth_server.base}/as/authorize"
        assert q["response_type"] == "code"
        assert q["code_challenge_method"] == "S256"
        assert len(q["code_challenge"]) == 43
        assert q["resource"] == f"{auth_server.base}/mcp"
        assert q["redirect_uri"] == f"http://svc.test/api/mcps/{s['id']}/oauth/callback"
        assert q["client_id"] == "client-1"
        assert q["state"] == started["state"]
        assert q["scope"] == "tools"
        c.post(f"/api/mcps/{s['id']}/oauth/start", headers=auth)
        assert auth_server.registrations == 1  # the registered client is reused


def test_callback_stores_tokens_that_calls_then_use(
    oh: Harness, auth: H, auth_server: AuthServer
) -> None:
    with oh.mcp_client() as c:
        s = register(c, auth, auth_server.base)
        assert c.post(f"/api/mcps/{s['id']}/test", headers=auth).json()["ok"] is False  # 401 before
        flow = authorize(c, auth, s["id"])
        body = c.post(f"/api/mcps/{s['id']}/test", headers=auth).json()
        assert body["ok"] is True
        assert oh.mcp.seen[-1].headers["Authorization"] == "Bearer at-1"
        # replaying the callback (the state is single use) is 400
        r = c.get(flow["callback"])
        assert (r.status_code, r.json()["error"]) == (400, "BAD_REQUEST")
        assert "already used" in r.json()["detail"]
        for bad in ("?code=x&state=nonsense", "?code=x", "?error=access_denied&state=x"):
            assert c.get(f"/api/mcps/{s['id']}/oauth/callback{bad}").status_code == 400


def test_expired_state_is_400(oh: Harness, auth: H, auth_server: AuthServer, org_id: str) -> None:
    with oh.mcp_client() as c:
        s = register(c, auth, auth_server.base)
        started = c.post(f"/api/mcps/{s['id']}/oauth/start", headers=auth).json()
        state = started["state"]
        store = oh.mcp_services.storage.secrets
        old = oh.run_any(store.get, org_id, "oauth_state", state)
        past = SystemClock().now() - timedelta(minutes=1)
        oh.run_any(
            store.put, org_id, "oauth_state", state, SealedRecord(value=old.value, expires_at=past)
        )
        hop = httpx.get(started["redirectUrl"], follow_redirects=False)
        back = urlsplit(hop.headers["location"])
        r = c.get(f"{back.path}?{back.query}")
        assert r.status_code == 400
        assert "expired" in r.json()["detail"]


def test_tokens_refresh_before_expiry_once_for_concurrent_callers(
    oh: Harness, auth: H, auth_server: AuthServer, org_id: str
) -> None:
    auth_server.expires_in = 2  # refreshed in the last second of its two
    with oh.mcp_client() as c:
        s = register(c, auth, auth_server.base)
        authorize(c, auth, s["id"])
        who = Principal(org_id=org_id, method="api_key")
        server = oh.run_any(oh.mcp_services.storage.mcps.get, org_id, uuid.UUID(s["id"]))
        oauth = oh.mcp_services.oauth
        key = f"{s['id']}:{user_key(who)}"

        def refresh_due() -> bool:
            """The stored grant, judged by the service's own rule (its private parts:
            asking bearer() would refresh it)."""
            record = oh.run_any(oh.mcp_services.storage.secrets.get, org_id, "oauth_token", key)
            grant = oauth._records.open(org_id, "oauth_token", key, record.value, _Grant)
            return oauth._stale(grant.tokens)

        assert not refresh_due()
        deadline = time.monotonic() + 5
        while not refresh_due():
            assert time.monotonic() < deadline, "the token never came within its refresh margin"
            time.sleep(0.05)

        async def five() -> list[str | None]:
            return await asyncio.gather(*(oauth.bearer(who, server) for _ in range(5)))

        with c.portal() as portal:
            tokens = portal.call(five)
        assert auth_server.refreshes == 1
        assert set(tokens) == {"at-2"}
        refresh = [f for f in auth_server.token_requests if f["grant_type"] == "refresh_token"]
        assert refresh[0]["resource"] == f"{auth_server.base}/mcp"


def test_a_user_without_a_token_gets_an_auth_challenge(
    oh: Harness, auth: H, auth_server: AuthServer, org_id: str
) -> None:
    with oh.live(auth, mcp=True) as c:
        s = c.post(
            "/api/mcps",
            json={
                "name": "Secure Docs",
                "transport": "streamable_http",
                "url": f"{auth_server.base}/mcp",
            },
        ).json()
        # the organization authorizes once so the tools can be listed
        started = c.post(f"/api/mcps/{s['id']}/oauth/start").json()
        back = urlsplit(
            httpx.get(started["redirectUrl"], follow_redirects=False).headers["location"]
        )
        assert c.get(f"{back.path}?{back.query}", headers={"Authorization": ""}).status_code == 200
        assert c.post(f"/api/mcps/{s['id']}/test").json()["ok"] is True
        a = c.post("/api/agents", json={"name": "A"}).json()
        c.post(f"/api/agents/{a['id']}/mcps", json={"mcpServerId": s["id"]})
        alice = bearer(make_jwt(sub="alice", org=org_id))
        t = c.post("/api/threads", json={"agentId": a["id"]}, headers=alice).json()
        r = c.post(
            f"/api/threads/{t['id']}/messages",
            json={"content": "call secure-docs__search"},
            headers=alice,
        )
        events = parse(r.text)
        challenge = next(e.data for e in events if e.event == "auth_challenge")
        assert challenge["toolName"] == "secure-docs__search"
        assert challenge["challenge"]["provider"] == "Secure Docs"
        assert challenge["challenge"]["redirectUrl"].startswith(f"{auth_server.base}/as/authorize?")
        assert events[-1].event == "done"


def test_servers_without_s256_are_refused(oh: Harness, auth: H, auth_server: AuthServer) -> None:
    auth_server.s256 = False
    with oh.mcp_client() as c:
        s = register(c, auth, auth_server.base)
        r = c.post(f"/api/mcps/{s['id']}/oauth/start", headers=auth)
        assert r.status_code == 502
        assert r.json()["error"] == "OAUTH_ERROR"
        assert "S256" in r.json()["detail"]


def test_moving_a_server_drops_every_users_oauth_tokens(
    oh: Harness, auth: H, auth_server: AuthServer, org_id: str
) -> None:
    """A token granted for one address is never sent to another (docs/mcp.md, "Security model"):
    the PATCH drops it, and a grant bound to the old address is refused even if it
    were still stored (a callback racing the PATCH)."""
    with oh.mcp_client() as c:
        s = register(c, auth, auth_server.base)
        authorize(c, auth, s["id"])
        assert c.post(f"/api/mcps/{s['id']}/test", headers=auth).json()["ok"] is True
        store = oh.mcp_services.storage.secrets
        key = f"{s['id']}:org"
        kept = oh.run_any(store.get, org_id, "oauth_token", key)
        assert kept is not None

        moved = c.patch(
            f"/api/mcps/{s['id']}", json={"url": f"{auth_server.base}/mcp2"}, headers=auth
        )
        assert moved.status_code == 200, moved.text
        assert oh.run_any(store.get, org_id, "oauth_token", key) is None
        oh.mcp.seen.clear()
        assert c.post(f"/api/mcps/{s['id']}/test", headers=auth).json()["ok"] is False
        assert "Authorization" not in oh.mcp.seen[-1].headers

        # the old grant put back (as a racing callback would): still not sent
        oh.run_any(store.put, org_id, "oauth_token", key, kept)
        oh.mcp.seen.clear()
        assert c.post(f"/api/mcps/{s['id']}/test", headers=auth).json()["ok"] is False
        assert "Authorization" not in oh.mcp.seen[-1].headers

        # deleting the server drops its tokens too
        assert c.delete(f"/api/mcps/{s['id']}", headers=auth).status_code == 200
        assert oh.run_any(store.get, org_id, "oauth_token", key) is None


def test_each_user_sees_and_disconnects_only_its_own_grant(
    oh: Harness, auth: H, auth_server: AuthServer, org_id: str
) -> None:
    """Alice (an admin: she may test the server) and Bob (a member) of one organization."""
    alice = bearer(make_jwt(sub="alice", org=org_id, role="admin"))
    bob = bearer(make_jwt(sub="bob", org=org_id))
    with oh.mcp_client() as c:
        s = register(c, auth, auth_server.base)
        path = f"/api/mcps/{s['id']}/oauth"
        nothing = {"connected": False, "expiresAt": None, "scope": None}
        assert c.get(path, headers=alice).json() == nothing
        authorize(c, alice, s["id"])
        mine = c.get(path, headers=alice)
        assert mine.status_code == 200, mine.text
        assert mine.json()["connected"] is True
        assert mine.json()["scope"] == "tools"
        assert mine.json()["expiresAt"] is not None
        assert set(mine.json()) == {"connected", "expiresAt", "scope"}
        for secret in (*auth_server.issued, "rt-1", *auth_server.clients.values()):
            assert secret not in mine.text
        # another user of the organization, and the organization's API key, hold none
        assert c.get(path, headers=bob).json() == nothing
        assert c.get(path, headers=auth).json() == nothing
        # ... and cannot drop alice's: their disconnect drops their own (none)
        for other in (bob, auth):
            r = c.delete(path, headers=other)
            assert (r.status_code, r.json()) == (200, {"ok": True})
        assert c.get(path, headers=alice).json()["connected"] is True
        assert c.post(f"/api/mcps/{s['id']}/test", headers=alice).json()["ok"] is True

        r = c.delete(path, headers=alice)
        assert (r.status_code, r.json()) == (200, {"ok": True})
        assert c.get(path, headers=alice).json() == nothing
        oh.mcp.seen.clear()
        assert c.post(f"/api/mcps/{s['id']}/test", headers=alice).json()["ok"] is False
        assert "Authorization" not in oh.mcp.seen[-1].headers
        # disconnecting again is no error (as the managed providers' disconnect)
        r = c.delete(path, headers=alice)
        assert (r.status_code, r.json()) == (200, {"ok": True})
        # another organization's server, or none, is 404
        stranger = bearer(make_jwt(sub="alice", org=f"o-{uuid.uuid4().hex[:8]}"))
        for who, where in ((stranger, path), (alice, f"/api/mcps/{uuid.uuid4()}/oauth")):
            assert c.get(where, headers=who).status_code == 404
            assert c.delete(where, headers=who).status_code == 404


def test_a_grant_for_where_the_server_was_or_expired_for_good_is_not_connected(
    oh: Harness, auth: H, auth_server: AuthServer, org_id: str
) -> None:
    with oh.mcp_client() as c:
        s = register(c, auth, auth_server.base)
        authorize(c, auth, s["id"])
        path = f"/api/mcps/{s['id']}/oauth"
        assert c.get(path, headers=auth).json()["connected"] is True
        store, key = oh.mcp_services.storage.secrets, f"{s['id']}:org"
        oauth = oh.mcp_services.oauth
        kept = oh.run_any(store.get, org_id, "oauth_token", key)
        grant = oauth._records.open(org_id, "oauth_token", key, kept.value, _Grant)
        past = SystemClock().now() - timedelta(minutes=1)

        def keep(g: _Grant) -> None:
            sealed = SealedRecord(value=oauth._records.seal(org_id, "oauth_token", key, g))
            oh.run_any(store.put, org_id, "oauth_token", key, sealed)

        # expired, with a refresh token: still connected (the next call refreshes it)
        expired = msgspec.structs.replace(grant.tokens, expires_at=past)
        keep(msgspec.structs.replace(grant, tokens=expired))
        assert c.get(path, headers=auth).json()["connected"] is True
        # expired with nothing to refresh it with: authorize again
        dead = msgspec.structs.replace(expired, refresh_token=None)
        keep(msgspec.structs.replace(grant, tokens=dead))
        assert c.get(path, headers=auth).json()["connected"] is False
        # granted for another address than the server's now
        keep(msgspec.structs.replace(grant, mcp_url=f"{auth_server.base}/elsewhere"))
        assert c.get(path, headers=auth).json()["connected"] is False
        keep(grant)
        assert c.get(path, headers=auth).json()["connected"] is True
