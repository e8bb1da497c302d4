"""MCP servers and attachments: the memory and PostgreSQL adapters agree."""

from __future__ import annotations

import asyncio
import uuid
from typing import Literal

import msgspec
import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.crypto.aesgcm import new_key_spec, parse_keys
from agentsvc_core.entities import CachedTool, McpAttachment, McpServer, Principal
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports import McpCallResult, McpClient, McpEndpoint, McpTool
from agentsvc_core.use_cases.mcp_servers import Credentials, McpDraft, McpServers
from tests.contract.conftest import Backend, now


def server(org: str, slug: str = "docs", **over: object) -> McpServer:
    t = now()
    base = McpServer(
        id=uuid.uuid4(),
        org_id=org,
        name="Docs",
        slug=slug,
        transport="streamable_http",
        url="https://mcp.example/x",
        command=None,
        args=(),
        credentials=None,
        allowed_tools=None,
        status="active",
        tools_cache=(),
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def test_round_trip_and_unique_slugs_under_concurrency(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.mcps
    tools = (
        CachedTool(
            name="search",
            description="d",
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        ),
    )
    first = backend.run(
        repo.add, server(org, tools_cache=tools, allowed_tools=("search",), args=("--x", "ü"))
    )
    assert backend.run(repo.get, org, first.id) == first

    async def race() -> list[McpServer]:
        return await asyncio.gather(*(repo.add(server(org)) for _ in range(8)))

    made = backend.run(race)
    assert sorted(s.slug for s in [first, *made]) == sorted(
        ["docs", *(f"docs-{n}" for n in range(2, 10))]
    )
    other = backend.fresh_org()
    assert backend.run(repo.add, server(other)).slug == "docs"  # slugs are per organization


def test_modify_renames_to_a_free_slug(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.mcps
    backend.run(repo.add, server(org, slug="alpha"))
    b = backend.run(repo.add, server(org, slug="beta"))
    renamed = backend.run(
        repo.modify, org, b.id, lambda s: msgspec.structs.replace(s, slug="alpha")
    )
    assert renamed.slug == "alpha-2"
    assert backend.run(repo.get, org, b.id).slug == "alpha-2"


def test_delete_removes_attachments_and_other_orgs_see_nothing(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.mcps
    s = backend.run(repo.add, server(org))
    agent, runner = uuid.uuid4(), uuid.uuid4()
    owners: list[tuple[Literal["agent", "runner"], uuid.UUID]] = [
        ("agent", agent),
        ("runner", runner),
    ]
    for kind, owner in owners:
        backend.run(
            repo.attach,
            McpAttachment(
                org_id=org,
                owner_kind=kind,
                owner_id=owner,
                mcp_id=s.id,
                allowed_tools=("a",),
                created_at=now(),
            ),
        )
    again = backend.run(
        repo.attach,
        McpAttachment(
            org_id=org,
            owner_kind="agent",
            owner_id=agent,
            mcp_id=s.id,
            allowed_tools=None,
            created_at=now(),
        ),
    )
    assert again.allowed_tools is None
    assert len(backend.run(repo.attachments, org, "agent", agent)) == 1
    other = backend.fresh_org()
    with pytest.raises(NotFound):
        backend.run(repo.get, other, s.id)
    with pytest.raises(NotFound):
        backend.run(repo.delete, other, s.id)
    backend.run(repo.delete, org, s.id)
    assert backend.run(repo.attachments, org, "agent", agent) == []
    assert backend.run(repo.attachments, org, "runner", runner) == []


class _NoClient(McpClient):
    async def list_tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        return []

    async def call_tool(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, object]
    ) -> McpCallResult:
        return McpCallResult(text="")

    async def aclose(self) -> None:
        return None


class _AllowAll:
    def refusal(self, url: str) -> str | None:
        return None


def test_rotation_reseals_everything_with_the_newest_key(backend: Backend) -> None:
    k1, k2 = new_key_spec("k1"), new_key_spec("k2")
    org = backend.fresh_org()
    who = Principal(org_id=org, method="api_key")

    def servers(spec: str) -> McpServers:
        return McpServers(
            backend.storage.mcps,
            backend.storage.agents,
            _NoClient(),
            AesGcmBox(parse_keys(spec)),
            _AllowAll(),
            SystemClock(),
            allow_stdio=False,
        )

    old = servers(k1)
    made = [
        backend.run(
            old.create,
            who,
            McpDraft(
                name=f"s{i}",
                transport="streamable_http",
                url="https://x.example/m",
                credentials=Credentials(headers={"Authorization": f"t{i}"}),
            ),
        )
        for i in range(3)
    ]
    new = servers(f"{k2},{k1}")
    assert backend.run(new.rotate_secrets, org) == 3
    assert backend.run(new.rotate_secrets, org) == 0
    for i, s in enumerate(made):
        stored = backend.run(backend.storage.mcps.get, org, s.id)
        assert stored.credentials is not None
        assert stored.credentials.startswith("v1.k2.")
        assert servers(k2).credentials_of(stored).headers == {"Authorization": f"t{i}"}


def test_a_managed_providers_server_is_one_per_organization(backend: Backend) -> None:
    org, other = backend.fresh_org(), backend.fresh_org()
    repo = backend.storage.mcps
    first = backend.run(repo.add, server(org, "github", managed_provider="github"))
    assert backend.run(repo.get, org, first.id).managed_provider == "github"
    with pytest.raises(Conflict):
        backend.run(repo.add, server(org, "github-2", managed_provider="github"))
    # another provider, a plain server, another organization: all fine
    backend.run(repo.add, server(org, "linear", managed_provider="linear"))
    backend.run(repo.add, server(org, "plain"))
    backend.run(repo.add, server(other, "github", managed_provider="github"))
    assert [s.managed_provider for s in backend.run(repo.list_all, org)] == [
        "github",
        "linear",
        None,
    ]


def test_an_attachments_services_stay_unless_given(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.mcps
    s = backend.run(repo.add, server(org, managed_provider="github"))
    owner = uuid.uuid4()

    def attach(services: tuple[str, ...] | None, allowed: tuple[str, ...] | None = None) -> None:
        backend.run(
            repo.attach,
            McpAttachment(
                org_id=org,
                owner_kind="agent",
                owner_id=owner,
                mcp_id=s.id,
                allowed_tools=allowed,
                created_at=now(),
                services=services,
            ),
        )

    def services() -> tuple[str, ...] | None:
        return backend.run(repo.attachments, org, "agent", owner)[0].services

    attach(None)
    assert services() is None
    attach(("gmail", "drive"))
    assert services() == ("gmail", "drive")
    attach(None, ("x",))  # an attach without services keeps those chosen
    assert services() == ("gmail", "drive")
    assert backend.run(repo.attachments, org, "agent", owner)[0].allowed_tools == ("x",)
    attach(())
    assert services() == ()


def test_an_attachments_approvals_round_trip_and_are_replaced(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.mcps
    s = backend.run(repo.add, server(org))
    owner = uuid.uuid4()

    def attach(approval: tuple[str, ...] | None) -> tuple[str, ...] | None:
        backend.run(
            repo.attach,
            McpAttachment(
                org_id=org,
                owner_kind="agent",
                owner_id=owner,
                mcp_id=s.id,
                allowed_tools=None,
                created_at=now(),
                require_approval=approval,
            ),
        )
        return backend.run(repo.attachments, org, "agent", owner)[0].require_approval

    assert attach(None) is None
    assert attach(("delete_issue", "close_issue")) == ("delete_issue", "close_issue")
    assert attach(None) is None  # attaching again replaces the choice
