"""Managed OAuth MCP providers against the local authorization server
(tests/oauth_server.py): a "github" provider pointed at it by the environment,
and a fake MCP server that wants the tokens it issued."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import msgspec
import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_core.errors import McpAuthRequired
from agentsvc_core.ports import McpEndpoint, McpTool, SealedRecord
from agentsvc_web.settings import Settings
from tests.oauth_server import AuthServer
from tests.sse import parse
from tests.web.harness import FakeMcpClient, Harness
from tests.web.live import serve

H = dict[str, str]
MCP_URL = "http://github-mcp.test/mcp/"
CLIENT_ID, CLIENT_SECRET = "gh-client-id", "gh-client-secret-do-not-show"
CALLBACK = "http://svc.test/api/mcps/managed-oauth/callback"


class GatedClient(FakeMcpClient):
    """The provider's MCP server: 401 unless the bearer token is one the
    authorization server issued and nobody revoked."""

    def __init__(self, auth: AuthServer) -> None:
        super().__init__()
        self.auth = auth

    def _tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        self.seen.append(endpoint)
        token = endpoint.headers.get("Authorization", "").removeprefix("Bearer ")
        if token not in self.auth.issued or token in self.auth.revoked:
            raise McpAuthRequired("the MCP server answered 401")
        return [McpTool(name=n, description=n) for n in ("get_me", "list_issues", "unlisted")]


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    server.clients = {CLIENT_ID: CLIENT_SECRET}
    server.resource = MCP_URL
    with serve(server) as url:
        server.base = url
        yield server


@pytest.fixture
def mo(settings: Settings, auth_server: AuthServer, monkeypatch: pytest.MonkeyPatch) -> Harness:
    env = {
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
        "MCP_URL": MCP_URL,
        "AUTHORIZE_URL": f"{auth_server.base}/as/authorize",
        "TOKEN_URL": f"{auth_server.base}/as/token",
        "REVOKE_URL": f"{auth_server.base}/as/revoke",
    }
    for name, value in env.items():
        monkeypatch.setenv(f"AGENTSVC_MANAGED_OAUTH_GITHUB_{name}", value)
    for name in ("CLIENT_ID", "CLIENT_SECRET", "MCP_URL"):
        monkeypatch.delenv(f"AGENTSVC_MANAGED_OAUTH_GOOGLE_{name}", raising=False)
    h = Harness(
        msgspec.structs.replace(settings, allow_private_network=True, public_url="http://svc.test")
    )
    h.mcp = GatedClient(auth_server)
    h.mcp_services.mcp_client = h.mcp
    h.mcp_services.mcps._client = h.mcp
    h.mcp_services.conversation._tools._sources[0]._client = h.mcp  # type: ignore[attr-defined]
    return h


def connect(c: Any, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """start, then what a browser does; the callback's answer and its URL."""
    r = c.post("/api/mcps/managed-oauth/start", json=body)
    assert r.status_code == 200, r.text
    hop = httpx.get(r.json()["authorization_url"], follow_redirects=False)
    assert hop.status_code == 302
    back = urlsplit(hop.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == CALLBACK
    callback = f"{back.path}?{back.query}"
    done = c.get(callback, headers={"Authorization": ""})  # the state authenticates it
    assert done.status_code == 200, done.text
    return done.json(), callback


def offered(h: Harness) -> set[str]:
    return {t.name for t in h.model.requests[-1].tools}


def test_the_catalogue_lists_providers_and_what_is_missing(mo: Harness, auth: H) -> None:
    with mo.live(auth, mcp=True) as c:
        r = c.get("/api/mcp-registry/managed")
        assert r.status_code == 200
        providers = {p["id"]: p for p in r.json()}
        assert {"github", "linear", "notion", "slack", "atlassian", "google"} <= set(providers)
        github = providers["github"]
        assert (github["available"], github["reason"], github["mcp_url"]) == (True, None, MCP_URL)
        assert github["authorization"]["revocation_endpoint"].endswith("/as/revoke")
        assert github["authorization"]["pkce"] is True
        google = providers["google"]
        assert [s["id"] for s in google["services"]] == ["gmail", "calendar", "drive"]
        assert google["available"] is False
        for var in ("CLIENT_ID", "CLIENT_SECRET", "MCP_URL"):
            assert f"AGENTSVC_MANAGED_OAUTH_GOOGLE_{var}" in google["reason"]
        assert CLIENT_SECRET not in r.text
        assert CLIENT_ID not in r.text


def test_start_builds_the_providers_authorization_url(
    mo: Harness, auth: H, auth_server: AuthServer
) -> None:
    with mo.live(auth, mcp=True) as c:
        r = c.post(
            "/api/mcps/managed-oauth/start", json={"provider": "github", "services": ["issues"]}
        )
        assert r.status_code == 200, r.text
        started = r.json()
        url = urlsplit(started["authorization_url"])
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert f"{url.scheme}://{url.netloc}{url.path}" == f"{auth_server.base}/as/authorize"
        assert (q["client_id"], q["redirect_uri"], q["state"]) == (
            CLIENT_ID,
            CALLBACK,
            started["state"],
        )
        assert (q["code_challenge_method"], len(q["code_challenge"])) == ("S256", 43)
        assert q["scope"] == "repo"  # the issues service's scopes only
        assert CLIENT_SECRET not in r.text
        assert c.post("/api/mcps/managed-oauth/start", json={"provider": "nope"}).status_code == 404
        google = c.post("/api/mcps/managed-oauth/start", json={"provider": "google"})
        assert google.status_code == 422
        assert "AGENTSVC_MANAGED_OAUTH_GOOGLE_CLIENT_ID" in google.json()["detail"]
        bad = c.post(
            "/api/mcps/managed-oauth/start", json={"provider": "github", "services": ["gmail"]}
        )
        assert bad.status_code == 422
        other = c.post(
            "/api/mcps/managed-oauth/start",
            json={"provider": "github", "agentId": str(uuid.uuid4())},
        )
        assert other.status_code == 404


def test_connect_use_turn_services_off_and_disconnect(
    mo: Harness, auth: H, auth_server: AuthServer
) -> None:
    with mo.live(auth, mcp=True) as c:
        agent = c.post("/api/agents", json={"name": "Coder"}).json()
        done, callback = connect(
            c, {"provider": "github", "agentId": agent["id"], "services": ["user"]}
        )
        assert (done["provider"], done["agent_id"]) == ("github", agent["id"])
        mcp_id = done["mcp_server_id"]
        # the exchange authenticated the deployment's client with its secret
        exchange = auth_server.token_requests[-1]
        assert (exchange["client_id"], exchange["client_secret"]) == (CLIENT_ID, CLIENT_SECRET)
        # the callback cannot be replayed
        assert c.get(callback, headers={"Authorization": ""}).status_code == 400
        services = c.get(f"/api/agents/{agent['id']}/mcps/{mcp_id}/services").json()
        on = {s["id"]: s["enabled"] for s in services["services"]}
        assert on == {
            "user": True,
            "repos": False,
            "issues": False,
            "pull_requests": False,
            "actions": False,
        }
        thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
        said = c.post(
            f"/api/threads/{thread['id']}/messages", json={"content": "call github__get_me"}
        )
        events = parse(said.text)
        assert (
            next(e for e in events if e.event == "tool_result")
            .data["result"]
            .startswith("get_me ran")
        )
        assert mo.mcp.seen[-1].headers["Authorization"] == f"Bearer {auth_server.issued[-1]}"
        # only the tools of the services on: not list_issues, nor a tool no service owns
        assert offered(mo) == {"github__get_me"}
        patched = c.patch(
            f"/api/agents/{agent['id']}/mcps/{mcp_id}/services",
            json={"services": {"issues": True, "user": False}},
        )
        assert patched.status_code == 200, patched.text
        assert {s["id"] for s in patched.json()["services"] if s["enabled"]} == {"issues"}
        attached = c.get(f"/api/agents/{agent['id']}/mcps").json()
        assert attached[0]["effectiveTools"] == ["list_issues"]
        c.post(f"/api/threads/{thread['id']}/messages", json={"content": "hello"})
        assert offered(mo) == {"github__list_issues"}
        # connecting again reuses the organization's server
        again, _ = connect(c, {"provider": "github"})
        assert again["mcp_server_id"] == mcp_id
        assert [s["name"] for s in c.get("/api/mcps").json()] == ["GitHub"]
        # disconnect: revoked at the provider (RFC 7009), the tokens forgotten
        r = c.post("/api/mcps/managed-oauth/disconnect", json={"provider": "github"})
        assert r.json() == {"ok": True, "revoked": True}
        revoked = auth_server.revocations
        assert {f["token_type_hint"] for f in revoked} == {"refresh_token", "access_token"}
        assert all(f["client_secret"] == CLIENT_SECRET for f in revoked)
        assert auth_server.issued[-1] in auth_server.revoked
        said = c.post(
            f"/api/threads/{thread['id']}/messages", json={"content": "call github__list_issues"}
        )
        events = parse(said.text)
        challenge = next(e.data for e in events if e.event == "auth_challenge")
        assert challenge["challenge"]["redirectUrl"].startswith(f"{auth_server.base}/as/authorize?")
        assert events[-1].event == "done"
        # nothing more to revoke
        r = c.post("/api/mcps/managed-oauth/disconnect", json={"provider": "github"})
        assert r.json() == {"ok": True, "revoked": False}
        assert (
            c.post("/api/mcps/managed-oauth/disconnect", json={"provider": "nope"}).status_code
            == 404
        )
        for text in (said.text, r.text, c.get("/api/mcps").text):
            assert not any(t in text for t in auth_server.issued)


def test_services_of_a_server_that_is_no_providers_is_404(mo: Harness, auth: H) -> None:
    with mo.live(auth, mcp=True) as c:
        agent = c.post("/api/agents", json={"name": "A"}).json()
        s = c.post(
            "/api/mcps",
            json={"name": "Plain", "transport": "streamable_http", "url": "http://plain.test/mcp"},
        ).json()
        base = f"/api/agents/{agent['id']}/mcps/{s['id']}/services"
        assert c.get(base).status_code == 404  # not attached
        c.post(f"/api/agents/{agent['id']}/mcps", json={"mcpServerId": s["id"]})
        assert c.get(base).status_code == 404  # attached, not a provider's
        done, _ = connect(c, {"provider": "github", "agentId": agent["id"]})
        base = f"/api/agents/{agent['id']}/mcps/{done['mcp_server_id']}/services"
        assert all(s["enabled"] for s in c.get(base).json()["services"])  # none chosen: all on
        assert c.patch(base, json={"services": {"gmail": True}}).status_code == 422
        unchanged = c.patch(base, json={"services": {}})  # nothing named: nothing changes
        assert all(s["enabled"] for s in unchanged.json()["services"])
        other = f"/api/agents/{uuid.uuid4()}/mcps/{done['mcp_server_id']}/services"
        assert c.get(other).status_code == 404


def test_an_expired_or_unknown_state_is_refused(mo: Harness, auth: H, org_id: str) -> None:
    with mo.live(auth, mcp=True) as c:
        started = c.post("/api/mcps/managed-oauth/start", json={"provider": "github"}).json()
        state = started["state"]
        store = mo.mcp_services.storage.secrets
        old = mo.run_any(store.get, org_id, "managed_oauth_state", state)
        past = SystemClock().now() - timedelta(minutes=1)
        mo.run_any(
            store.put,
            org_id,
            "managed_oauth_state",
            state,
            SealedRecord(value=old.value, expires_at=past),
        )
        hop = httpx.get(started["authorization_url"], follow_redirects=False)
        back = urlsplit(hop.headers["location"])
        r = c.get(f"{back.path}?{back.query}", headers={"Authorization": ""})
        assert r.status_code == 400
        assert "expired" in r.json()["detail"]
        for bad in ("?code=x&state=nonsense", "?code=x", "?error=access_denied&state=x"):
            r = c.get(f"/api/mcps/managed-oauth/callback{bad}", headers={"Authorization": ""})
            assert r.status_code == 400
