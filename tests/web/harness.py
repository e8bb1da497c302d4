"""The web app with test doubles where the model and the tools are (real code otherwise)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from litestar.testing import TestClient

from agentsvc_adapters.llm import Families, LocalModel, PrefixRouter
from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import Upstream
from agentsvc_core.ports import (
    ChatModel,
    McpCallResult,
    McpClient,
    McpEndpoint,
    McpTool,
    ModelEvent,
    ModelRequest,
    ServerTools,
    TextDelta,
    ToolAuthRequired,
    ToolSpec,
)
from agentsvc_web.app import create_app
from agentsvc_web.bootstrap import Services, build_services
from agentsvc_web.settings import Settings
from tests.web.live import serve


class RecordingModel(ChatModel):
    """The local model, remembering every request it was given."""

    provider = "local"

    def __init__(self, slow_delay_s: float = 0.05) -> None:
        self.inner = LocalModel(slow_delay_s)
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        return self.inner.stream(request)


class FailingModel(ChatModel):
    """Says two words, then the provider fails."""

    provider = "beta"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta("partial")
        yield TextDelta(" answer")
        await asyncio.sleep(0)
        raise Upstream("the provider answered 503: overloaded", code="PROVIDER_UNAVAILABLE")


class KnowledgeBaseTools(ServerTools):
    """Two server-side tools, one of which needs OAuth."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(
        self, who: Principal, agent: Agent, setup: object = None
    ) -> list[ToolSpec]:
        return [
            ToolSpec(name="kb__search", description="search the knowledge base"),
            ToolSpec(name="kb__admin", description="administer the knowledge base"),
            ToolSpec(name="crm__lookup", description="look up a customer (needs OAuth)"),
        ]

    async def call(
        self, who: Principal, agent: Agent, name: str, arguments: dict[str, Any], ctx: Any = None
    ) -> str:
        self.calls.append((name, arguments))
        if name == "crm__lookup":
            raise ToolAuthRequired("crm", "https://crm.example/authorize?x=1", "Connect your CRM")
        return f"{len(arguments)} argument(s), found 3 articles"


class FakeMcpClient(McpClient):
    """MCP servers by URL (or command): their tools, and every endpoint it was given."""

    def __init__(self) -> None:
        self.servers: dict[str, list[McpTool]] = {}
        self.seen: list[McpEndpoint] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        self.seen.append(endpoint)
        where = endpoint.url or endpoint.command or ""
        if where not in self.servers:
            raise Upstream(f"cannot connect to {where}", code="MCP_UNAVAILABLE")
        return self.servers[where]

    async def list_tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        return self._tools(endpoint)

    async def call_tool(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any]
    ) -> McpCallResult:
        self._tools(endpoint)
        self.calls.append((name, arguments))
        if name == "fail":
            return McpCallResult(text="the tool failed", is_error=True)
        return McpCallResult(text=f"{name} ran with {sorted(arguments.items())}")

    async def aclose(self) -> None:
        return None


class Harness:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model = RecordingModel()
        self.tools = KnowledgeBaseTools()
        base = build_services(settings)
        router = PrefixRouter(
            Families(local=self.model, beta=FailingModel()), prefixes=(("fail", "beta"),)
        )
        self.services = Services(
            settings,
            base.storage,
            base.verifier,
            router,
            base.stops,
            tools=self.tools,
            box=base.box,
            mcp_client=base.mcp_client,
            urls=base.urls,
            registry=base.registry,
            oauth_network=base.oauth_network,
            resolver=base.resolver,
            webhooks=base.webhook_caller,
        )
        # the base's HTTP clients (OAuth, registry, providers) close with whichever runs
        self.services.closers = base.closers
        # the same app with the real MCP tools of the turn, over a fake MCP client
        self.mcp = FakeMcpClient()
        self.mcp_services = Services(
            settings,
            base.storage,
            base.verifier,
            router,
            base.stops,
            box=base.box,
            mcp_client=self.mcp,
            urls=base.urls,
            registry=base.registry,
            oauth_network=base.oauth_network,
            resolver=base.resolver,
            webhooks=base.webhook_caller,
        )
        self.mcp_services.closers = base.closers

    def run_any(self, fn: Any, *args: Any) -> Any:
        """Call an async storage method (memory: directly; postgres: through a short-lived
        storage on the same database, found by the repository attribute of ``fn``)."""
        return asyncio.run(self._run_any(fn, *args))

    async def _run_any(self, fn: Any, *args: Any) -> Any:
        if self.settings.storage == "memory":
            return await fn(*args)
        from agentsvc_adapters.postgres import PostgresStorage  # noqa: PLC0415

        assert self.settings.database_url is not None
        storage = PostgresStorage(self.settings.database_url, min_size=1, max_size=2)
        await storage.open()
        try:
            for repo in ("secrets", "mcps", "conversations", "threads", "agents"):
                if (
                    type(fn.__self__).__name__
                    == type(getattr(self.services.storage, repo)).__name__
                ):
                    return await getattr(getattr(storage, repo), fn.__name__)(*args)
            raise AssertionError(f"no repository for {fn}")
        finally:
            await storage.close()

    @contextmanager
    def client(self) -> Iterator[TestClient[Any]]:
        with TestClient(create_app(self.settings, self.services), timeout=30) as c:
            yield c

    @contextmanager
    def mcp_client(self) -> Iterator[TestClient[Any]]:
        with TestClient(create_app(self.settings, self.mcp_services), timeout=30) as c:
            yield c

    @contextmanager
    def live(self, auth: dict[str, str], *, mcp: bool = False) -> Iterator[httpx.Client]:
        """A real server in a thread and an httpx client for it (streams really stream)."""
        services = self.mcp_services if mcp else self.services
        with (
            serve(create_app(self.settings, services)) as url,
            httpx.Client(base_url=url, headers=auth, timeout=30) as client,
        ):
            yield client
