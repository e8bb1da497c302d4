"""OAuth 2.1 of MCP servers (docs/security.md, use_cases/mcp_oauth.py) with a fake
network: the authorization URL, PKCE, the single-use, expiring, server-bound state,
the client registered once, whose tokens a caller gets, refresh and its races."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import pytest

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import McpServer, Principal
from agentsvc_core.errors import InvalidInput, InvalidState, PermissionDenied
from agentsvc_core.ports.oauth import AuthServer, ClientRegistration, TokenSet
from agentsvc_core.use_cases import mcp_oauth
from agentsvc_core.use_cases.mcp_oauth import McpOAuth, user_key
from tests.unit.turn_world import T0, Clock

ORG = "org-oauth"
ALICE = Principal(org_id=ORG, method="jwt", user_id="alice")
BOB = Principal(org_id=ORG, method="jwt", user_id="bob")
KEY = Principal(org_id=ORG, method="api_key")
BOX = AesGcmBox([("k1", b"\x05" * 32)])
AUTH = AuthServer(
    resource="https://mcp.example/mcp",
    issuer="https://auth.example",
    authorization_endpoint="https://auth.example/authorize",
    token_endpoint="https://auth.example/token",
    registration_endpoint="https://auth.example/register",
    scopes=("read", "write"),
)


class Network:
    """Records every call; ``tokens`` are what exchange and refresh answer next."""

    def __init__(self, auth: AuthServer = AUTH) -> None:
        self.auth = auth
        self.discovered: list[str] = []
        self.registered: list[tuple[AuthServer, str]] = []
        self.exchanged: list[dict[str, Any]] = []
        self.refreshed: list[str] = []
        self.refreshed_with: list[tuple[AuthServer, ClientRegistration]] = []
        self.tokens: list[TokenSet] = []
        self.before_refresh: Any = None
        self.revoked: list[tuple[AuthServer, ClientRegistration, str, str]] = []
        self.revoke_answers = True

    async def discover(self, resource_url: str) -> AuthServer:
        self.discovered.append(resource_url)
        return self.auth

    async def register(self, server: AuthServer, redirect_uri: str) -> ClientRegistration:
        self.registered.append((server, redirect_uri))
        return ClientRegistration(client_id=f"client-{len(self.registered)}", client_secret="cs")

    async def exchange(
        self,
        server: AuthServer,
        client: ClientRegistration,
        *,
        code: str,
        verifier: str,
        redirect_uri: str,
    ) -> TokenSet:
        self.exchanged.append(
            {
                "server": server,
                "client": client,
                "code": code,
                "verifier": verifier,
                "redirect_uri": redirect_uri,
            }
        )
        return self.tokens.pop(0)

    async def refresh(
        self, server: AuthServer, client: ClientRegistration, refresh_token: str
    ) -> TokenSet:
        self.refreshed.append(refresh_token)
        self.refreshed_with.append((server, client))
        if self.before_refresh is not None:
            await self.before_refresh()
        return self.tokens.pop(0)

    async def revoke(
        self, server: AuthServer, client: ClientRegistration, token: str, hint: str
    ) -> bool:
        self.revoked.append((server, client, token, hint))
        return self.revoke_answers


def a_server(**over: Any) -> McpServer:
    server = McpServer(
        id=uuid.uuid4(),
        org_id=ORG,
        name="Tracker",
        slug="tracker",
        transport="streamable_http",
        url="https://mcp.example/mcp",
        command=None,
        args=(),
        credentials=None,
        allowed_tools=None,
        status="active",
        tools_cache=(),
        created_at=T0,
        updated_at=T0,
    )
    return msgspec.structs.replace(server, **over)


class Setup:
    def __init__(self, auth: AuthServer = AUTH) -> None:
        self.storage = MemoryStorage()
        self.net = Network(auth)
        self.clock = Clock()
        self.oauth = McpOAuth(
            self.storage.secrets, self.net, BOX, self.clock, "https://svc.example/"
        )

    async def authorized(
        self, who: Principal, server: McpServer, tokens: TokenSet
    ) -> tuple[str, str]:
        started = await self.oauth.start(who, server)
        self.net.tokens.append(tokens)
        return await self.oauth.callback(server.id, started.state, "the-code")


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_users_authorize_for_themselves_and_api_keys_for_the_organization() -> None:
    assert user_key(ALICE) == "user:alice"
    assert user_key(KEY) == "org"


async def test_start_sends_the_user_to_the_authorization_endpoint_with_pkce() -> None:
    s = Setup()
    server = a_server()
    started = await s.oauth.start(ALICE, server)
    url = urlsplit(started.redirect_url)
    assert f"{url.scheme}://{url.netloc}{url.path}" == "https://auth.example/authorize"
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    redirect = f"https://svc.example/api/mcps/{server.id}/oauth/callback"
    assert query == {
        "response_type": "code",
        "client_id": "client-1",
        "redirect_uri": redirect,
        "code_challenge": query["code_challenge"],
        "code_challenge_method": "S256",
        "state": started.state,
        "resource": "https://mcp.example/mcp",
        "scope": "read write",
    }
    assert s.oauth.redirect_uri(server) == redirect
    assert s.net.discovered == ["https://mcp.example/mcp"]
    assert s.net.registered == [(AUTH, redirect)]
    assert started.expires_at == T0 + timedelta(minutes=10)
    # the state: the organization, then 32 random bytes
    org_part, random_part = started.state.split(".")
    assert org_part == b64(ORG.encode())
    assert len(random_part) == 43
    # the challenge is the S256 of the verifier the callback sends
    s.net.tokens.append(TokenSet(access_token="at"))
    await s.oauth.callback(server.id, started.state, "code-1")
    (exchange,) = s.net.exchanged
    verifier = exchange["verifier"]
    assert len(verifier) == 64  # 48 random bytes
    assert query["code_challenge"] == b64(hashlib.sha256(verifier.encode()).digest())
    assert (exchange["code"], exchange["redirect_uri"], exchange["client"].client_id) == (
        "code-1",
        redirect,
        "client-1",
    )
    assert exchange["server"] == AUTH


async def test_two_starts_make_different_states_and_verifiers() -> None:
    s = Setup()
    server = a_server()
    one, two = await s.oauth.start(ALICE, server), await s.oauth.start(ALICE, server)
    assert one.state != two.state
    c1 = parse_qs(urlsplit(one.redirect_url).query)["code_challenge"]
    c2 = parse_qs(urlsplit(two.redirect_url).query)["code_challenge"]
    assert c1 != c2


async def test_an_endpoint_with_a_query_gets_the_parameters_appended() -> None:
    s = Setup(
        msgspec.structs.replace(AUTH, authorization_endpoint="https://a.example/o?x=1", scopes=())
    )
    started = await s.oauth.start(ALICE, a_server())
    assert started.redirect_url.startswith("https://a.example/o?x=1&response_type=code&")
    assert "scope=" not in started.redirect_url


async def test_the_client_is_registered_once_per_server_and_issuer() -> None:
    s = Setup()
    server = a_server()
    await s.oauth.start(ALICE, server)
    await s.oauth.start(BOB, server)
    assert len(s.net.registered) == 1
    await s.oauth.start(ALICE, a_server())  # another server
    assert len(s.net.registered) == 2
    s.net.auth = msgspec.structs.replace(AUTH, issuer="https://other.example")
    await s.oauth.start(ALICE, server)  # another issuer
    assert len(s.net.registered) == 3


async def test_without_dynamic_registration_the_server_is_refused() -> None:
    s = Setup(msgspec.structs.replace(AUTH, registration_endpoint=None))
    with pytest.raises(InvalidInput) as info:
        await s.oauth.start(ALICE, a_server())
    assert (info.value.field, info.value.problem) == (
        "url",
        "the server's authorization server offers no dynamic client registration",
    )


@pytest.mark.parametrize(
    "over", [{"transport": "stdio", "url": None, "command": "x"}, {"url": None}, {"url": ""}]
)
async def test_oauth_is_for_http_servers_only(over: dict[str, Any]) -> None:
    s = Setup()
    with pytest.raises(InvalidInput) as info:
        await s.oauth.start(ALICE, a_server(**over))
    assert (info.value.field, info.value.problem) == (
        "transport",
        "OAuth applies to HTTP MCP servers only",
    )
    assert s.net.discovered == []


async def test_the_callback_keeps_the_tokens_for_the_user_who_started() -> None:
    s = Setup()
    server = a_server()
    assert await s.authorized(ALICE, server, TokenSet(access_token="alice-at")) == (
        ORG,
        "user:alice",
    )
    assert await s.oauth.bearer(ALICE, server) == "alice-at"
    assert await s.oauth.bearer(BOB, server) is None
    assert await s.oauth.bearer(KEY, server) is None
    assert await s.oauth.bearer(ALICE, a_server()) is None


async def test_a_state_is_single_use() -> None:
    s = Setup()
    server = a_server()
    started = await s.oauth.start(ALICE, server)
    s.net.tokens.append(TokenSet(access_token="at"))
    await s.oauth.callback(server.id, started.state, "c")
    with pytest.raises(InvalidState, match=r"^unknown or already used OAuth state$"):
        await s.oauth.callback(server.id, started.state, "c")


async def test_a_state_expires_after_ten_minutes() -> None:
    s = Setup()
    server = a_server()
    started = await s.oauth.start(ALICE, server)
    s.clock.advance(600)
    s.net.tokens.append(TokenSet(access_token="at"))
    await s.oauth.callback(server.id, started.state, "c")  # at the expiry: still valid
    late = await s.oauth.start(ALICE, server)
    s.clock.advance(600.001)
    with pytest.raises(InvalidState, match=r"^the OAuth state has expired; start again$"):
        await s.oauth.callback(server.id, late.state, "c")


async def test_a_state_is_bound_to_its_server() -> None:
    s = Setup()
    started = await s.oauth.start(ALICE, a_server())
    with pytest.raises(InvalidState, match=r"^the OAuth state belongs to another server$"):
        await s.oauth.callback(uuid.uuid4(), started.state, "c")
    assert s.net.exchanged == []


@pytest.mark.parametrize("state", ["", "!!!.x", "not-base64-\u00e9", b64(b"\xff\xfe") + ".x"])
async def test_a_malformed_or_unknown_state_is_refused(state: str) -> None:
    s = Setup()
    with pytest.raises(InvalidState, match=r"^unknown( or already used)? OAuth state$"):
        await s.oauth.callback(uuid.uuid4(), state, "c")


async def test_a_state_that_does_not_decode_is_unknown() -> None:
    s = Setup()
    with pytest.raises(InvalidState, match=r"^unknown OAuth state$"):
        await s.oauth.callback(uuid.uuid4(), b64(b"\xff") + ".x", "c")


def test_base64url_drops_only_the_padding() -> None:
    assert mcp_oauth._b64(b"\x00\x00\x17") == "AAAX"  # ends with X: kept
    assert mcp_oauth._b64(b"\xff") == "_w"


async def test_a_state_of_another_organization_is_unknown() -> None:
    s = Setup()
    server = a_server()
    started = await s.oauth.start(ALICE, server)
    forged = b64(b"org-other") + "." + started.state.split(".")[1]
    with pytest.raises(InvalidState, match="unknown"):
        await s.oauth.callback(server.id, forged, "c")


async def test_tokens_granted_before_the_server_moved_are_not_sent() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, TokenSet(access_token="at"))
    moved = msgspec.structs.replace(server, url="https://elsewhere.example/mcp")
    assert await s.oauth.bearer(ALICE, moved) is None


def expiring(
    access: str, *, in_s: float, refresh: str | None = "rt", lifetime: float | None = None
) -> TokenSet:
    expires = T0 + timedelta(seconds=in_s)
    issued = None if lifetime is None else expires - timedelta(seconds=lifetime)
    return TokenSet(
        access_token=access, refresh_token=refresh, expires_at=expires, issued_at=issued
    )


async def test_a_token_is_refreshed_within_a_minute_of_expiry() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, expiring("at-1", in_s=3600))
    s.clock.advance(3600 - 61)
    assert await s.oauth.bearer(ALICE, server) == "at-1"
    s.clock.advance(1)  # 60 s before expiry
    s.net.tokens.append(expiring("at-2", in_s=7200, refresh=None))
    assert await s.oauth.bearer(ALICE, server) == "at-2"
    assert s.net.refreshed == ["rt"]
    assert s.net.refreshed_with == [
        (AUTH, ClientRegistration(client_id="client-1", client_secret="cs"))
    ]
    # the server kept the old refresh token: the next refresh sends it again
    s.clock.advance(7200)
    s.net.tokens.append(expiring("at-3", in_s=99_999, refresh="rt-new"))
    assert await s.oauth.bearer(ALICE, server) == "at-3"
    assert s.net.refreshed == ["rt", "rt"]
    s.clock.advance(99_999)
    s.net.tokens.append(expiring("at-4", in_s=200_000))
    assert await s.oauth.bearer(ALICE, server) == "at-4"
    assert s.net.refreshed == ["rt", "rt", "rt-new"]


async def test_a_short_lived_token_is_refreshed_at_half_its_lifetime() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, expiring("at-1", in_s=40, lifetime=40))
    s.clock.advance(19)
    assert await s.oauth.bearer(ALICE, server) == "at-1"
    s.clock.advance(1)
    s.net.tokens.append(expiring("at-2", in_s=1000))
    assert await s.oauth.bearer(ALICE, server) == "at-2"


async def test_a_token_without_expiry_is_never_refreshed() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, TokenSet(access_token="forever", refresh_token="rt"))
    s.clock.advance(10**8)
    assert await s.oauth.bearer(ALICE, server) == "forever"
    assert s.net.refreshed == []


async def test_an_expired_token_without_refresh_token_means_authorize_again() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, expiring("at", in_s=10, refresh=None))
    s.clock.advance(10)
    assert await s.oauth.bearer(ALICE, server) is None


async def test_concurrent_callers_refresh_once() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, expiring("at-1", in_s=30))
    s.net.tokens.append(expiring("at-2", in_s=5000))
    got = await asyncio.gather(*(s.oauth.bearer(ALICE, server) for _ in range(3)))
    assert got == ["at-2"] * 3
    assert s.net.refreshed == ["rt"]


async def test_a_refresh_lost_to_another_process_uses_what_it_stored() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, expiring("at-1", in_s=30))
    other = McpOAuth(s.storage.secrets, s.net, BOX, s.clock, "https://svc.example")

    async def other_process_first() -> None:
        s.net.before_refresh = None
        s.net.tokens.insert(0, expiring("theirs", in_s=5000))
        assert await other.bearer(ALICE, server) == "theirs"

    s.net.before_refresh = other_process_first
    s.net.tokens.append(expiring("mine", in_s=5000))
    assert await s.oauth.bearer(ALICE, server) == "theirs"
    assert await s.oauth.bearer(ALICE, server) == "theirs"


async def test_forget_drops_the_tokens_and_client_of_that_server_only() -> None:
    s = Setup()
    server, other = a_server(), a_server()
    await s.authorized(ALICE, server, TokenSet(access_token="a"))
    await s.authorized(KEY, server, TokenSet(access_token="k"))
    await s.authorized(ALICE, other, TokenSet(access_token="o"))
    await s.oauth.forget(ORG, server.id)
    assert await s.oauth.bearer(ALICE, server) is None
    assert await s.oauth.bearer(KEY, server) is None
    assert await s.oauth.bearer(ALICE, other) == "o"
    await s.oauth.start(ALICE, server)
    assert len(s.net.registered) == 3  # registered again after forget


async def test_a_refresh_lost_to_a_forget_answers_no_token() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, expiring("at-1", in_s=30))

    async def forgotten() -> None:
        await s.oauth.forget(ORG, server.id)  # the server was deleted meanwhile

    s.net.before_refresh = forgotten
    s.net.tokens.append(expiring("late", in_s=5000))
    assert await s.oauth.bearer(ALICE, server) is None


async def test_the_callback_base_loses_only_its_trailing_slash() -> None:
    s = Setup()
    oauth = McpOAuth(s.storage.secrets, s.net, BOX, s.clock, "https://svc.example/X/")
    server = a_server()
    assert oauth.redirect_uri(server) == (
        f"https://svc.example/X/api/mcps/{server.id}/oauth/callback"
    )


async def test_a_published_chats_visitor_uses_no_grant_and_starts_none() -> None:
    """The organization acting for a visitor (docs/publishing.md): the
    organization's grant is not the visitor's, and no authorization starts."""
    s = Setup()
    server = a_server()
    await s.authorized(KEY, server, TokenSet(access_token="org-at"))
    assert await s.oauth.bearer(KEY, server) == "org-at"
    visitor = Principal.for_visitor(ORG, "anon-1")
    assert (visitor.method, visitor.acts_for_org, visitor.user_id) == ("api_key", True, None)
    assert (visitor.org_id, visitor.visitor_id, visitor.role) == (ORG, "anon-1", "admin")
    assert await s.oauth.bearer(visitor, server) is None
    with pytest.raises(PermissionDenied):
        await s.oauth.start(visitor, server)


# --- whether the caller is connected, and disconnecting ---------------------------------


async def test_the_status_is_the_callers_grant_and_says_no_token() -> None:
    s = Setup()
    server = a_server()
    nothing = mcp_oauth.GrantStatus(connected=False)
    assert await s.oauth.status(ALICE, server) == nothing
    tokens = msgspec.structs.replace(expiring("alice-at", in_s=3600), scope="read write")
    await s.authorized(ALICE, server, tokens)
    assert await s.oauth.status(ALICE, server) == mcp_oauth.GrantStatus(
        connected=True, expires_at=T0 + timedelta(seconds=3600), scope="read write"
    )
    assert await s.oauth.status(BOB, server) == nothing
    assert await s.oauth.status(KEY, server) == nothing
    assert await s.oauth.status(ALICE, a_server()) == nothing
    visitor = Principal.for_visitor(ORG, "anon-1")
    await s.authorized(KEY, server, TokenSet(access_token="org-at"))
    assert await s.oauth.status(KEY, server) == mcp_oauth.GrantStatus(connected=True)
    assert await s.oauth.status(visitor, server) == nothing
    # what it may tell: no token, no client
    assert mcp_oauth.GrantStatus.__struct_fields__ == ("connected", "expires_at", "scope")


async def test_an_expired_grant_is_connected_while_it_can_be_refreshed() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, expiring("at", in_s=10))
    await s.authorized(BOB, server, expiring("at", in_s=10, refresh=None))
    for who in (ALICE, BOB):
        assert (await s.oauth.status(who, server)).connected is True
    s.clock.advance(9)
    assert (await s.oauth.status(BOB, server)).connected is True
    s.clock.advance(1)  # expires now: without a refresh token, authorize again
    assert (await s.oauth.status(ALICE, server)).connected is True
    assert await s.oauth.status(BOB, server) == mcp_oauth.GrantStatus(connected=False)
    assert s.net.refreshed == []  # asking refreshes nothing


async def test_a_grant_made_where_the_server_was_is_not_connected() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(ALICE, server, TokenSet(access_token="at"))
    moved = msgspec.structs.replace(server, url="https://elsewhere.example/mcp")
    assert (await s.oauth.status(ALICE, moved)).connected is False
    assert (await s.oauth.status(ALICE, server)).connected is True


async def test_disconnect_forgets_the_callers_grant_only() -> None:
    s = Setup()
    server, other = a_server(), a_server()
    await s.authorized(ALICE, server, TokenSet(access_token="alice-at"))
    await s.authorized(BOB, server, TokenSet(access_token="bob-at"))
    await s.authorized(ALICE, other, TokenSet(access_token="alice-other"))
    assert await s.oauth.disconnect(KEY, server) is False
    assert await s.oauth.disconnect(ALICE, server) is True
    assert await s.oauth.bearer(ALICE, server) is None
    assert (await s.oauth.status(ALICE, server)).connected is False
    assert await s.oauth.bearer(BOB, server) == "bob-at"
    assert await s.oauth.bearer(ALICE, other) == "alice-other"
    assert await s.oauth.disconnect(ALICE, server) is False  # again: nothing to forget
    # the registered client stays: the next authorization reuses it
    await s.authorized(ALICE, server, TokenSet(access_token="alice-at-2"))
    assert len(s.net.registered) == 2  # one per server
    assert await s.oauth.bearer(ALICE, server) == "alice-at-2"


async def test_a_managed_providers_grant_is_found_and_dropped_by_its_provider() -> None:
    s = Setup()
    server = a_server(managed_provider="github")
    key = mcp_oauth.managed_key("github", user_key(ALICE))
    await s.oauth.keep_grant(
        ORG, key, AUTH, ClientRegistration(client_id="c"), TokenSet(access_token="gh"), server.url
    )
    assert (await s.oauth.status(ALICE, server)).connected is True
    assert (await s.oauth.status(ALICE, a_server())).connected is False
    assert await s.oauth.disconnect(ALICE, server) is True
    assert (await s.oauth.status(ALICE, server)).connected is False


async def test_a_visitor_disconnects_nothing() -> None:
    s = Setup()
    server = a_server()
    await s.authorized(KEY, server, TokenSet(access_token="org-at"))
    with pytest.raises(PermissionDenied, match=r"^a visitor of a published chat holds no grant$"):
        await s.oauth.disconnect(Principal.for_visitor(ORG, "anon-1"), server)
    assert await s.oauth.bearer(KEY, server) == "org-at"
