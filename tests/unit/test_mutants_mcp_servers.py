"""MCP servers of an organization (docs/mcp.md, docs/security.md; use_cases/mcp_servers.py)
over the memory storage and a fake MCP client: validation, sealed credentials and
what moving a server drops, the endpoint a call uses, the tools cache, attachments,
and the tools an agent's turn sees and calls."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, CachedTool, McpAttachment, McpServer, Principal
from agentsvc_core.errors import InvalidInput, McpAuthRequired, NotFound, Upstream
from agentsvc_core.ports import (
    McpEndpoint,
    SecretUnreadable,
    ToolAuthRequired,
    ToolCallContext,
    ToolSetup,
)
from agentsvc_core.ports.mcp import McpCallResult, McpTool
from agentsvc_core.ports.oauth import TokenSet
from agentsvc_core.use_cases.mcp_oauth import McpOAuth
from agentsvc_core.use_cases.mcp_servers import (
    MAX_ARGS,
    MAX_CREDENTIAL_ENTRIES,
    Credentials,
    McpChanges,
    McpDraft,
    McpServers,
    McpTools,
    effective_tools,
    slugify,
)
from tests.contract.test_agents_contract import agent_in
from tests.unit.test_mutants_mcp_oauth import AUTH, Network, a_server
from tests.unit.turn_world import Clock

ORG = "org-mcp"
ADMIN = Principal(org_id=ORG, method="api_key")
ALICE = Principal(org_id=ORG, method="jwt", user_id="alice")
KEY1 = ("k1", b"\x06" * 32)
KEY2 = ("k2", b"\x07" * 32)

CTX = ToolCallContext(tool_call_id="call_1")


class Client:
    """A fake MCP client: lists ``tools``, answers calls from ``answers``."""

    def __init__(self) -> None:
        self.tools: list[McpTool] | BaseException = [McpTool(name="search", description="s")]
        self.answers: dict[str, McpCallResult | BaseException] = {}
        self.listed: list[McpEndpoint] = []
        self.calls: list[tuple[McpEndpoint, str, dict[str, Any]]] = []

    async def list_tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        self.listed.append(endpoint)
        if isinstance(self.tools, BaseException):
            raise self.tools
        return self.tools

    async def call_tool(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any]
    ) -> McpCallResult:
        self.calls.append((endpoint, name, arguments))
        answer = self.answers.get(name, McpCallResult(text=f"{name}: ok"))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def aclose(self) -> None:
        """Nothing to close: the fake opens no sessions."""


class Urls:
    def __init__(self) -> None:
        self.refuse: str | None = None
        self.asked: list[str] = []

    def refusal(self, url: str) -> str | None:
        self.asked.append(url)
        return self.refuse


class Setup:
    def __init__(self, *, allow_stdio: bool = True, oauth: bool = False) -> None:
        self.storage = MemoryStorage()
        self.client = Client()
        self.clock = Clock()
        self.urls = Urls()
        self.box = AesGcmBox([KEY1])
        self.servers = McpServers(
            self.storage.mcps,
            self.storage.agents,
            self.client,
            self.box,
            self.urls,
            self.clock,
            allow_stdio=allow_stdio,
        )
        self.net = Network()
        if oauth:
            self.servers.oauth = McpOAuth(
                self.storage.secrets, self.net, self.box, self.clock, "https://svc.example"
            )
        self.tools = McpTools(self.servers, self.client)

    async def http(self, name: str = "Tracker", **over: Any) -> McpServer:
        draft = McpDraft(name=name, transport="streamable_http", url="https://mcp.example/mcp")
        return await self.servers.create(ADMIN, msgspec.structs.replace(draft, **over))

    async def agent(self) -> Agent:
        agent = agent_in(ORG)
        await self.storage.agents.add(agent)
        return agent


def test_slugs_are_lower_case_dashed_and_bounded() -> None:
    assert slugify("My  Tracker!") == "my-tracker"
    assert slugify("--A_b--") == "a-b"
    assert slugify("!!!") == "mcp"
    assert slugify("x" * 60) == "x" * 48
    assert slugify("a" * 47 + " b") == "a" * 47
    assert slugify("!" + "a" * 60) == "a" * 48  # cut after the leading dash is gone


async def test_a_server_is_created_with_its_slug_and_sealed_credentials() -> None:
    s = Setup()
    creds = Credentials(headers={"X-Api-Key": "secret"}, env={"TOKEN": "t"})
    s.clock.advance(3)
    server = await s.http("My Tracker", credentials=creds, allowed_tools=("search",))
    assert (server.slug, server.status, server.tools_cache) == ("my-tracker", "active", ())
    assert (server.created_at, server.updated_at) == (s.clock.now(), s.clock.now())
    assert server.credentials is not None
    assert "secret" not in server.credentials
    assert s.servers.credentials_of(server) == creds
    assert await s.servers.get(ADMIN, server.id) == server
    assert await s.servers.list_all(ADMIN) == [server]
    assert server.allowed_tools == ("search",)


async def test_empty_credentials_are_not_stored() -> None:
    s = Setup()
    for creds in (None, Credentials()):
        server = await s.http(credentials=creds)
        assert server.credentials is None
        assert s.servers.credentials_of(server) == Credentials()


async def test_a_stdio_server_keeps_its_command_and_an_http_server_its_url_only() -> None:
    s = Setup()
    stdio = await s.servers.create(
        ADMIN,
        McpDraft(name="Local", transport="stdio", command="tool", url="https://x", args=("-v",)),
    )
    assert (stdio.command, stdio.url, stdio.args) == ("tool", None, ("-v",))
    http = await s.http(command="ignored")
    assert (http.command, http.url) == (None, "https://mcp.example/mcp")


async def refusal(s: Setup, draft: McpDraft) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        await s.servers.create(ADMIN, draft)
    return info.value


async def test_stdio_servers_may_be_disabled() -> None:
    error = await refusal(
        Setup(allow_stdio=False), McpDraft(name="L", transport="stdio", command="x")
    )
    assert (error.field, error.problem) == (
        "transport",
        "stdio MCP servers are disabled (AGENTSVC_ALLOW_STDIO_MCP)",
    )


async def test_the_checks_of_a_server() -> None:
    s = Setup()
    stdio = McpDraft(name="L", transport="stdio", command="x")
    http = McpDraft(name="H", transport="streamable_http", url="https://mcp.example/")
    cases: list[tuple[McpDraft, str]] = [
        (msgspec.structs.replace(http, name=" "), "name"),
        (msgspec.structs.replace(stdio, command=None), "command"),
        (msgspec.structs.replace(stdio, command="x" * 4097), "command"),
        (msgspec.structs.replace(stdio, command="  "), "command"),
        (msgspec.structs.replace(http, url="https://x/" + "a" * (4096 - 9)), "url"),
        (msgspec.structs.replace(http, url=None), "url"),
        (msgspec.structs.replace(http, url="https://a b"), "url"),
        (msgspec.structs.replace(http, url="https://x/" + "a" * 4096), "url"),
        (msgspec.structs.replace(http, args=("a",) * (MAX_ARGS + 1)), "args"),
        (msgspec.structs.replace(http, args=("x" * 4097,)), "args"),
        (msgspec.structs.replace(http, allowed_tools=("",)), "allowed_tools"),
        (msgspec.structs.replace(http, allowed_tools=("x" * 201,)), "allowed_tools"),
    ]
    for draft, field in cases:
        assert (await refusal(s, draft)).field == field, draft
    assert (await refusal(s, msgspec.structs.replace(stdio, command=""))).problem == (
        "is required for the stdio transport"
    )
    assert (await refusal(s, msgspec.structs.replace(http, url=""))).problem == (
        "is required for the streamable_http transport"
    )
    assert (await refusal(s, msgspec.structs.replace(http, args=("a",) * 65))).problem == (
        "at most 64 arguments"
    )
    await s.servers.create(ADMIN, msgspec.structs.replace(http, url="https://x/" + "a" * 4086))
    await s.servers.create(ADMIN, msgspec.structs.replace(http, args=("a",) * MAX_ARGS))
    await s.servers.create(ADMIN, msgspec.structs.replace(http, allowed_tools=("x" * 200,)))
    await s.servers.create(ADMIN, msgspec.structs.replace(stdio, command="x" * 4096))
    assert await s.servers.list_all(ADMIN) != []


async def test_a_url_the_policy_refuses_is_refused_with_its_reason() -> None:
    s = Setup()
    s.urls.refuse = "a private address"
    error = await refusal(
        s, McpDraft(name="H", transport="streamable_http", url="https://10.0.0.1/")
    )
    assert (error.field, error.problem) == ("url", "a private address")
    assert s.urls.asked == ["https://10.0.0.1/"]


async def test_the_checks_of_credentials() -> None:
    s = Setup()
    many = Credentials(
        headers={f"h{i}": "v" for i in range(MAX_CREDENTIAL_ENTRIES)}, env={"E": "v"}
    )
    error = await refusal(
        s,
        McpDraft(name="H", transport="streamable_http", url="https://m.example/", credentials=many),
    )
    assert (error.field, error.problem) == ("credentials", "at most 64 entries")
    for creds, field in [
        (Credentials(headers={"": "v"}), "credentials.headers"),
        (Credentials(env={"E": "x" * 16_385}), "credentials.env"),
        (Credentials(env={" ": "v"}), "credentials.env"),
        (Credentials(env={"k" * 257: "v"}), "credentials.env"),
        (Credentials(headers={"Bad Name": "v"}), "credentials.headers"),
        (Credentials(headers={"X": "a\r\nb"}), "credentials.headers.X"),
    ]:
        draft = McpDraft(
            name="H", transport="streamable_http", url="https://m.example/", credentials=creds
        )
        assert (await refusal(s, draft)).field == field
    exactly = Credentials(headers={f"h{i}": "v" for i in range(MAX_CREDENTIAL_ENTRIES)})
    await s.http(credentials=exactly)
    await s.http(credentials=Credentials(env={"E": "x" * 16_384}, headers={"k" * 256: "v"}))


async def test_the_endpoint_carries_the_credentials_and_a_session_key() -> None:
    s = Setup()
    server = await s.http(credentials=Credentials(headers={"X-Key": "k"}, env={"E": "e"}))
    endpoint = s.servers.endpoint(server)
    assert endpoint == McpEndpoint(
        key=f"{ORG}:{server.id}:{server.updated_at.isoformat()}",
        transport="streamable_http",
        url="https://mcp.example/mcp",
        command=None,
        args=(),
        headers={"X-Key": "k"},
        env={"E": "e"},
    )
    alice = s.servers.endpoint(server, "token-a")
    bob = s.servers.endpoint(server, "token-b")
    assert alice.headers == {"X-Key": "k", "Authorization": "Bearer token-a"}
    assert alice.key.startswith(endpoint.key + ":")
    assert len(alice.key) == len(endpoint.key) + 17
    assert alice.key != bob.key  # users never share an authorized session


async def test_credentials_sealed_for_another_server_do_not_open() -> None:
    s = Setup()
    one = await s.http(credentials=Credentials(headers={"X": "1"}))
    two = await s.http()
    stolen = msgspec.structs.replace(two, credentials=one.credentials)
    with pytest.raises(SecretUnreadable):
        s.servers.credentials_of(stolen)


async def test_an_update_renames_and_reslugs() -> None:
    s = Setup()
    server = await s.http(credentials=Credentials(headers={"X": "1"}))
    s.clock.advance(5)
    updated = await s.servers.update(ADMIN, server.id, McpChanges(name="New Name"))
    assert (updated.name, updated.slug, updated.updated_at) == (
        "New Name",
        "new-name",
        s.clock.now(),
    )
    assert updated.credentials == server.credentials  # not moved: credentials kept


async def test_moving_a_server_drops_its_credentials_cache_and_oauth_tokens() -> None:
    s = Setup(oauth=True)
    server = await s.http(credentials=Credentials(headers={"X": "1"}))
    await s.servers.test(ADMIN, server.id)
    assert s.servers.oauth is not None
    started = await s.servers.oauth.start(ALICE, server)
    s.net.tokens.append(TokenSet(access_token="at"))
    await s.servers.oauth.callback(server.id, started.state, "c")
    moved = await s.servers.update(ADMIN, server.id, McpChanges(url="https://new.example/mcp"))
    assert (moved.credentials, moved.tools_cache) == (None, ())
    back = msgspec.structs.replace(moved, url=server.url)
    assert await s.servers.oauth.bearer(ALICE, back) is None  # the grant is gone


@pytest.mark.parametrize("change", [McpChanges(args=("--x",)), McpChanges(command="other")])
async def test_changing_args_or_command_moves_a_stdio_server(change: McpChanges) -> None:
    s = Setup()
    server = await s.servers.create(
        ADMIN,
        McpDraft(name="L", transport="stdio", command="x", credentials=Credentials(env={"E": "1"})),
    )
    moved = await s.servers.update(ADMIN, server.id, change)
    assert moved.credentials is None


async def test_moving_with_new_credentials_keeps_the_new_ones() -> None:
    s = Setup()
    server = await s.http(credentials=Credentials(headers={"X": "1"}))
    new = Credentials(headers={"X": "2"})
    moved = await s.servers.update(
        ADMIN, server.id, McpChanges(url="https://new.example/", credentials=new)
    )
    assert s.servers.credentials_of(moved) == new


async def test_an_unchanged_url_does_not_move_the_server() -> None:
    s = Setup()
    server = await s.http(credentials=Credentials(headers={"X": "1"}))
    await s.servers.test(ADMIN, server.id)
    same = await s.servers.update(
        ADMIN, server.id, McpChanges(url=server.url, allowed_tools=("search",))
    )
    assert same.credentials == server.credentials
    assert same.allowed_tools == ("search",)
    assert same.tools_cache == ()  # a url given is listed again, even the same one


async def test_new_credentials_clear_the_tools_cache_and_none_removes_them() -> None:
    s = Setup()
    server = await s.http(credentials=Credentials(headers={"X": "1"}))
    await s.servers.test(ADMIN, server.id)
    cleared = await s.servers.update(ADMIN, server.id, McpChanges(credentials=None))
    assert (cleared.credentials, cleared.tools_cache) == (None, ())


async def test_an_update_is_checked() -> None:
    s = Setup()
    server = await s.http()
    with pytest.raises(InvalidInput):
        await s.servers.update(ADMIN, server.id, McpChanges(url="https://a b/"))
    assert await s.servers.get(ADMIN, server.id) == server


async def test_delete_forgets_the_oauth_grants() -> None:
    s = Setup(oauth=True)
    server = await s.http()
    assert s.servers.oauth is not None
    started = await s.servers.oauth.start(ALICE, server)
    s.net.tokens.append(TokenSet(access_token="at"))
    await s.servers.oauth.callback(server.id, started.state, "c")
    await s.servers.delete(ADMIN, server.id)
    with pytest.raises(NotFound):
        await s.servers.get(ADMIN, server.id)
    assert await s.servers.oauth.bearer(ALICE, server) is None


async def test_a_test_lists_the_tools_and_caches_them() -> None:
    s = Setup()
    server = await s.http()
    s.client.tools = [McpTool(name="a", description="A", input_schema={"type": "object"})]
    result = await s.servers.test(ADMIN, server.id)
    expected = (CachedTool(name="a", description="A", input_schema={"type": "object"}),)
    assert (result.ok, result.tools, result.error) == (True, expected, None)
    assert (await s.servers.get(ADMIN, server.id)).tools_cache == expected


async def test_a_failing_test_says_why_and_keeps_the_cache() -> None:
    s = Setup()
    server = await s.http()
    s.client.tools = Upstream("connection refused", code="MCP_UNAVAILABLE")
    result = await s.servers.test(ADMIN, server.id)
    assert (result.ok, result.error, result.tools) == (False, "connection refused", ())
    s.client.tools = McpAuthRequired("401")
    result = await s.servers.test(ADMIN, server.id)
    assert result.ok is False
    assert result.error == (
        "the server requires OAuth authorization: POST /api/mcps/{id}/oauth/start"
    )


async def test_a_test_sends_the_callers_bearer() -> None:
    s = Setup(oauth=True)
    server = await s.http()
    assert s.servers.oauth is not None
    started = await s.servers.oauth.start(ALICE, server)
    s.net.tokens.append(TokenSet(access_token="alice-at"))
    await s.servers.oauth.callback(server.id, started.state, "c")
    await s.servers.test(ALICE, server.id)
    assert s.client.listed[-1].headers == {"Authorization": "Bearer alice-at"}


async def test_rotation_reseals_only_what_an_older_key_sealed() -> None:
    s = Setup()
    old = await s.http(credentials=Credentials(headers={"X": "1"}))
    s.box = AesGcmBox([KEY2, KEY1])
    s.servers._box = s.box
    new = await s.http(credentials=Credentials(headers={"X": "2"}))
    await s.http()  # no credentials
    assert await s.servers.rotate_secrets() == 1
    assert await s.servers.rotate_secrets(ORG) == 0
    resealed = await s.servers.get(ADMIN, old.id)
    assert resealed.credentials != old.credentials
    assert s.box.is_current(resealed.credentials or "")
    assert s.servers.credentials_of(resealed) == Credentials(headers={"X": "1"})
    assert (await s.servers.get(ADMIN, new.id)).credentials == new.credentials


# --- attachments and the turn's tools ---------------------------------------------


async def test_attach_list_and_detach() -> None:
    s = Setup()
    agent = await s.agent()
    server = await s.http()
    s.clock.advance(2)
    attached = await s.servers.attach(ADMIN, "agent", agent.id, server.id, ("search",))
    assert (attached.server, attached.attachment.allowed_tools) == (server, ("search",))
    assert attached.attachment.created_at == s.clock.now()
    assert await s.servers.attached(ADMIN, "agent", agent.id) == [attached]
    assert await s.servers.detach(ADMIN, "agent", agent.id, server.id) is True
    assert await s.servers.attached(ADMIN, "agent", agent.id) == []
    assert await s.servers.detach(ADMIN, "agent", agent.id, server.id) is False


async def test_attachments_of_an_unknown_agent_are_not_found() -> None:
    s = Setup()
    server = await s.http()
    nobody = uuid.uuid4()
    with pytest.raises(NotFound):
        await s.servers.attach(ADMIN, "agent", nobody, server.id, None)
    with pytest.raises(NotFound):
        await s.servers.attached(ADMIN, "agent", nobody)
    with pytest.raises(NotFound):
        await s.servers.detach(ADMIN, "agent", nobody, server.id)
    assert await s.servers.attached(ADMIN, "agent", nobody, known_owner=True) == []
    # a runner is not an agent: not looked up
    await s.servers.attach(ADMIN, "runner", nobody, server.id, None)
    assert len(await s.servers.attached(ADMIN, "runner", nobody)) == 1
    assert await s.servers.detach(ADMIN, "runner", nobody, server.id) is True


async def test_attaching_checks_the_allowed_tool_names() -> None:
    s = Setup()
    agent = await s.agent()
    server = await s.http()
    with pytest.raises(InvalidInput) as info:
        await s.servers.attach(ADMIN, "agent", agent.id, server.id, ("",))
    assert info.value.field == "allowed_tools"


def test_effective_tools_are_narrowed_by_server_and_attachment() -> None:
    tools = tuple(CachedTool(name=n) for n in ("a", "b", "c"))
    server = msgspec.structs.replace(_a_server(), tools_cache=tools, allowed_tools=("a", "b"))
    attachment = McpAttachment(
        org_id=ORG,
        owner_kind="agent",
        owner_id=uuid.uuid4(),
        mcp_id=server.id,
        allowed_tools=("b", "c"),
        created_at=server.created_at,
    )
    assert [t.name for t in effective_tools(server, attachment)] == ["b"]
    open_attachment = msgspec.structs.replace(attachment, allowed_tools=None)
    assert [t.name for t in effective_tools(server, open_attachment)] == ["a", "b"]


def _a_server() -> McpServer:
    return a_server()


async def agent_with(s: Setup, allowed: tuple[str, ...] | None = None) -> tuple[Agent, McpServer]:
    agent = await s.agent()
    server = await s.http("Kb")
    s.client.tools = [
        McpTool(name="search", description="Search", input_schema={"type": "object", "x": 1}),
        McpTool(name="write"),
    ]
    await s.servers.attach(ADMIN, "agent", agent.id, server.id, allowed)
    return agent, server


async def test_the_turn_sees_the_tools_as_slug_and_name_listed_once() -> None:
    s = Setup()
    agent, _ = await agent_with(s, ("search",))
    specs = await s.tools.list_tools(ADMIN, agent)
    assert [(t.name, t.description, t.parameters) for t in specs] == [
        ("kb__search", "Search", {"type": "object", "x": 1})
    ]
    assert len(s.client.listed) == 1
    await s.tools.list_tools(ADMIN, agent)
    assert len(s.client.listed) == 1  # cached from the first listing


async def test_the_turn_uses_the_attachments_it_read() -> None:
    s = Setup()
    agent, server = await agent_with(s)
    known = [(a.attachment, a.server) for a in await s.servers.attached(ADMIN, "agent", agent.id)]
    await s.servers.detach(ADMIN, "agent", agent.id, server.id)
    assert [t.name for t in await s.tools.list_tools(ADMIN, agent, ToolSetup(mcp=known))] == [
        "kb__search",
        "kb__write",
    ]


async def test_a_server_that_cannot_be_listed_offers_no_tools() -> None:
    s = Setup()
    agent, _ = await agent_with(s)
    s.client.tools = Upstream("down")
    assert await s.tools.list_tools(ADMIN, agent) == []


async def test_a_call_reaches_the_servers_tool() -> None:
    s = Setup()
    agent, _ = await agent_with(s)
    await s.tools.list_tools(ADMIN, agent)  # the turn lists the tools before calling one
    assert await s.tools.call(ADMIN, agent, "kb__search", {"q": 1}, CTX) == "search: ok"
    (endpoint, name, arguments) = s.client.calls[0]
    assert (endpoint.url, name, arguments) == ("https://mcp.example/mcp", "search", {"q": 1})
    s.client.answers["write"] = McpCallResult(text="denied", is_error=True)
    assert await s.tools.call(ADMIN, agent, "kb__write", {}, CTX) == "error: denied"
    s.client.answers["write"] = Upstream("timed out", code="MCP_TIMEOUT")
    assert await s.tools.call(ADMIN, agent, "kb__write", {}, CTX) == "error: timed out"


async def test_calls_the_agent_may_not_make_answer_errors() -> None:
    s = Setup()
    agent, _ = await agent_with(s, ("search",))
    await s.tools.list_tools(ADMIN, agent)
    assert await s.tools.call(ADMIN, agent, "kb__write", {}, CTX) == (
        "error: the tool 'kb__write' is not allowed for this agent"
    )
    assert await s.tools.call(ADMIN, agent, "nosep", {}, CTX) == "error: no tool named 'nosep'"
    assert await s.tools.call(ADMIN, agent, "other__search", {}, CTX) == (
        "error: no MCP server 'other' is attached to this agent"
    )
    assert s.client.calls == []


async def test_a_server_asking_for_authorization_without_oauth_answers_an_error() -> None:
    s = Setup()
    agent, _ = await agent_with(s)
    await s.tools.list_tools(ADMIN, agent)
    s.client.answers["search"] = McpAuthRequired("401")
    assert await s.tools.call(ADMIN, agent, "kb__search", {}, CTX) == (
        "error: the MCP server 'Kb' requires authorization"
    )


async def test_a_server_asking_for_authorization_starts_the_flow() -> None:
    s = Setup(oauth=True)
    agent, _ = await agent_with(s)
    await s.tools.list_tools(ADMIN, agent)
    s.client.answers["search"] = McpAuthRequired("401")
    with pytest.raises(ToolAuthRequired) as info:
        await s.tools.call(ALICE, agent, "kb__search", {}, CTX)
    assert info.value.provider == "Kb"
    assert info.value.redirect_url.startswith("https://auth.example/authorize?")
    assert info.value.description == "Connect Kb so the agent can use its tools"


async def test_an_authorization_that_cannot_start_answers_an_error() -> None:
    s = Setup(oauth=True)
    s.net.auth = msgspec.structs.replace(AUTH, registration_endpoint=None)
    agent, _ = await agent_with(s)
    await s.tools.list_tools(ADMIN, agent)
    s.client.answers["search"] = McpAuthRequired("401")
    answer = await s.tools.call(ALICE, agent, "kb__search", {}, CTX)
    assert answer.startswith("error: authorization with 'Kb' failed: ")
    assert "dynamic client registration" in answer


async def test_rotation_of_one_organization_leaves_the_others() -> None:
    s = Setup()
    ours = await s.http(credentials=Credentials(headers={"X": "1"}))
    theirs = await s.servers.create(
        Principal(org_id="org-other", method="api_key"),
        McpDraft(
            name="T",
            transport="streamable_http",
            url="https://m.example/",
            credentials=Credentials(headers={"X": "2"}),
        ),
    )
    s.servers._box = s.box = AesGcmBox([KEY2, KEY1])
    assert await s.servers.rotate_secrets(ORG) == 1
    assert (await s.storage.mcps.get("org-other", theirs.id)).credentials == theirs.credentials
    assert (await s.servers.get(ADMIN, ours.id)).credentials != ours.credentials


async def test_rotation_goes_on_past_credentials_already_current() -> None:
    s = Setup()
    await s.http(credentials=Credentials(headers={"X": "1"}))
    s.servers._box = AesGcmBox([KEY2, KEY1])
    await s.http(credentials=Credentials(headers={"X": "2"}))  # sealed with the newest key
    s.servers._box = AesGcmBox([KEY1])
    await s.http(credentials=Credentials(headers={"X": "3"}))
    s.servers._box = AesGcmBox([KEY2, KEY1])
    assert await s.servers.rotate_secrets() == 2


async def test_a_tool_whose_name_holds_the_separator_is_called_by_its_whole_name() -> None:
    s = Setup()
    agent, _ = await agent_with(s)
    s.client.tools = [McpTool(name="get__data")]
    server = await s.http("Db")
    await s.servers.attach(ADMIN, "agent", agent.id, server.id, None)
    assert "db__get__data" in [t.name for t in await s.tools.list_tools(ADMIN, agent)]
    assert await s.tools.call(ADMIN, agent, "db__get__data", {}, CTX) == "get__data: ok"


async def test_a_call_finds_its_server_among_several_attached() -> None:
    s = Setup()
    agent, _ = await agent_with(s)
    other = await s.http("Zz")
    await s.servers.attach(ADMIN, "agent", agent.id, other.id, None)
    await s.tools.list_tools(ADMIN, agent)
    assert await s.tools.call(ADMIN, agent, "zz__search", {}, CTX) == "search: ok"
    assert await s.tools.call(ADMIN, agent, "kb__search", {}, CTX) == "search: ok"


async def test_a_rename_keeps_the_tools_cache() -> None:
    s = Setup()
    server = await s.http()
    await s.servers.test(ADMIN, server.id)
    renamed = await s.servers.update(ADMIN, server.id, McpChanges(name="Other"))
    assert renamed.tools_cache == (CachedTool(name="search", description="s"),)
    narrowed = await s.servers.update(ADMIN, server.id, McpChanges(allowed_tools=("search",)))
    assert narrowed.tools_cache == renamed.tools_cache


async def test_a_stdio_endpoint_carries_its_command_and_arguments() -> None:
    s = Setup()
    server = await s.servers.create(
        ADMIN,
        McpDraft(
            name="L",
            transport="stdio",
            command="tool",
            args=("--a", "b"),
            credentials=Credentials(env={"E": "1"}),
        ),
    )
    endpoint = s.servers.endpoint(server)
    assert (endpoint.transport, endpoint.url, endpoint.command, endpoint.args, endpoint.env) == (
        "stdio",
        None,
        "tool",
        ("--a", "b"),
        {"E": "1"},
    )


async def test_a_visitor_is_not_offered_the_servers_that_authorize_with_oauth() -> None:
    """docs/publishing.md: a published chat's visitor uses nobody's grant, so a
    server that authorizes with OAuth (a client was registered for it) is not
    offered in the visitor's turn; the organization's own turns still see it."""
    s = Setup(oauth=True)
    agent, oauth_server = await agent_with(s)
    plain = await s.http("Plain")
    await s.servers.attach(ADMIN, "agent", agent.id, plain.id, None)
    visitor = Principal.for_visitor(ORG, "anon-1")
    both = ["kb__search", "kb__write", "plain__search", "plain__write"]
    assert sorted(t.name for t in await s.tools.list_tools(visitor, agent)) == both
    assert s.servers.oauth is not None
    await s.servers.oauth.start(ALICE, oauth_server)  # the server authorizes with OAuth
    assert [t.name for t in await s.tools.list_tools(visitor, agent)] == [
        "plain__search",
        "plain__write",
    ]
    assert sorted(t.name for t in await s.tools.list_tools(ADMIN, agent)) == both
    assert await s.servers.oauth.need_grants(ORG, [plain.id, oauth_server.id]) == {oauth_server.id}
    assert await s.servers.oauth.need_grants(ORG, []) == set()
