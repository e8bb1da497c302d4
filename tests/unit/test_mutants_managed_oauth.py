"""Managed OAuth MCP providers (use_cases/managed_oauth.py) with a fake network and
an in-test catalogue: the authorization URL, the single-use, expiring state, the
exchange, the one server per organization and provider, services, disconnect."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID, uuid4

import msgspec
import pytest

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import CachedTool, McpAttachment, McpServer, Principal
from agentsvc_core.errors import (
    Conflict,
    InvalidInput,
    InvalidState,
    McpAuthRequired,
    NotFound,
    PermissionDenied,
    Upstream,
)
from agentsvc_core.ports import McpCallResult, McpEndpoint, McpTool, ToolAuthRequired
from agentsvc_core.ports.managed_oauth import ManagedProvider, ManagedService
from agentsvc_core.ports.oauth import TokenSet
from agentsvc_core.use_cases import managed_oauth
from agentsvc_core.use_cases.managed_oauth import ManagedOAuth, auth_server, scopes_for
from agentsvc_core.use_cases.mcp_oauth import McpOAuth, managed_key, user_key
from agentsvc_core.use_cases.mcp_servers import McpServers, McpTools
from tests.contract.test_agents_contract import agent_in
from tests.unit.test_mutants_mcp_oauth import Network
from tests.unit.turn_world import T0, Clock

ORG = "org-managed"
ADMIN = Principal(org_id=ORG, method="api_key")
ALICE = Principal(org_id=ORG, method="jwt", user_id="alice", role="admin")
MEMBER = Principal(org_id=ORG, method="jwt", user_id="bob")
VISITOR = Principal(org_id=ORG, method="api_key", visitor_id="v1")
BOX = AesGcmBox([("k1", b"\x07" * 32)])

GITHUB = ManagedProvider(
    id="github",
    name="GitHub",
    mcp_url="https://mcp.example/github",
    authorization_endpoint="https://auth.example/authorize",
    token_endpoint="https://auth.example/token",
    revocation_endpoint="https://auth.example/revoke",
    scopes=("base",),
    authorize_params={"prompt": "consent"},
    services=(
        ManagedService(id="user", name="You", scopes=("read:user",), tools=("get_me",)),
        ManagedService(id="issues", name="Issues", scopes=("repo",), tools=("list_issues",)),
        ManagedService(id="code", name="Code", scopes=("repo", "code"), tools=("search_code",)),
    ),
    client_id="cid",
    client_secret="csecret",
)
SLACK = msgspec.structs.replace(
    GITHUB,
    id="slack",
    name="Slack",
    authorization_endpoint="https://slack.example/authorize?team=x",
    scopes_separator=",",
    pkce=False,
    scopes=(),
    authorize_params={},
    revocation_endpoint=None,
)
GOOGLE = msgspec.structs.replace(
    GITHUB, id="google", name="Google", client_id=None, missing=("G_ID", "G_MCP")
)
TOKENS = TokenSet(access_token="at-1", refresh_token="rt-1")


class Catalogue:
    def __init__(self, *providers: ManagedProvider) -> None:
        self.items = {p.id: p for p in providers}

    def providers(self) -> list[ManagedProvider]:
        return list(self.items.values())

    def get(self, provider_id: str) -> ManagedProvider | None:
        return self.items.get(provider_id)


class Client:
    """An MCP client: 401 unless the bearer token is ``token``."""

    def __init__(self) -> None:
        self.token = "at-1"
        self.seen: list[McpEndpoint] = []

    def _gate(self, endpoint: McpEndpoint) -> None:
        self.seen.append(endpoint)
        if endpoint.headers.get("Authorization") != f"Bearer {self.token}":
            raise McpAuthRequired("401")

    async def list_tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        self._gate(endpoint)
        return [McpTool(name=n) for n in ("get_me", "list_issues", "search_code", "other")]

    async def call_tool(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any]
    ) -> McpCallResult:
        self._gate(endpoint)
        return McpCallResult(text=f"{name} ran")

    async def aclose(self) -> None:
        return None


class Urls:
    def refusal(self, url: str) -> str | None:
        return None


class Setup:
    def __init__(self, *providers: ManagedProvider) -> None:
        self.storage = MemoryStorage()
        self.net = Network()
        self.clock = Clock()
        self.client = Client()
        self.catalogue = Catalogue(*(providers or (GITHUB, SLACK, GOOGLE)))
        self.oauth = McpOAuth(self.storage.secrets, self.net, BOX, self.clock, "https://svc/")
        self.managed = ManagedOAuth(
            self.catalogue,
            self.oauth,
            self.storage.mcps,
            self.storage.agents,
            self.storage.secrets,
            self.net,
            BOX,
            self.clock,
            "https://svc/",
        )
        self.mcps = McpServers(
            self.storage.mcps,
            self.storage.agents,
            self.client,
            BOX,
            Urls(),
            self.clock,
            allow_stdio=False,
            oauth=self.oauth,
            managed=self.managed,
        )
        self.tools = McpTools(self.mcps, self.client)

    async def agent(self) -> UUID:
        agent = agent_in(ORG)
        await self.storage.agents.add(agent)
        return agent.id

    async def connect(
        self, who: Principal = ADMIN, provider: str = "github", **kw: Any
    ) -> managed_oauth.Connected:
        started = await self.managed.start(who, provider, **kw)
        self.net.tokens.append(TOKENS)
        return await self.managed.callback(started.state, "the-code")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# --- start ---------------------------------------------------------------------------


def test_start_builds_the_authorization_url_and_keeps_a_sealed_state() -> None:
    async def go() -> None:
        s = Setup()
        started = await s.managed.start(ADMIN, "github", services=["issues", "user"])
        url = urlsplit(started.authorization_url)
        assert f"{url.scheme}://{url.netloc}{url.path}" == "https://auth.example/authorize"
        q = query(started.authorization_url)
        record = await s.storage.secrets.get(ORG, "managed_oauth_state", started.state)
        assert record is not None
        assert record.expires_at == T0 + managed_oauth.STATE_TTL == started.expires_at
        state = s.managed._records.open(
            ORG, "managed_oauth_state", started.state, record.value, managed_oauth._State
        )
        challenge = b64(hashlib.sha256(state.verifier.encode()).digest())
        assert q == {
            "prompt": "consent",
            "response_type": "code",
            "client_id": "cid",
            "redirect_uri": "https://svc/api/mcps/managed-oauth/callback",
            "state": started.state,
            "scope": "base read:user repo",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        assert state.provider == "github"
        assert state.user_key == user_key(ADMIN)
        assert state.services == ("user", "issues")  # the catalogue's order
        assert state.agent_id is None
        assert state.redirect_uri == "https://svc/api/mcps/managed-oauth/callback"
        org, _, rest = started.state.partition(".")
        assert org == b64(ORG.encode())
        assert len(rest) == 43
        assert len(state.verifier) == 64

    run(go())


def test_start_without_pkce_scopes_or_with_a_query_in_the_endpoint() -> None:
    async def go() -> None:
        s = Setup()
        started = await s.managed.start(ADMIN, "slack", services=["issues"])
        assert started.authorization_url.startswith("https://slack.example/authorize?team=x&")
        q = query(started.authorization_url)
        assert "code_challenge" not in q
        assert "code_challenge_method" not in q
        assert q["scope"] == "repo"
        bare = msgspec.structs.replace(
            SLACK, services=(ManagedService(id="a", name="A"),), authorization_endpoint="https://x/"
        )
        s2 = Setup(bare)
        q = query((await s2.managed.start(ADMIN, "slack")).authorization_url)
        assert "scope" not in q
        assert (await s2.managed.start(ADMIN, "slack")).authorization_url.startswith("https://x/?")

    run(go())


def test_start_refuses_what_it_cannot_do() -> None:
    async def go() -> None:
        s = Setup()
        with pytest.raises(PermissionDenied, match="visitor"):
            await s.managed.start(VISITOR, "github")
        with pytest.raises(NotFound, match="'nope'"):
            await s.managed.start(ADMIN, "nope")
        with pytest.raises(InvalidInput, match="Google is not configured here: set G_ID, G_MCP"):
            await s.managed.start(ADMIN, "google")
        with pytest.raises(InvalidInput, match=r"no service 'gmail' \(user, issues, code\)"):
            await s.managed.start(ADMIN, "github", services=["user", "gmail"])
        agent = await s.agent()
        with pytest.raises(PermissionDenied, match="admin"):
            await s.managed.start(MEMBER, "github", agent_id=agent)
        with pytest.raises(NotFound):
            await s.managed.start(ADMIN, "github", agent_id=uuid4())
        assert await s.storage.secrets.every(ORG) == []  # no state was kept
        # an admin user may attach
        assert (await s.managed.start(ALICE, "github", agent_id=agent)).state

    run(go())


def test_scopes_are_the_providers_then_the_services_each_once() -> None:
    assert scopes_for(GITHUB, None) == ["base", "read:user", "repo", "code"]
    assert scopes_for(GITHUB, ("code",)) == ["base", "repo", "code"]
    assert scopes_for(GITHUB, ()) == ["base"]


def test_the_provider_as_an_authorization_server() -> None:
    meta = auth_server(GITHUB)
    assert (meta.resource, meta.issuer) == ("https://mcp.example/github", "github")
    assert meta.authorization_endpoint == "https://auth.example/authorize"
    assert meta.token_endpoint == "https://auth.example/token"
    assert meta.revocation_endpoint == "https://auth.example/revoke"
    assert meta.scopes == ("base",)
    assert auth_server(msgspec.structs.replace(GITHUB, mcp_url=None)).resource == ""


# --- callback --------------------------------------------------------------------------


def test_callback_exchanges_keeps_the_grant_and_creates_the_server() -> None:
    async def go() -> None:
        s = Setup()
        agent = await s.agent()
        started = await s.managed.start(ALICE, "github", agent_id=agent, services=["issues"])
        s.net.tokens.append(TOKENS)
        done = await s.managed.callback(started.state, "the-code")
        assert (done.provider, done.agent_id) == ("github", agent)
        exchanged = s.net.exchanged[0]
        assert exchanged["code"] == "the-code"
        assert exchanged["redirect_uri"] == "https://svc/api/mcps/managed-oauth/callback"
        assert exchanged["server"] == auth_server(GITHUB)
        assert (exchanged["client"].client_id, exchanged["client"].client_secret) == (
            "cid",
            "csecret",
        )
        challenge = query(started.authorization_url)["code_challenge"]
        assert b64(hashlib.sha256(exchanged["verifier"].encode()).digest()) == challenge
        server = await s.storage.mcps.get(ORG, done.mcp_server_id)
        assert (server.name, server.slug, server.url) == ("GitHub", "github", GITHUB.mcp_url)
        assert (server.managed_provider, server.transport) == ("github", "streamable_http")
        assert (server.created_at, server.credentials, server.tools_cache) == (T0, None, ())
        attached = await s.storage.mcps.attachments(ORG, "agent", agent)
        assert [(a.mcp_id, a.services, a.allowed_tools) for a in attached] == [
            (server.id, ("issues",), None)
        ]
        # the grant is Alice's, per provider; the server's bearer is hers
        assert await s.oauth.bearer(ALICE, server) == "at-1"
        assert await s.oauth.bearer(MEMBER, server) is None
        key = managed_key("github", user_key(ALICE))
        assert await s.storage.secrets.get(ORG, "oauth_token", key) is not None
        # single use
        with pytest.raises(InvalidState, match="already used"):
            await s.managed.callback(started.state, "the-code")

    run(go())


def test_one_server_per_organization_and_provider() -> None:
    async def go() -> None:
        s = Setup()
        first = await s.connect()
        second = await s.connect(ALICE)
        assert first.mcp_server_id == second.mcp_server_id
        assert first.agent_id is None
        assert len(await s.storage.mcps.list_all(ORG)) == 1
        assert await s.storage.mcps.attachments(ORG, "agent", uuid4()) == []
        # the deployment moved the provider's MCP server: the server follows
        moved = msgspec.structs.replace(GITHUB, mcp_url="https://mcp.example/v2")
        s.catalogue.items["github"] = moved
        cached = (CachedTool(name="x"),)
        await s.storage.mcps.modify(
            ORG, first.mcp_server_id, lambda x: msgspec.structs.replace(x, tools_cache=cached)
        )
        third = await s.connect()
        server = await s.storage.mcps.get(ORG, third.mcp_server_id)
        assert third.mcp_server_id == first.mcp_server_id
        assert (server.url, server.tools_cache) == ("https://mcp.example/v2", ())
        # a plain server of the organization is not the provider's
        assert await s.managed.server_of(ORG, "slack") is None

    run(go())


def test_a_racing_callback_reuses_the_server_it_made() -> None:
    async def go() -> None:
        s = Setup()
        other = await s.connect()
        add = s.storage.mcps.add

        async def clash(server: McpServer) -> McpServer:
            raise Conflict("the resource already exists")

        found = [None, await s.storage.mcps.get(ORG, other.mcp_server_id)]

        async def server_of(org: str, provider: str) -> Any:
            return found.pop(0)

        s.storage.mcps.add = clash  # type: ignore[method-assign]
        s.managed.server_of = server_of  # type: ignore[method-assign,assignment]
        assert (await s.connect()).mcp_server_id == other.mcp_server_id
        found.extend([None, None])
        with pytest.raises(Conflict):
            await s.connect()
        s.storage.mcps.add = add  # type: ignore[method-assign]

    run(go())


def test_callback_refuses_bad_expired_or_orphaned_states() -> None:
    async def go() -> None:
        s = Setup()
        for bad in ("@@@.x", "nonsense", b64(b"\xff\xfe") + ".x"):
            with pytest.raises(InvalidState, match="unknown"):
                await s.managed.callback(bad, "code")
        started = await s.managed.start(ADMIN, "github")
        s.clock.advance(10 * 60)
        s.net.tokens.append(TOKENS)
        assert (await s.managed.callback(started.state, "c")).provider == "github"  # just in time
        started = await s.managed.start(ADMIN, "github")
        s.clock.advance(10 * 60 + 1)
        with pytest.raises(InvalidState, match="expired"):
            await s.managed.callback(started.state, "c")
        started = await s.managed.start(ADMIN, "github")
        s.catalogue.items["github"] = msgspec.structs.replace(GITHUB, missing=("X",))
        with pytest.raises(InvalidState, match="no longer configured"):
            await s.managed.callback(started.state, "c")
        started = await s.managed.start(ADMIN, "slack")
        del s.catalogue.items["slack"]
        with pytest.raises(InvalidState, match="no longer configured"):
            await s.managed.callback(started.state, "c")
        assert len(s.net.exchanged) == 1

    run(go())


# --- disconnect --------------------------------------------------------------------------


def test_disconnect_revokes_both_tokens_and_forgets_the_grant() -> None:
    async def go() -> None:
        s = Setup()
        done = await s.connect(ALICE)
        assert await s.managed.disconnect(ALICE, "github") is True
        assert [(r[2], r[3]) for r in s.net.revoked] == [
            ("rt-1", "refresh_token"),
            ("at-1", "access_token"),
        ]
        meta, client = s.net.revoked[0][0], s.net.revoked[0][1]
        assert meta.revocation_endpoint == "https://auth.example/revoke"
        assert (client.client_id, client.client_secret) == ("cid", "csecret")
        server = await s.storage.mcps.get(ORG, done.mcp_server_id)  # the server stays
        assert await s.oauth.bearer(ALICE, server) is None
        assert await s.managed.disconnect(ALICE, "github") is False  # nothing left
        assert len(s.net.revoked) == 2
        with pytest.raises(NotFound):
            await s.managed.disconnect(ALICE, "nope")

    run(go())


def test_disconnect_where_revocation_is_refused_or_impossible() -> None:
    async def go() -> None:
        s = Setup()
        await s.connect(ALICE)
        s.net.revoke_answers = False
        assert await s.managed.disconnect(ALICE, "github") is False
        assert len(s.net.revoked) == 2
        # only the access token was revoked: still revoked
        started = await s.managed.start(ALICE, "github")
        s.net.tokens.append(TokenSet(access_token="at-2"))
        await s.managed.callback(started.state, "c")
        s.net.revoke_answers = True
        assert await s.managed.disconnect(ALICE, "github") is True
        assert [(r[2], r[3]) for r in s.net.revoked[2:]] == [("at-2", "access_token")]
        # slack has no revocation endpoint: forgotten, not revoked
        await s.connect(ALICE, "slack")
        assert await s.managed.disconnect(ALICE, "slack") is False
        assert len(s.net.revoked) == 3
        slack = await s.managed.server_of(ORG, "slack")
        assert slack is not None
        assert await s.oauth.bearer(ALICE, slack) is None

    run(go())


# --- services -----------------------------------------------------------------------------


def test_services_of_an_agents_provider_server() -> None:
    async def go() -> None:
        s = Setup()
        agent = await s.agent()
        done = await s.connect(agent_id=agent, services=["issues"])
        states = await s.managed.services(ADMIN, agent, done.mcp_server_id)
        assert [(x.service.id, x.enabled) for x in states] == [
            ("user", False),
            ("issues", True),
            ("code", False),
        ]
        states = await s.managed.set_services(
            ADMIN, agent, done.mcp_server_id, {"code": True, "issues": False}
        )
        assert [(x.service.id, x.enabled) for x in states] == [
            ("user", False),
            ("issues", False),
            ("code", True),
        ]
        attached = await s.storage.mcps.attachments(ORG, "agent", agent)
        assert attached[0].services == ("code",)
        states = await s.managed.set_services(ADMIN, agent, done.mcp_server_id, {})
        assert [x.enabled for x in states] == [False, False, True]
        with pytest.raises(InvalidInput, match="gmail"):
            await s.managed.set_services(ADMIN, agent, done.mcp_server_id, {"gmail": True})
        # all on when none were chosen
        other = await s.agent()
        await s.connect(agent_id=other)
        states = await s.managed.services(ADMIN, other, done.mcp_server_id)
        assert all(x.enabled for x in states)
        states = await s.managed.set_services(ADMIN, other, done.mcp_server_id, {"user": False})
        assert [x.enabled for x in states] == [False, True, True]

    run(go())


def test_services_are_404_for_other_servers_and_agents() -> None:
    async def go() -> None:
        s = Setup()
        agent = await s.agent()
        done = await s.connect()
        with pytest.raises(NotFound):  # not attached
            await s.managed.services(ADMIN, agent, done.mcp_server_id)
        plain = await s.mcps.create(
            ADMIN,
            managed_oauth_draft(),
        )
        await s.mcps.attach(ADMIN, "agent", agent, plain.id, None)
        s.clock.advance(1)  # listed after the plain server: the search goes past it
        await s.mcps.attach(ADMIN, "agent", agent, done.mcp_server_id, None)
        with pytest.raises(NotFound):  # not a provider's
            await s.managed.services(ADMIN, agent, plain.id)
        assert len(await s.managed.services(ADMIN, agent, done.mcp_server_id)) == 3
        with pytest.raises(NotFound):
            await s.managed.services(ADMIN, uuid4(), done.mcp_server_id)
        del s.catalogue.items["github"]  # no longer in the catalogue
        with pytest.raises(NotFound):
            await s.managed.services(ADMIN, agent, done.mcp_server_id)

    run(go())


def managed_oauth_draft() -> Any:
    from agentsvc_core.use_cases.mcp_servers import McpDraft  # noqa: PLC0415

    return McpDraft(name="Plain", transport="streamable_http", url="https://plain.example/mcp")


# --- the turn -------------------------------------------------------------------------------


def attachment(services: tuple[str, ...] | None) -> McpAttachment:
    return McpAttachment(
        org_id=ORG,
        owner_kind="agent",
        owner_id=uuid4(),
        mcp_id=uuid4(),
        allowed_tools=None,
        created_at=T0,
        services=services,
    )


def test_tools_on_and_the_catalogues_tools() -> None:
    s = Setup()
    server = msgspec.structs.replace(
        run(s.storage.mcps.add(plain_server())), managed_provider="github"
    )
    everything = frozenset({"get_me", "list_issues", "search_code"})
    assert s.managed.tools_on(server, attachment(None)) == everything
    assert s.managed.tools_on(server, attachment(("issues",))) == frozenset({"list_issues"})
    assert s.managed.tools_on(server, attachment(())) == frozenset()
    unknown = msgspec.structs.replace(server, managed_provider="gone")
    assert s.managed.tools_on(unknown, attachment(())) is None
    assert s.managed.tools_on(plain_server(), attachment(())) is None
    listed = s.managed.listed_tools(server)
    assert [t.name for t in listed] == ["get_me", "list_issues", "search_code"]
    assert listed[0].description == "(a tool of GitHub: connect GitHub to use it)"
    assert s.managed.listed_tools(unknown) == ()


def plain_server() -> McpServer:
    return McpServer(
        id=uuid4(),
        org_id=ORG,
        name="P",
        slug="p",
        transport="streamable_http",
        url="https://p.example/mcp",
        command=None,
        args=(),
        credentials=None,
        allowed_tools=None,
        status="active",
        tools_cache=(),
        created_at=T0,
        updated_at=T0,
    )


def test_a_turn_offers_the_services_tools_and_challenges_without_a_grant() -> None:
    async def go() -> None:
        s = Setup()
        agent_id = await s.agent()
        agent = await s.storage.agents.get(ORG, agent_id)
        done = await s.connect(ALICE, agent_id=agent_id, services=["issues", "code"])
        names = [t.name for t in await s.tools.list_tools(ALICE, agent)]
        assert names == ["github__list_issues", "github__search_code"]  # listed by the server
        result = await s.tools.call(ALICE, agent, "github__list_issues", {}, None)  # type: ignore[arg-type]
        assert result == "list_issues ran"
        refused = await s.tools.call(ALICE, agent, "github__get_me", {}, None)  # type: ignore[arg-type]
        assert refused == "error: the tool 'github__get_me' is not allowed for this agent"
        # Bob never connected: the call is a challenge with the managed flow
        with pytest.raises(ToolAuthRequired) as caught:
            await s.tools.call(MEMBER, agent, "github__list_issues", {}, None)  # type: ignore[arg-type]
        assert caught.value.provider == "GitHub"
        assert caught.value.redirect_url.startswith("https://auth.example/authorize?")
        assert query(caught.value.redirect_url)["client_id"] == "cid"
        # a visitor cannot connect: not offered, and an error for the model if called
        assert await s.tools.list_tools(VISITOR, agent) == []
        said = await s.tools.call(VISITOR, agent, "github__list_issues", {}, None)  # type: ignore[arg-type]
        assert said.startswith("error: authorization with 'GitHub' failed: a visitor")
        # before the server could be listed, the catalogue's tools are offered
        await s.storage.mcps.modify(
            ORG, done.mcp_server_id, lambda x: msgspec.structs.replace(x, tools_cache=())
        )
        names = [t.name for t in await s.tools.list_tools(MEMBER, agent)]
        assert names == ["github__list_issues", "github__search_code"]

    run(go())


def test_a_grant_the_provider_no_longer_refreshes_is_a_challenge() -> None:
    async def go() -> None:
        s = Setup()
        agent_id = await s.agent()
        agent = await s.storage.agents.get(ORG, agent_id)
        started = await s.managed.start(ALICE, "github", agent_id=agent_id)
        s.net.tokens.append(
            TokenSet(access_token="at-1", refresh_token="rt-1", expires_at=T0, issued_at=T0)
        )
        await s.managed.callback(started.state, "c")

        async def refused() -> None:
            raise Upstream("the token endpoint answered 400 (invalid_grant)", code="OAUTH_ERROR")

        s.net.before_refresh = refused
        with pytest.raises(ToolAuthRequired):
            await s.tools.call(ALICE, agent, "github__get_me", {}, None)  # type: ignore[arg-type]

        async def down() -> None:
            raise Upstream("cannot connect", code="MCP_UNAVAILABLE")

        s.net.before_refresh = down
        said = await s.tools.call(ALICE, agent, "github__get_me", {}, None)  # type: ignore[arg-type]
        assert said == "error: cannot connect"

    run(go())


# --- the details the mutants asked about ------------------------------------------------------


def test_base64_without_padding_keeps_every_character() -> None:
    assert managed_oauth._b64(b"\x00\x00\x17") == "AAAX"
    assert managed_oauth._b64(b"\x00") == "AA"


def test_the_callback_address_drops_one_trailing_slash_only() -> None:
    s = Setup()
    managed = ManagedOAuth(
        s.catalogue,
        s.oauth,
        s.storage.mcps,
        s.storage.agents,
        s.storage.secrets,
        s.net,
        BOX,
        s.clock,
        "https://svc.X/",
    )
    started = run(managed.start(ADMIN, "github"))
    assert query(started.authorization_url)["redirect_uri"] == (
        "https://svc.X/api/mcps/managed-oauth/callback"
    )


def test_refusals_name_their_field_and_reason() -> None:
    async def go() -> None:
        s = Setup()
        with pytest.raises(InvalidInput) as bad:
            await s.managed.start(ADMIN, "google")
        assert bad.value.field == "provider"
        with pytest.raises(InvalidInput) as bad:
            await s.managed.start(ADMIN, "github", services=["gmail"])
        assert bad.value.field == "services"
        with pytest.raises(
            PermissionDenied, match=r"^attaching to an agent needs the organization's admin role$"
        ):
            await s.managed.start(MEMBER, "github", agent_id=uuid4())
        with pytest.raises(
            NotFound,
            match=r"^no managed provider's MCP server is attached to this agent with that id$",
        ):
            await s.managed.services(ADMIN, await s.agent(), uuid4())
        with pytest.raises(InvalidState, match=r"^unknown OAuth state$"):
            await s.managed.callback(b64(b"\xff\xfe") + ".x", "c")
        # the organization is what comes before the first dot
        with pytest.raises(InvalidState, match=r"^unknown or already used OAuth state$"):
            await s.managed.callback(f"{b64(ORG.encode())}.a.b", "c")
        started = await s.managed.start(ADMIN, "github")
        s.clock.advance(10 * 60 + 1)
        with pytest.raises(InvalidState, match=r"^the OAuth state has expired; start again$"):
            await s.managed.callback(started.state, "c")
        started = await s.managed.start(ADMIN, "github")
        del s.catalogue.items["github"]
        with pytest.raises(InvalidState, match=r"^the provider is no longer configured here$"):
            await s.managed.callback(started.state, "c")

    run(go())


def test_the_server_made_for_an_sse_provider_and_its_fields() -> None:
    async def go() -> None:
        s = Setup(msgspec.structs.replace(GITHUB, transport="sse"))
        done = await s.connect()
        server = await s.storage.mcps.get(ORG, done.mcp_server_id)
        assert (server.transport, server.status, server.args, server.command) == (
            "sse",
            "active",
            (),
            None,
        )
        assert (server.allowed_tools, server.updated_at) == (None, T0)

    run(go())


def test_the_racing_callback_looks_in_its_organization_for_its_provider() -> None:
    async def go() -> None:
        s = Setup()
        other = await s.connect()
        asked: list[tuple[str, str]] = []
        real = s.managed.server_of

        async def server_of(org: str, provider: str) -> Any:
            asked.append((org, provider))
            return None if len(asked) == 1 else await real(org, provider)

        async def clash(server: McpServer) -> McpServer:
            raise Conflict("the resource already exists")

        s.storage.mcps.add = clash  # type: ignore[method-assign]
        s.managed.server_of = server_of  # type: ignore[method-assign,assignment]
        assert (await s.connect()).mcp_server_id == other.mcp_server_id
        assert asked == [(ORG, "github"), (ORG, "github")]

    run(go())


def test_the_grant_is_for_the_providers_server_url_and_attached_when_asked() -> None:
    async def go() -> None:
        s = Setup()
        agent = await s.agent()
        s.clock.advance(5)
        done = await s.connect(agent_id=agent)
        [attached] = await s.storage.mcps.attachments(ORG, "agent", agent)
        assert attached.created_at == s.clock.now()
        server = await s.storage.mcps.get(ORG, done.mcp_server_id)
        assert await s.oauth.bearer(ADMIN, server) == "at-1"
        elsewhere = msgspec.structs.replace(server, url="https://other.example/mcp")
        assert await s.oauth.bearer(ADMIN, elsewhere) is None  # never sent to another URL

    run(go())


def test_disconnect_revokes_where_the_catalogue_says_now() -> None:
    async def go() -> None:
        s = Setup()
        await s.connect()
        moved = msgspec.structs.replace(GITHUB, revocation_endpoint="https://auth.example/v2")
        s.catalogue.items["github"] = moved
        assert await s.managed.disconnect(ADMIN, "github") is True
        for meta, client, _, _ in s.net.revoked:
            assert meta.revocation_endpoint == "https://auth.example/v2"
            assert meta.token_endpoint == "https://auth.example/token"
            assert client.client_id == "cid"
        # no refresh token, and the provider refuses: not revoked
        started = await s.managed.start(ADMIN, "github")
        s.net.tokens.append(TokenSet(access_token="at-9"))
        await s.managed.callback(started.state, "c")
        s.net.revoke_answers = False
        assert await s.managed.disconnect(ADMIN, "github") is False
        assert s.net.revoked[-1][2:] == ("at-9", "access_token")

    run(go())


def test_a_managed_grant_is_refreshed_before_it_expires_with_the_apps_secret() -> None:
    async def go() -> None:
        s = Setup()
        started = await s.managed.start(ALICE, "github")
        soon = T0 + timedelta(seconds=30)
        s.net.tokens.append(
            TokenSet(access_token="at-1", refresh_token="rt-1", expires_at=soon, issued_at=T0)
        )
        done = await s.managed.callback(started.state, "c")
        server = await s.storage.mcps.get(ORG, done.mcp_server_id)
        assert await s.oauth.bearer(ALICE, server) == "at-1"
        assert s.net.refreshed == []
        s.clock.advance(20)  # within the margin (half its 30 s)
        s.net.tokens.append(TokenSet(access_token="at-2"))
        assert await s.oauth.bearer(ALICE, server) == "at-2"
        assert s.net.refreshed == ["rt-1"]
        meta, client = s.net.refreshed_with[0]
        assert meta.token_endpoint == "https://auth.example/token"
        assert (client.client_id, client.client_secret) == ("cid", "csecret")

    run(go())


def test_tools_of_without_the_providers_or_their_catalogue_entry() -> None:
    async def go() -> None:
        s = Setup()
        agent_id = await s.agent()
        done = await s.connect(agent_id=agent_id, services=["issues"])
        [item] = await s.mcps.attached(ADMIN, "agent", agent_id)
        cached = (CachedTool(name="get_me"), CachedTool(name="list_issues"))
        item = msgspec.structs.replace(
            item, server=msgspec.structs.replace(item.server, tools_cache=cached)
        )
        assert [t.name for t in s.mcps.tools_of(item)] == ["list_issues"]
        del s.catalogue.items["github"]  # a provider gone from the catalogue: no filter
        assert [t.name for t in s.mcps.tools_of(item)] == ["get_me", "list_issues"]
        s.mcps.managed = None  # no managed providers wired: the server's own tools
        assert [t.name for t in s.mcps.tools_of(item)] == ["get_me", "list_issues"]
        assert done.agent_id == agent_id

    run(go())


def test_a_plain_server_that_wants_oauth_challenges_with_its_own_flow() -> None:
    async def go() -> None:
        s = Setup()
        agent_id = await s.agent()
        agent = await s.storage.agents.get(ORG, agent_id)
        plain = await s.mcps.create(ADMIN, managed_oauth_draft())
        cached = (CachedTool(name="search"),)
        await s.storage.mcps.modify(
            ORG, plain.id, lambda x: msgspec.structs.replace(x, tools_cache=cached)
        )
        await s.mcps.attach(ADMIN, "agent", agent_id, plain.id, None)
        with pytest.raises(ToolAuthRequired) as caught:
            await s.tools.call(ALICE, agent, "plain__search", {}, None)  # type: ignore[arg-type]
        assert caught.value.provider == "Plain"
        assert caught.value.redirect_url.startswith(s.net.auth.authorization_endpoint + "?")

    run(go())
