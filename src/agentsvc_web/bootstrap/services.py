"""``Services``: the use cases the web layer may call, wired area by area (each
area's module in this package says what it builds), and their life: ``running``
opens storage, starts the background work, and closes everything on the way out."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

from agentsvc_adapters.auth import JwtVerifier
from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.managed_oauth import ShippedManagedCatalogue
from agentsvc_adapters.postgres import PostgresStopBus, PostgresStorage
from agentsvc_adapters.signals import LocalRevocations, LocalThreadNews
from agentsvc_adapters.telemetry import OtelExport
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import (
    FollowRequests,
    McpClient,
    ModelRouter,
    Revocations,
    SecretBox,
    ServerTools,
    SqlDatabases,
    StopBus,
    Storage,
    ThreadNews,
    TokenVerifier,
    WebhookCaller,
)
from agentsvc_core.ports.channel_platforms import ChannelPlatforms
from agentsvc_core.ports.documents import DocumentParser
from agentsvc_core.ports.embeddings import Embedder
from agentsvc_core.ports.event_webhooks import EventWebhookSender
from agentsvc_core.ports.managed_oauth import ManagedCatalogue
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.oauth import OAuthNetwork
from agentsvc_core.ports.registry import McpRegistry
from agentsvc_core.ports.resolver import CredentialResolver
from agentsvc_core.ports.sandboxes import SandboxProvider
from agentsvc_core.ports.skill_sources import SkillSource
from agentsvc_core.ports.web import WebFetcher, WebSearch
from agentsvc_core.use_cases.branches import Branches
from agentsvc_core.use_cases.erasure import Erasure
from agentsvc_core.use_cases.event_webhooks.replies import reply_events
from agentsvc_core.use_cases.health import Readiness
from agentsvc_core.use_cases.idempotency import Idempotency
from agentsvc_core.use_cases.models import Models
from agentsvc_core.use_cases.multiplayer.config import MultiplayerSettings
from agentsvc_core.use_cases.multiplayer.events import ThreadEvents
from agentsvc_core.use_cases.multiplayer.posts import MultiplayerPosts
from agentsvc_core.use_cases.org_settings import AgentConfigs, KeyBroker
from agentsvc_core.use_cases.server_tools import ToolHub
from agentsvc_core.use_cases.turn.compaction import Compactor
from agentsvc_web.bootstrap import background, catalogue, event_webhooks, publishing, telemetry
from agentsvc_web.bootstrap import tools as tool_areas
from agentsvc_web.bootstrap.channels import own_platforms, wire_channels
from agentsvc_web.bootstrap.code_sessions import (
    CodeSessionAdapters,
    code_session_adapters,
    wire_code_sessions,
)
from agentsvc_web.bootstrap.computer import outbound_guard, sandbox_providers, wire_computer
from agentsvc_web.bootstrap.runners import wire_runners
from agentsvc_web.bootstrap.storage import open_database
from agentsvc_web.bootstrap.turn import conversation, thread_compaction
from agentsvc_web.settings import Settings, SettingsError

log = logging.getLogger("agentsvc")


class Services:
    """The use cases the web layer may call, built once per process."""

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        verifier: TokenVerifier | None,
        router: ModelRouter,
        stops: StopBus,
        tools: ServerTools | None = None,
        *,
        box: SecretBox,
        mcp_client: McpClient,
        urls: UrlPolicy,
        registry: McpRegistry,
        oauth_network: OAuthNetwork,
        resolver: CredentialResolver,
        webhooks: WebhookCaller,
        revocations: Revocations | None = None,
        follows: FollowRequests | None = None,
        news: ThreadNews | None = None,
        exports: Sequence[OtelExport] = (),
        sampling: tuple[float, bool] = (1.0, True),
        databases: SqlDatabases | None = None,
        web_fetcher: WebFetcher | None = None,
        web_search: WebSearch | None = None,
        embedder: Embedder | None = None,
        parser: DocumentParser | None = None,
        skill_source: SkillSource | None = None,
        managed_catalogue: ManagedCatalogue | None = None,
        channel_platforms: ChannelPlatforms | None = None,
        sandboxes: Mapping[str, SandboxProvider] | None = None,
        code_sessions: CodeSessionAdapters | None = None,
        event_sender: EventWebhookSender | None = None,
    ) -> None:
        """The adapters come from ``build_services`` (or a test); ``tools`` replaces
        the turn's tool hub (a test's fake); ``channel_platforms`` the channels'
        platform adapters (None: ``agentsvc_adapters.channels.registry``'s);
        ``sandboxes`` the computers' providers by name (None:
        ``agentsvc_adapters.sandboxes.registry``'s); ``code_sessions`` the sandbox
        providers and git adapters (None:
        ``bootstrap.code_sessions.code_session_adapters``'s); ``event_sender`` what
        delivers event webhooks (None: ``bootstrap.event_webhooks.own_sender``'s)."""
        clock = SystemClock()
        revocations = revocations or LocalRevocations()
        news = news or LocalThreadNews()
        self.settings, self.storage, self.verifier, self.stops = settings, storage, verifier, stops
        self.box, self.urls, self.mcp_client, self.registry = box, urls, mcp_client, registry
        self.oauth_network, self.resolver, self.webhook_caller = oauth_network, resolver, webhooks
        self.web_search, self.embedder = web_search, embedder
        # async callables run at shutdown (exports' and clients' connection pools)
        self.closers: list[Callable[[], Awaitable[None]]] = [e.aclose for e in exports]
        self.metrics, self.http_metrics, self.tracer = telemetry.observability(
            storage, exports, sampling
        )
        self.readiness = Readiness(storage)
        self.trace_config = telemetry.trace_config(settings)
        # the model listing: the router's rules and the prices the turn uses
        self.models = Models(router, self.trace_config.prices)
        # the managed OAuth providers; none configured (a test) leaves them unavailable
        self.managed_catalogue = managed_catalogue or ShippedManagedCatalogue({})
        self._catalogue(clock, revocations)
        keys = KeyBroker(self.org_settings, resolver, self.tracer)
        if event_sender is None:  # built here: closed here
            own_sender = event_webhooks.own_sender(settings, urls)
            self.closers.append(own_sender.aclose)
            event_sender = own_sender
        self._event_sender = event_sender
        self._tool_areas(clock, router, keys, databases, web_fetcher, parser, skill_source)
        if sandboxes is None:  # built here: closed here (E2B's HTTP client)
            sandboxes = sandbox_providers(settings, urls)
            self.closers.extend(
                close for p in sandboxes.values() if (close := getattr(p, "aclose", None))
            )
        self.sandboxes = sandboxes
        self.computer_settings, self.computers = wire_computer(
            settings, storage, box, clock, self.threads, sandboxes
        )
        # the turn, and what builds on it
        self.tools = tools or ToolHub(tool_areas.tool_sources(self))
        self.conversation = conversation(
            settings,
            storage,
            self.threads,
            router,
            self.tools,
            stops,
            clock,
            box,
            keys=keys,
            follows=follows,
            tracer=self.tracer,
            traces=self.trace_config,
            after_turn=[self.memory_collector.after_turn, reply_events(self.event_publisher)],
            multiplayer=MultiplayerPosts(
                self.multiplayer, storage.conversations, news, clock, self.event_publisher
            ),
            events=self.event_publisher,
        )
        self.streams = self.conversation.streams  # re-attach
        # GET /api/threads/{id}/context and POST .../compact, over the turn's own parts
        self.thread_compaction = thread_compaction(
            self.conversation, settings, storage, self.threads, router, self.tools, clock, box, keys
        )
        self.branches = Branches(
            self.threads,
            storage.threads,
            storage.conversations,
            clock,
            stale_after_s=settings.run_stale_after_s,
        )
        self.thread_events = ThreadEvents(
            self.threads,
            storage.conversations,
            news,
            clock,
            stale_after_s=settings.run_stale_after_s,
        )
        self._runners(clock, news)
        self._channels(clock, channel_platforms)
        if code_sessions is None:
            code_sessions, closers = code_session_adapters(
                self.sandboxes, outbound_guard(settings, urls)
            )
            self.closers.extend(closers)
        self.code_agents, self.code_sessions, self.code_session_engine = wire_code_sessions(
            settings,
            storage,
            box,
            clock,
            router,
            code_sessions,
            jobs=self.jobs,
            news=news,
            traces=self.trace_config,
            events=self.event_publisher,
        )
        # the agents, whose configurations (the turn's and the tool sources' kinds)
        # go with them
        self.agents = catalogue.agents(
            settings,
            storage,
            clock,
            (*AgentConfigs.KINDS, *self.tools.kinds, self.multiplayer.kind),
            before_delete=(self.computers.drop_agent,),
        )
        self.templates = catalogue.templates(self)
        self.marketplace = catalogue.marketplace(self, storage, clock)
        self.publishing, self.public_chats, self.public_listing = publishing.publishing(
            storage, self.threads, self.conversation, self.org_settings, box, clock
        )
        self.idempotency = Idempotency(storage.idempotency, box, clock)
        self.traces, self.analytics = telemetry.traces_and_analytics(
            settings, storage, clock, self.trace_config
        )
        self.erasure = Erasure(
            self.threads,
            storage.erasure,
            thread_repo=storage.threads,
            conversations=storage.conversations,
            secrets=storage.secrets,
            publishing=storage.publishing,
            replies=self.conversation.halting,
            clock=clock,
            # what keeps a thread's text besides the erasure's own statement: one line each
            # events that carry the thread's messages; its summary (summary compaction)
            holders=[storage.event_webhooks, Compactor(storage.secrets, box)],
            stale_after_s=settings.run_stale_after_s,
        )

    def _catalogue(self, clock: SystemClock, revocations: Revocations) -> None:
        """What an organization keeps and configures (``catalogue``)."""
        settings, storage, box, urls = self.settings, self.storage, self.box, self.urls
        self.multiplayer = MultiplayerSettings(storage.secrets, storage.agents, box)
        self.api_keys, self.authenticator, self.threads = catalogue.identity(
            settings, storage, clock, self.verifier, revocations, self.multiplayer
        )
        self.registry_search, self.oauth, self.mcps, self.managed_oauth = catalogue.mcp_servers(
            settings,
            storage,
            clock,
            box,
            urls,
            self.mcp_client,
            self.registry,
            self.oauth_network,
            self.managed_catalogue,
        )
        self.org_settings, self.compaction = catalogue.org_settings(
            settings, storage, clock, box, urls
        )
        self.projects = catalogue.projects(storage, clock)

    def _tool_areas(
        self,
        clock: SystemClock,
        router: ModelRouter,
        keys: KeyBroker,
        databases: SqlDatabases | None,
        web_fetcher: WebFetcher | None,
        parser: DocumentParser | None,
        skill_source: SkillSource | None,
    ) -> None:
        """The areas behind the server-side tools (``tools``), and the job queue
        knowledge and memories use."""
        settings, storage, box = self.settings, self.storage, self.box
        self.webhook_tools = tool_areas.webhook_tools(
            storage, box, self.webhook_caller, self.urls, clock, self.org_settings
        )
        self.databases, self.integrations = tool_areas.integrations(
            settings, storage, box, clock, databases
        )
        self.plans, self.plan_settings = tool_areas.plans(storage, self.threads, box, clock)
        if web_fetcher is None:  # a host that passes none (a test) gets one, closed with the rest
            own = tool_areas.own_web_fetcher(settings, self.urls)
            self.closers.append(own.aclose)
            web_fetcher = own
        self.web_fetcher = web_fetcher
        self.web = tool_areas.web_settings(storage, box, self.web_search)
        self.jobs = background.job_queue(settings, storage)
        self.event_webhooks, self.event_deliveries, self.event_publisher = (
            event_webhooks.wire_event_webhooks(
                settings, storage, box, self.urls, clock, self.jobs, self._event_sender
            )
        )
        self.knowledge = tool_areas.knowledge(
            settings,
            storage,
            self.threads,
            self.jobs,
            clock,
            parser,
            self.embedder,
            self.event_publisher,
        )
        self.memories, self.memory_settings, self.memory_collector = tool_areas.memory(
            storage,
            box,
            clock,
            router,
            keys,
            self.org_settings,
            self.jobs,
            self.trace_config.prices,
        )
        if skill_source is None:  # as the web fetcher
            own_source = tool_areas.own_skill_source(settings, self.urls)
            self.closers.append(own_source.aclose)
            skill_source = own_source
        self.skills, self.skill_bindings = tool_areas.skills(storage, box, clock, skill_source)

    def _runners(self, clock: SystemClock, news: ThreadNews) -> None:
        """Runners over the conversation (``runners.wire_runners``)."""
        (
            self.runners,
            self.runner_runs,
            self.runner_engine,
            self.runner_analytics,
            self.suggestions,
            self.scheduled_tasks,
        ) = wire_runners(
            self.settings,
            self.storage,
            self.box,
            self.urls,
            clock,
            jobs=self.jobs,
            conversation=self.conversation,
            threads=self.threads,
            mcps=self.mcps,
            webhooks=self.webhook_caller,
            org_settings=self.org_settings,
            traces=self.trace_config,
            computers=self.computers,
            events=self.event_publisher,
            news=news,
        )

    def _channels(self, clock: SystemClock, platforms: ChannelPlatforms | None) -> None:
        """Channels over the conversation and the job queue (``channels``)."""
        if platforms is None:
            own = own_platforms(self.settings, self.urls)
            self.closers.append(own.aclose)
            platforms = own.by_type
        self.channels, self.channel_inbound, self.channel_answers = wire_channels(
            self.settings,
            self.storage,
            self.box,
            clock,
            platforms,
            jobs=self.jobs,
            threads=self.threads,
            conversation=self.conversation,
            events=self.event_publisher,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Services]:
        """Migrate and open storage, ensure the bootstrap key, sweep replies whose
        process died; on the way out let running replies finish briefly, then close."""
        try:
            await self._start()
            loops = background.start_loops(self)
            async with background.working(self):
                try:
                    yield self
                finally:
                    self.readiness.drain()
                    self.thread_events.close()  # followers reconnect to another process
                    for loop in loops:
                        loop.cancel()
                    self.jobs.stop()  # no new jobs; the running ones may finish
                    await self.conversation.shutdown(grace_s=self.settings.shutdown_grace_s)
        finally:
            await self._close()

    async def _start(self) -> None:
        """Storage open, the stop bus listening, the bootstrap key there, and the
        replies of a crashed process freed before serving."""
        if isinstance(self.storage, PostgresStorage):
            await open_database(self.storage, self.settings, self.embedder)
        if isinstance(self.stops, PostgresStopBus):
            await self.stops.start()
        if self.settings.bootstrap_api_key:
            try:
                await self.api_keys.ensure(
                    self.settings.bootstrap_org, self.settings.bootstrap_api_key
                )
            except InvalidInput as exc:
                raise SettingsError(exc.detail) from None
            log.info("bootstrap API key is valid for organization %r", self.settings.bootstrap_org)
        await background.sweep(self)  # before serving: a crashed process's threads are free

    async def _close(self) -> None:
        if isinstance(self.stops, PostgresStopBus):
            await self.stops.close()
        if isinstance(self.verifier, JwtVerifier):
            await self.verifier.aclose()
        for close in self.closers:
            await close()
        await self.mcp_client.aclose()
        if isinstance(self.storage, PostgresStorage):
            await self.storage.close()
