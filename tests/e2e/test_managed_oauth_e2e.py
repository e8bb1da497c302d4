"""A managed GitHub connection end to end: the real service process, with the
"github" provider pointed by its environment variables at the loopback OAuth
server (tests/oauth_server.py) and at a loopback MCP server that wants the token
the OAuth server issued (tests/mcp_servers), and a fake model provider that
records what the model was offered (tests/fakes/providers.py).

start -> the browser follows the authorization URL -> callback -> a turn calls
the provider's tool with the token; turning a service off removes its tools from
the model's offer; disconnect revokes the grant at the provider (RFC 7009) and
the next turn that needs it emits ``auth_challenge``. Nothing leaves loopback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.e2e.secret_scan import SCAN
from tests.e2e.service import Service, client, running
from tests.fakes.providers import FakeProvider, Reply, ToolCallSpec
from tests.mcp_servers.server import HttpMcpServer
from tests.oauth_server import AuthServer
from tests.sse import Event, parse
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PREFIX = "e2e-managed-github-token-secret-"
CLIENT_ID = "e2e-managed-github-client"
CLIENT_SECRET = "e2e-managed-github-client-secret-value"
PROVIDER_KEY = "e2e-managed-provider-key-0123456789"
MODEL = "claude-e2e-managed"


class World:
    def __init__(
        self, svc: Service, key: str, auth: AuthServer, mcp: HttpMcpServer, fake: FakeProvider
    ) -> None:
        self.svc, self.key, self.auth, self.mcp, self.fake = svc, key, auth, mcp, fake


@pytest.fixture(scope="module")
def world(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("managed")
    auth = AuthServer()
    auth.token_prefix = PREFIX
    auth.clients = {CLIENT_ID: CLIENT_SECRET}
    fake = FakeProvider("alpha", api_key=PROVIDER_KEY)
    # the MCP server lets through the first access token the OAuth server issues
    mcp = HttpMcpServer("streamable_http", token=f"{PREFIX}at-1")
    mcp.start()
    auth.resource = mcp.url
    key = f"ask_e2e_{uuid.uuid4().hex}"
    try:
        with serve(auth) as auth_url:
            auth.base = auth_url
            var = "AGENTSVC_MANAGED_OAUTH_GITHUB_"
            env = {
                "AGENTSVC_DATABASE_URL": pg_url,
                "AGENTSVC_BOOTSTRAP_API_KEY": key,
                "AGENTSVC_BOOTSTRAP_ORG": f"managed-{uuid.uuid4().hex[:8]}",
                "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
                "AGENTSVC_ALPHA_BASE_URL": fake.start(),
                "AGENTSVC_ALPHA_API_KEY": PROVIDER_KEY,
                f"{var}CLIENT_ID": CLIENT_ID,
                f"{var}CLIENT_SECRET": CLIENT_SECRET,
                f"{var}MCP_URL": mcp.url,
                f"{var}AUTHORIZE_URL": f"{auth_url}/as/authorize",
                f"{var}TOKEN_URL": f"{auth_url}/as/token",
                f"{var}REVOKE_URL": f"{auth_url}/as/revoke",
            }
            with running(env, log=tmp / "svc.log") as svc:
                yield World(svc, key, auth, mcp, fake)
                log = svc.log_path.read_text(errors="replace")
                for secret in (CLIENT_SECRET, *auth.issued):
                    assert secret not in log
    finally:
        mcp.stop()
        fake.stop()


def offered(fake: FakeProvider) -> set[str]:
    """The tool names the model was offered in its latest request."""
    bodies = [r.json for r in fake.requests if r.json is not None]
    return {t["name"] for t in bodies[-1].get("tools", [])}


def turn(c: httpx.Client, fake: FakeProvider, thread: str, tool: str | None) -> list[Event]:
    """A turn in which the model calls ``tool`` (none: it just answers)."""
    fake.reset()
    if tool is not None:
        fake.enqueue(Reply(text="", tool_calls=[ToolCallSpec("call_1", tool, {})]))
    r = c.post(f"/api/threads/{thread}/messages", json={"content": "go"})
    assert r.status_code == 200, r.text
    return parse(r.text)


def test_a_managed_github_connection_end_to_end(world: World) -> None:
    auth, fake = world.auth, world.fake
    SCAN.secret(CLIENT_SECRET, "a managed provider's client secret")
    with client(world.svc, world.key, timeout=60) as c:
        providers = {p["id"]: p for p in c.get("/api/mcp-registry/managed").json()}
        assert providers["github"]["available"] is True
        assert providers["google"]["available"] is False
        agent = c.post("/api/agents", json={"name": "Coder", "defaultModel": MODEL}).json()
        started = c.post(
            "/api/mcps/managed-oauth/start",
            json={"provider": "github", "agentId": agent["id"], "services": ["user", "issues"]},
        )
        assert started.status_code == 200, started.text
        query = parse_qs(urlsplit(started.json()["authorization_url"]).query)
        assert query["client_id"] == [CLIENT_ID]
        assert query["code_challenge_method"] == ["S256"]
        # the browser: to the provider, and back to the service without a bearer token
        hop = httpx.get(started.json()["authorization_url"], follow_redirects=False)
        assert hop.status_code == 302
        back = urlsplit(hop.headers["location"])
        done = httpx.get(f"{world.svc.url}{back.path}?{back.query}")
        assert done.status_code == 200, done.text
        mcp_id = done.json()["mcp_server_id"]
        for token in auth.issued:
            SCAN.secret(token, "a managed provider's access token")
            SCAN.secret(token.replace("at-", "rt-"), "a managed provider's refresh token")
        assert auth.token_requests[-1]["client_secret"] == CLIENT_SECRET
        # a replayed callback is refused
        assert httpx.get(f"{world.svc.url}{back.path}?{back.query}").status_code == 400

        thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()["id"]
        events = turn(c, fake, thread, "github__get_me")
        result = next(e for e in events if e.event == "tool_result")
        assert result.data["result"] == "octocat"  # the MCP server let the token through
        assert offered(fake) >= {"github__get_me", "github__list_issues"}
        assert not any(name.startswith("github__echo") for name in offered(fake))

        # the issues service off: its tool leaves the model's offer
        services = f"/api/agents/{agent['id']}/mcps/{mcp_id}/services"
        r = c.patch(services, json={"services": {"issues": False}})
        assert r.status_code == 200, r.text
        on = {s["id"] for s in c.get(services).json()["services"] if s["enabled"]}
        assert on == {"user"}
        turn(c, fake, thread, None)
        assert "github__list_issues" not in offered(fake)
        assert "github__get_me" in offered(fake)

        # disconnect: revoked at the provider, forgotten here
        r = c.post("/api/mcps/managed-oauth/disconnect", json={"provider": "github"})
        assert r.json() == {"ok": True, "revoked": True}
        revocation = auth.revocations[0]
        assert revocation["token"] == f"{PREFIX}rt-1"
        assert revocation["token_type_hint"] == "refresh_token"
        assert (revocation["client_id"], revocation["client_secret"]) == (CLIENT_ID, CLIENT_SECRET)
        events = turn(c, fake, thread, "github__get_me")
        challenge = next(e.data for e in events if e.event == "auth_challenge")
        assert challenge["challenge"]["redirectUrl"].startswith(f"{auth.base}/as/authorize?")
        assert events[-1].event == "done"
        answers: list[Any] = [done.text, r.text, c.get("/api/mcps").text]
        for text in answers:
            assert CLIENT_SECRET not in text
            assert not any(t in text for t in auth.issued)
