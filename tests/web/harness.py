"""The web app with test doubles where the model and the tools are (real code otherwise)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
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
from tests.fakes.sandbox import FakeSandbox
from tests.web.live import serve
from tests.web.shared import APPS, Started, configuration


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

    def owns(self, name: str) -> bool:
        return True  # the turn's one source: every name is its own

    def is_extension(self, name: str) -> bool:
        return True  # its tools are traced as MCP tools

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
        # the computers' sandboxes: a folder and a real sh per sandbox (no boundary)
        self.sandboxes = {"local": FakeSandbox("local"), "e2b": FakeSandbox("e2b")}
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
            managed_catalogue=base.managed_catalogue,
            sandboxes=self.sandboxes,
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
            managed_catalogue=base.managed_catalogue,
            sandboxes=self.sandboxes,
        )
        self.mcp_services.closers = base.closers

    def forget(self) -> None:
        """Clear what the doubles recorded and the MCP servers they know."""
        self.model.requests.clear()
        self.tools.calls.clear()
        self.mcp.servers.clear()
        self.mcp.seen.clear()
        self.mcp.calls.clear()

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


class SharedHarness:
    """What the ``harness`` fixture gives a test: the Harness API over a Harness of
    the test's configuration whose app is started once per process (tests/web/shared.py),
    with the test's own organization and key on it and the doubles' records cleared.

    A Harness runs one app at a time (its apps share one storage), so each kind of
    app (``client``, ``mcp_client``, ``live``, ``live(mcp=True)``) has a Harness of its
    own, and a test uses one kind: the first it asks for (or ``mode``). A test that
    changes the doubles or the settings builds a ``Harness`` of its own."""

    def __init__(
        self,
        request: pytest.FixtureRequest,
        settings: Settings,
        org_id: str,
        key: str,
        mode: str | None = None,
    ) -> None:
        self.settings = settings
        self._request = request
        self._org_id, self._key = org_id, key
        self._mode: str | None = None
        self._harness: Harness | None = None
        self._started: Started | None = None
        if mode is not None:
            self._use(mode)

    def _use(self, mode: str) -> tuple[Harness, Started]:
        if self._mode is not None:
            assert mode == self._mode, f"this test uses {self._mode}: it cannot use {mode} too"
            assert self._harness is not None
            assert self._started is not None
            return self._harness, self._started
        config = configuration(self.settings)
        h = _HARNESSES.get((mode, config))
        if h is None:
            h = _HARNESSES[(mode, config)] = Harness(config)
        services = h.mcp_services if mode in ("mcp", "live-mcp") else h.services
        started = APPS.get(
            self._request,
            ("harness", mode, config),
            lambda: Started(create_app(config, services), services, live=mode.startswith("live")),
        )
        h.forget()
        started.begin(self._org_id, self._key)
        self._mode, self._harness, self._started = mode, h, started
        return h, started

    def _chosen(self) -> Harness:
        assert self._harness is not None, "call client(), mcp_client() or live() first"
        return self._harness

    @property
    def model(self) -> RecordingModel:
        return self._chosen().model

    @property
    def tools(self) -> KnowledgeBaseTools:
        return self._chosen().tools

    @property
    def mcp(self) -> FakeMcpClient:
        return self._chosen().mcp

    @property
    def services(self) -> Services:
        return self._chosen().services

    @property
    def sandboxes(self) -> dict[str, FakeSandbox]:
        return self._chosen().sandboxes

    @property
    def mcp_services(self) -> Services:
        return self._chosen().mcp_services

    def run_any(self, fn: Any, *args: Any) -> Any:
        return self._chosen().run_any(fn, *args)

    @contextmanager
    def client(self) -> Iterator[TestClient[Any]]:
        _, started = self._use("client")
        with started.client() as c:
            yield c

    @contextmanager
    def mcp_client(self) -> Iterator[TestClient[Any]]:
        _, started = self._use("mcp")
        with started.client() as c:
            yield c

    @contextmanager
    def live(self, auth: dict[str, str], *, mcp: bool = False) -> Iterator[httpx.Client]:
        _, started = self._use("live-mcp" if mcp else "live")
        with started.http(auth) as c:
            yield c

    def finish(self) -> None:
        """After the test: the replies it started finish, as when its app stopped."""
        if self._started is not None:
            self._started.settle()


_HARNESSES: dict[tuple[str, Settings], Harness] = {}
