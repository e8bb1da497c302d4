"""The composition root: the one module that builds adapters and wires them to use cases."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta

from agentsvc_adapters.auth import JwtConfigError, JwtVerifier
from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.crypto import AesGcmBox, KeyringError, load_keyring
from agentsvc_adapters.crypto.aesgcm import new_key_spec, parse_keys
from agentsvc_adapters.documents import FileParser
from agentsvc_adapters.embeddings import OpenAIEmbedder
from agentsvc_adapters.jobs import MemoryJobs, PgJobs
from agentsvc_adapters.llm import AlphaModel, BetaModel, Families, LocalModel, PrefixRouter
from agentsvc_adapters.mcp import SdkMcpClient
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.oauth import HttpOAuth
from agentsvc_adapters.outbound import FAILURES as OUTBOUND_FAILURES
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.postgres import (
    EmbeddedPostgres,
    EmbeddedPostgresError,
    PostgresStopBus,
    PostgresStorage,
    migrate,
)
from agentsvc_adapters.prices import PriceFileError, load_prices
from agentsvc_adapters.registry import HttpMcpRegistry
from agentsvc_adapters.resolver import HttpCredentialResolver
from agentsvc_adapters.signals import LocalRevocations, LocalStopBus
from agentsvc_adapters.sqldb import PostgresDatabases
from agentsvc_adapters.telemetry import (
    OtelConfigError,
    OtelExport,
    SpanMetrics,
    add_traceparent,
    otel_export_from_env,
    sampler_from_env,
)
from agentsvc_adapters.web import BraveSearch, HttpWebFetcher
from agentsvc_adapters.web.brave import BRAVE_URL
from agentsvc_adapters.webhooks import HttpWebhookCaller
from agentsvc_core.errors import DomainError, InvalidInput
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
    TokenVerifier,
    WebhookCaller,
)
from agentsvc_core.ports.documents import DocumentParser
from agentsvc_core.ports.embeddings import Embedder
from agentsvc_core.ports.jobs import JobHandler
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.oauth import OAuthNetwork
from agentsvc_core.ports.registry import McpRegistry
from agentsvc_core.ports.resolver import CredentialResolver
from agentsvc_core.ports.web import WebFetcher, WebSearch
from agentsvc_core.telemetry import SpanTracer
from agentsvc_core.use_cases import Agents, ApiKeys, Authenticator, Conversation, Threads
from agentsvc_core.use_cases.compaction import Compactor
from agentsvc_core.use_cases.health import Readiness
from agentsvc_core.use_cases.idempotency import Idempotency
from agentsvc_core.use_cases.integrations import Integrations, IntegrationTools
from agentsvc_core.use_cases.knowledge import INDEX_JOB, Knowledge, KnowledgeLimits
from agentsvc_core.use_cases.knowledge_tools import KnowledgeTools
from agentsvc_core.use_cases.logs import Analytics, Logs
from agentsvc_core.use_cases.mcp_oauth import McpOAuth
from agentsvc_core.use_cases.mcp_servers import McpServers, McpTools
from agentsvc_core.use_cases.memories import Memories, MemorySettings
from agentsvc_core.use_cases.memory_collect import COLLECT_JOB, MemoryCollector
from agentsvc_core.use_cases.memory_tools import MemoryTools
from agentsvc_core.use_cases.org_settings import (
    AgentConfigs,
    CompactionSettings,
    KeyBroker,
    OrgSettings,
)
from agentsvc_core.use_cases.plan_tools import PlanSettings, PlanTools
from agentsvc_core.use_cases.plans import Plans
from agentsvc_core.use_cases.registry import RegistrySearch
from agentsvc_core.use_cases.runners.agent_steps import AgentSteps
from agentsvc_core.use_cases.runners.analytics import RunnerAnalytics
from agentsvc_core.use_cases.runners.budgets import Budgets
from agentsvc_core.use_cases.runners.definitions import Runners
from agentsvc_core.use_cases.runners.engine import EngineSettings, RunnerEngine
from agentsvc_core.use_cases.runners.runs import RUN_JOB, RunnerRuns
from agentsvc_core.use_cases.runners.trace import RunTraces
from agentsvc_core.use_cases.runners.work import StepWork, WebhookSteps
from agentsvc_core.use_cases.schedules import ScheduledTasks
from agentsvc_core.use_cases.server_tools import ToolHub
from agentsvc_core.use_cases.suggestions import Suggestions
from agentsvc_core.use_cases.traces import TraceConfig
from agentsvc_core.use_cases.web import WebSettings, WebTools
from agentsvc_core.use_cases.webhook_tools import WebhookTools, WebhookToolSource
from agentsvc_web.metrics import HttpMetrics, Reading, ReadingsCollector, new_registry
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
        exports: Sequence[OtelExport] = (),
        sampling: tuple[float, bool] = (1.0, True),
        databases: SqlDatabases | None = None,
        web_fetcher: WebFetcher | None = None,
        web_search: WebSearch | None = None,
        embedder: Embedder | None = None,
        parser: DocumentParser | None = None,
    ) -> None:
        clock = SystemClock()
        revocations = revocations or LocalRevocations()
        self.settings = settings
        self.storage = storage
        self.verifier = verifier
        self.stops = stops
        # async callables run at shutdown (provider clients' connection pools)
        self.closers: list[Callable[[], Awaitable[None]]] = []
        # /metrics: this app's own registry (agentsvc_web/metrics.py). The HTTP
        # side is here; the telemetry of replies registers its metrics on it too.
        self.metrics = new_registry()
        self.http_metrics = HttpMetrics(self.metrics)
        self.metrics.register(_scrape_time_metrics(storage))
        self.readiness = Readiness(storage)
        # the turn's metrics are a sink of its finished spans on the same registry,
        # like the OpenTelemetry export (when configured)
        ratio, parent_based = sampling  # which new traces the export sends
        self.tracer = SpanTracer(
            [SpanMetrics(self.metrics), *exports],
            propagating=bool(exports),
            sample_ratio=ratio,
            parent_based=parent_based,
        )
        self.closers.extend(e.aclose for e in exports)
        self.agents = Agents(storage.agents, clock, settings.default_model)
        self.api_keys = ApiKeys(storage.api_keys, storage.organizations, clock, revocations)
        self.authenticator = Authenticator(
            storage.api_keys,
            storage.organizations,
            clock,
            verifier,
            key_cache_s=settings.api_key_cache_s,
            revocations=revocations,
        )
        self.threads = Threads(storage.threads, storage.agents, storage.conversations, clock)
        self.mcp_client = mcp_client
        self.box = box
        self.urls = urls
        self.registry = registry
        self.registry_search = RegistrySearch(registry)
        self.oauth_network = oauth_network
        self.oauth = McpOAuth(storage.secrets, oauth_network, box, clock, settings.base_url)
        self.mcps = McpServers(
            storage.mcps,
            storage.agents,
            mcp_client,
            box,
            urls,
            clock,
            allow_stdio=settings.allow_stdio_mcp,
            oauth=self.oauth,
            runners=storage.runners,
        )
        self.resolver = resolver
        self.org_settings = OrgSettings(
            storage.secrets,
            storage.agents,
            box,
            urls,
            clock,
            allow_http=settings.allow_private_network,
        )
        self.compaction = CompactionSettings(storage.secrets, storage.agents, box)
        self.webhook_caller = webhooks
        self.webhook_tools = WebhookTools(
            storage.webhook_tools,
            storage.agents,
            storage.threads,
            storage.secrets,
            box,
            webhooks,
            urls,
            clock,
            self.org_settings,
        )
        # database integrations: the customer's databases, read-only, through the guard
        self.databases = databases or PostgresDatabases(
            allow_private_network=settings.allow_private_network
        )
        self.integrations = Integrations(
            storage.integrations, storage.agents, storage.secrets, self.databases, box, clock
        )
        self.plans, self.plan_settings = (
            Plans(storage.plans, self.threads, clock),
            PlanSettings(storage.secrets, storage.agents, box),
        )
        self.web = self._web_tools(settings, storage, box, urls, web_fetcher, web_search)
        self._background(settings, storage, clock, embedder, parser)
        try:
            prices = load_prices(settings.prices_file)
        except PriceFileError as exc:
            raise SettingsError(str(exc)) from None
        self.trace_config = TraceConfig(
            prices=prices,
            retention=timedelta(days=settings.trace_retention_days),
            payload_bytes=settings.trace_payload_bytes,
            slow_first_token_s=settings.eval_slow_first_token_ms / 1000,
        )
        keys = KeyBroker(self.org_settings, resolver, self.tracer)
        self._memory(storage, box, clock, router, keys)
        self.tools = tools or ToolHub(self._tool_sources(mcp_client))
        self.conversation = Conversation(
            self.threads,
            storage.turn_reader,
            storage.conversations,
            router,
            self.tools,
            stops,
            clock,
            stale_after_s=settings.run_stale_after_s,
            keys=keys,
            configs=AgentConfigs(storage.secrets, box),
            compactor=Compactor(storage.secrets, box),
            streams=storage.streams,
            follows=follows,
            idempotency=storage.idempotency,
            replay_s=settings.stream_replay_s,
            flush_s=settings.stream_flush_ms / 1000,
            tracer=self.tracer,
            traces=self.trace_config,
            after_turn=[self.memory_collector.after_turn],
        )
        self._runners(settings, storage, box, urls, clock)
        # the agent's configurations go with it: the turn's record kinds
        self.agents.keeps_configs(storage.secrets, (*AgentConfigs.KINDS, *self.tools.kinds))
        self.idempotency = Idempotency(storage.idempotency, box, clock)
        self.logs, self.analytics = (
            Logs(storage.traces, clock),
            Analytics(
                storage.analytics,
                clock,
                self.trace_config.prices.taken,
                settings.trace_retention_days,
            ),
        )

    def _background(
        self,
        settings: Settings,
        storage: Storage,
        clock: SystemClock,
        embedder: Embedder | None,
        parser: DocumentParser | None,
    ) -> None:
        """The job queue and what runs on it: knowledge documents' indexing."""
        # background jobs: in PostgreSQL (shared by every process) or in this process
        self.jobs: PgJobs | MemoryJobs = (
            PgJobs(
                storage.pool,
                storage.conninfo,
                concurrency=settings.worker_concurrency,
                heartbeat_s=settings.job_heartbeat_s,
            )
            if isinstance(storage, PostgresStorage)
            else MemoryJobs(
                concurrency=settings.worker_concurrency, heartbeat_s=settings.job_heartbeat_s
            )
        )
        self.embedder = embedder
        self.knowledge = Knowledge(
            storage.knowledge,
            storage.agents,
            self.threads,
            self.jobs,
            parser or FileParser(),
            clock,
            embedder=embedder,
            limits=KnowledgeLimits(max_bytes=settings.knowledge_max_bytes),
        )

    def _runners(
        self,
        settings: Settings,
        storage: Storage,
        box: SecretBox,
        urls: UrlPolicy,
        clock: SystemClock,
    ) -> None:
        """What builds on the conversation: its streams (re-attach), runners, their
        runs and the engine that runs them on the job queue."""
        self.streams = self.conversation.streams
        self.runners = Runners(
            storage.runners,
            storage.agents,
            box,
            urls,
            clock,
            cron_min_interval_s=settings.cron_min_interval_s,
        )
        prices = self.trace_config.prices
        run_traces = RunTraces(storage.runners, storage.traces, clock, self.trace_config.retention)
        self.runner_runs = RunnerRuns(
            storage.runners, self.runners, self.jobs, clock, self.conversation, run_traces
        )
        agent_steps = AgentSteps(
            storage.runners,
            self.conversation,
            self.threads,
            storage.conversations,
            storage.agents,
            self.mcps,
            prices,
        )
        self.runner_engine = RunnerEngine(
            storage.runners,
            clock,
            StepWork(agent_steps, WebhookSteps(self.webhook_caller, self.org_settings, box)),
            Budgets(storage.runners, clock, prices),
            run_traces,
            EngineSettings(stale_after=timedelta(seconds=settings.run_stale_after_s)),
        )
        self.runner_analytics = RunnerAnalytics(storage.runners, clock)
        self.suggestions = Suggestions(
            storage.runners,
            storage.agents,
            self.threads,
            self.conversation,
            storage.traces,
            clock,
        )
        self.scheduled_tasks = ScheduledTasks(
            storage.runners, self.runners, storage.agents, storage.threads, clock
        )

    def _memory(
        self,
        storage: Storage,
        box: SecretBox,
        clock: SystemClock,
        router: ModelRouter,
        keys: KeyBroker,
    ) -> None:
        """Agents' memories, their configuration and their collection after turns."""
        self.memories = Memories(storage.memories, storage.agents, clock)
        self.memory_settings = MemorySettings(storage.secrets, storage.agents, box)
        self.memory_collector = MemoryCollector(
            self.memories,
            self.memory_settings,
            storage.memories,
            storage.conversations,
            storage.agents,
            router,
            keys,
            self.org_settings,
            self.jobs,
            clock,
            self.trace_config.prices,
        )

    def _web_tools(
        self,
        settings: Settings,
        storage: Storage,
        box: SecretBox,
        urls: UrlPolicy,
        fetcher: WebFetcher | None,
        search: WebSearch | None,
    ) -> WebSettings:
        """The web tools' adapters (a host that passes no fetcher, a test, gets one
        over the guard, closed with the rest) and the agents' web configuration."""
        if fetcher is None:
            own = HttpWebFetcher(
                urls
                if isinstance(urls, OutboundGuard)
                else OutboundGuard(allow_private_network=settings.allow_private_network)
            )
            self.closers.append(own.aclose)
            fetcher = own
        self.web_fetcher = fetcher
        self.web_search = search
        return WebSettings(
            storage.secrets,
            storage.agents,
            box,
            search_provider=search.provider if search is not None else None,
        )

    def _tool_sources(self, mcp_client: McpClient) -> list[ServerTools]:
        """The server-side tool sources of a turn, in the order the model sees them."""
        return [
            McpTools(self.mcps, mcp_client),
            WebhookToolSource(self.webhook_tools, self.storage.webhook_tools),
            IntegrationTools(self.integrations, self.databases),
            PlanTools(self.plans, self.plan_settings),
            MemoryTools(self.memories, self.memory_settings),
            KnowledgeTools(self.knowledge),
            WebTools(self.web, self.web_fetcher, self.web_search),
        ]

    @property
    def job_handlers(self) -> dict[str, JobHandler]:
        """The background jobs this service runs, by kind."""
        return {
            INDEX_JOB: self.knowledge.index,
            COLLECT_JOB: self.memory_collector.collect,
            RUN_JOB: self.runner_engine.execute,
        }

    async def _open_database(self, storage: PostgresStorage) -> None:
        """Migrate (unless told not to), open the pool, prepare knowledge search."""
        try:
            if self.settings.migrate_on_start:
                await migrate(storage.conninfo)
            await storage.open()
        except DomainError as exc:
            raise SettingsError(exc.detail) from None
        await self._prepare_knowledge(storage)

    async def _prepare_knowledge(self, storage: PostgresStorage) -> None:
        """Check the text search configuration; set up vectors when an embedding
        provider is configured (pgvector), or say why search stays full text."""
        language = self.settings.knowledge_language
        if not await storage.knowledge.check_language():
            raise SettingsError(
                f"AGENTSVC_KNOWLEDGE_LANGUAGE: the PostgreSQL server has no text search"
                f" configuration {language!r} (the server's pg_ts_config lists those it has)"
            )
        if self.embedder is None:
            return
        why = await storage.knowledge.enable_vectors(self.embedder.dimensions)
        if why is not None:
            log.warning("knowledge search is full text only: %s", why)
        else:
            log.info(
                "knowledge search is hybrid: full text and %s vectors (pgvector)",
                self.embedder.model,
            )

    async def _sweep(self) -> None:
        """Replies whose process died stop counting as running; rows stored since
        the last sweep are folded into analytics' hourly and daily sums; traces kept long
        enough go."""
        try:
            _log_sweep(await self.conversation.sweep())
        except DomainError as exc:
            log.warning("sweep of interrupted replies failed: %s", exc.detail)
        try:
            again = await self.knowledge.resume()
            if again:
                log.warning("queued again %d document indexings whose job was lost", again)
        except DomainError as exc:
            log.warning("the sweep of document indexings failed: %s", exc.detail)
        try:
            again = await self.runner_runs.resume_stale(
                timedelta(seconds=self.settings.run_stale_after_s)
            )
            if again:
                log.warning("queued again %d runner runs whose job was lost", again)
        except DomainError as exc:
            log.warning("the sweep of runner runs failed: %s", exc.detail)
        try:
            await self.analytics.roll_up()
            pruned = await self.logs.prune()
            if pruned:
                log.info("pruned %d traces past their retention", pruned)
        except DomainError as exc:
            log.warning("the sweep of traces and analytics failed: %s", exc.detail)

    async def _schedule_forever(self) -> None:
        """Due cron ticks (runners' triggers, agents' scheduled tasks) become runs:
        every process looks, and each tick is taken by one of them."""
        every = self.settings.scheduler_tick_ms / 1000
        while True:
            try:
                await self.runner_runs.fire_due()
            except DomainError as exc:
                log.warning("the scheduler could not fire due triggers: %s", exc.detail)
            await asyncio.sleep(every)

    async def _analyze_forever(self, storage: PostgresStorage) -> None:
        """Tables that doubled since their statistics get new ones, so the plans
        prepared while they were small are made again (postgres/statistics.py)."""
        every = self.settings.analyze_every_ms / 1000
        while True:
            try:
                analyzed = await storage.analyze_grown()
                if analyzed:
                    log.info("analyzed %s: grown since their statistics", ", ".join(analyzed))
            except DomainError as exc:
                log.warning("the statistics of grown tables failed: %s", exc.detail)
            await asyncio.sleep(every)

    async def _sweep_forever(self) -> None:
        """The sweep every 30 s (after the one at start-up)."""
        while True:
            await asyncio.sleep(min(SWEEP_EVERY_S, self.settings.run_stale_after_s / 2))
            await self._sweep()

    @asynccontextmanager
    async def _working(self) -> AsyncIterator[None]:
        """The background jobs' worker in this process (``AGENTSVC_WORKER``), for the
        block's life; at its end the jobs running get the shutdown grace to finish."""
        if not self.settings.worker:
            if isinstance(self.jobs, MemoryJobs):
                log.warning("AGENTSVC_WORKER is off with memory storage: no job will run")
            yield
            return
        worker = asyncio.create_task(self.jobs.work(self.job_handlers))
        try:
            yield
        finally:
            self.jobs.stop()
            await _stop_worker(worker, self.settings.shutdown_grace_s)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Services]:
        """Migrate and open storage, ensure the bootstrap key, sweep replies whose
        process died; on the way out let running replies finish briefly, then close."""
        try:
            if isinstance(self.storage, PostgresStorage):
                await self._open_database(self.storage)
            if isinstance(self.stops, PostgresStopBus):
                await self.stops.start()
            if self.settings.bootstrap_api_key:
                try:
                    await self.api_keys.ensure(
                        self.settings.bootstrap_org, self.settings.bootstrap_api_key
                    )
                except InvalidInput as exc:
                    raise SettingsError(exc.detail) from None
                log.info(
                    "bootstrap API key is valid for organization %r", self.settings.bootstrap_org
                )
            await self._sweep()  # before serving: a crashed process's threads are free
            sweeper = asyncio.create_task(self._sweep_forever())
            scheduler = asyncio.create_task(self._schedule_forever())
            analyzer = None
            if isinstance(self.storage, PostgresStorage) and self.settings.analyze_every_ms:
                analyzer = asyncio.create_task(self._analyze_forever(self.storage))
            async with self._working():
                try:
                    yield self
                finally:
                    self.readiness.drain()
                    sweeper.cancel()
                    scheduler.cancel()
                    if analyzer is not None:
                        analyzer.cancel()
                    self.jobs.stop()  # no new jobs; the running ones may finish
                    await self.conversation.shutdown(grace_s=self.settings.shutdown_grace_s)
        finally:
            if isinstance(self.stops, PostgresStopBus):
                await self.stops.close()
            if isinstance(self.verifier, JwtVerifier):
                await self.verifier.aclose()
            for close in self.closers:
                await close()
            await self.mcp_client.aclose()
            if isinstance(self.storage, PostgresStorage):
                await self.storage.close()


async def _stop_worker(worker: asyncio.Task[None], grace_s: float) -> None:
    """Let the jobs running finish within ``grace_s``, then cancel them: a job
    cut short is picked again (its heartbeat goes stale) by another worker."""
    done, _ = await asyncio.wait({worker}, timeout=grace_s)
    if not done:
        log.warning("background jobs still running after %ss: stopped", grace_s)
        worker.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await worker


def _scrape_time_metrics(storage: Storage) -> ReadingsCollector:
    """Numbers the adapters keep anyway, read when /metrics is scraped: the
    outbound guard's failures by reason and, on PostgreSQL, the pool's use."""
    readings: list[Reading] = []
    if isinstance(storage, PostgresStorage):
        use = storage.pool_use
        for key, kind, doc in _POOL_READINGS:
            name = f"agentsvc_db_pool_{key}"
            readings.append((name, doc, kind, lambda key=key: use()[key]))  # type: ignore[misc]
    return ReadingsCollector(
        readings,
        labelled=(
            "agentsvc_outbound_failures",
            "Outbound calls (MCP servers, OAuth, resolver, registry, web tools) refused by the "
            "outbound guard or not connected (reason=unreachable), by reason",
            "reason",
            lambda: dict(OUTBOUND_FAILURES),
        ),
    )


_POOL_READINGS = (
    ("size", "gauge", "Connections the database pool holds now"),
    ("available", "gauge", "Idle connections in the database pool now"),
    ("waiting", "gauge", "Requests waiting for a database connection now"),
    ("max", "gauge", "The database pool's maximum size (AGENTSVC_DB_POOL_MAX)"),
    ("requests", "counter", "Connections requested from the database pool"),
    ("requests_errors", "counter", "Connection requests that failed (timeout, pool full)"),
    ("requests_wait_seconds", "counter", "Time spent waiting for a database connection"),
    ("connections_errors", "counter", "Failed attempts to open a database connection"),
    ("connections_lost", "counter", "Database connections found broken"),
)

SWEEP_EVERY_S = 30.0  # at most; shorter when replies go stale sooner


def _log_sweep(count: int) -> None:
    if count:
        log.warning("marked %d replies interrupted (their process had stopped)", count)


def _verifier(settings: Settings) -> TokenVerifier | None:
    if not settings.jwt_secret and not settings.jwt_jwks_url:
        return None
    try:
        return JwtVerifier(
            algorithms=settings.jwt_algorithms,
            secret=settings.jwt_secret,
            jwks_url=settings.jwt_jwks_url,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            org_claim=settings.jwt_org_claim,
            role_claim=settings.jwt_role_claim,
            admin_role=settings.jwt_admin_role,
        )
    except JwtConfigError as exc:
        raise SettingsError(str(exc)) from None


def start_embedded(settings: Settings) -> EmbeddedPostgres:
    """Start (or join) the embedded server whose data lives in ``<data dir>/pgdata``.

    Only the object that started the server stops it: ``agentsvc serve`` keeps
    the one it gets here and stops it on exit."""
    if not settings.local_defaults:  # Settings.from_env refuses this earlier, with more
        raise SettingsError("AGENTSVC_DATABASE_URL must be set (AGENTSVC_LOCAL_DEFAULTS=false)")
    server = EmbeddedPostgres(settings.data_dir / "pgdata")
    try:
        server.start()
    except EmbeddedPostgresError as exc:
        raise SettingsError(f"the embedded PostgreSQL did not start: {exc}") from None
    log.info("using the embedded PostgreSQL in %s", settings.data_dir / "pgdata")
    return server


def database_url(settings: Settings) -> str:
    """The external server's URL, or the embedded one's (started if need be).

    ``agentsvc serve`` starts the embedded server itself before its workers, so
    they find ``AGENTSVC_DATABASE_URL`` set; this start is for other hosts of
    ``create_app``, and leaves the server running when they exit."""
    return settings.database_url or start_embedded(settings).url


def _storage(settings: Settings) -> Storage:
    if settings.storage == "memory":
        return MemoryStorage()
    return PostgresStorage(
        database_url(settings),
        min_size=settings.db_pool_min,
        max_size=max(settings.db_pool_max, settings.db_pool_min),
        timeout=float(settings.db_pool_timeout_s),
        knowledge_language=settings.knowledge_language,
    )


async def run_migrations(settings: Settings) -> list[int]:
    """Apply pending migrations to the configured database (``agentsvc migrate``)."""
    return await migrate(database_url(settings))


def _providers(settings: Settings) -> tuple[AlphaModel | None, BetaModel | None]:
    """The local model always; a provider family when its base URL or key is set
    (a base URL alone serves a local OpenAI-compatible server that needs no key)."""
    alpha: AlphaModel | None = None
    beta: BetaModel | None = None
    timeout = float(settings.provider_read_timeout_s)
    if settings.alpha_base_url or settings.alpha_api_key:
        alpha = AlphaModel(
            settings.alpha_base_url or "https://api.anthropic.com",
            settings.alpha_api_key or "",
            read_timeout_s=timeout,
            max_connections=settings.provider_max_connections,
        )
    if settings.beta_base_url or settings.beta_api_key:
        beta = BetaModel(
            settings.beta_base_url or "https://api.openai.com/v1",
            settings.beta_api_key or "",
            max_tokens_field=settings.beta_max_tokens_field,
            read_timeout_s=timeout,
            max_connections=settings.provider_max_connections,
        )
    return alpha, beta


def _web_search(settings: Settings, guard: OutboundGuard) -> BraveSearch | None:
    """The search engine of ``web_search``, when AGENTSVC_WEB_SEARCH_API_KEY is set."""
    if settings.web_search_provider != "brave" or not settings.web_search_api_key:
        return None
    return BraveSearch(guard, settings.web_search_api_key, settings.web_search_url or BRAVE_URL)


def _embedder(settings: Settings, guard: OutboundGuard) -> OpenAIEmbedder | None:
    """The embeddings provider of knowledge search, when AGENTSVC_EMBEDDINGS_URL is set."""
    if settings.embeddings_url is None:
        return None
    return OpenAIEmbedder(
        settings.embeddings_url,
        settings.embeddings_api_key,
        settings.embeddings_model,
        settings.embeddings_dimensions,
        guard,
        send_dimensions=settings.embeddings_send_dimensions,
    )


def secret_box(settings: Settings) -> AesGcmBox:
    """Keys from AGENTSVC_ENCRYPTION_KEYS; else, with PostgreSQL, a key kept in the
    data folder (created once); with memory storage, a key for this process only."""
    try:
        if settings.encryption_keys or settings.storage == "postgres":
            # no data folder without the local defaults: a missing key is an error
            folder = settings.data_dir if settings.local_defaults else None
            return AesGcmBox(load_keyring(settings.encryption_keys, folder))
    except KeyringError as exc:
        raise SettingsError(str(exc)) from None
    return AesGcmBox(parse_keys(new_key_spec("memory")))


def build_services(settings: Settings) -> Services:
    storage = _storage(settings)
    # one LISTEN connection per process carries both stops and key revocations
    signals = (
        PostgresStopBus(storage.conninfo, storage.pool, storage.owner)
        if isinstance(storage, PostgresStorage)
        else None
    )
    stops: StopBus = signals or LocalStopBus()
    revocations: Revocations = signals or LocalRevocations()
    alpha, beta = _providers(settings)
    local = LocalModel(settings.local_slow_delay_ms / 1000)
    router = PrefixRouter(Families(local=local, alpha=alpha, beta=beta), settings.model_routes)
    try:
        exports = otel_export_from_env()
        sampling = sampler_from_env() if exports else (1.0, True)
    except OtelConfigError as exc:
        raise SettingsError(str(exc)) from None
    # with tracing export on, outbound calls name the current span (W3C traceparent)
    hooks = (add_traceparent,) if exports else ()
    # the one outbound guard: the URL policy and the HTTP clients of every adapter
    # that contacts a URL a user or the configuration supplies
    guard = OutboundGuard(allow_private_network=settings.allow_private_network, request_hooks=hooks)
    registry = HttpMcpRegistry(settings.mcp_registry_url, guard)
    oauth_network = HttpOAuth(guard)
    resolver = HttpCredentialResolver(guard)
    webhooks = HttpWebhookCaller(guard)
    web_fetcher = HttpWebFetcher(guard)
    web_search = _web_search(settings, guard)
    embedder = _embedder(settings, guard)
    services = Services(
        settings,
        storage,
        _verifier(settings),
        router,
        stops,
        box=secret_box(settings),
        mcp_client=SdkMcpClient(
            allow_private_network=settings.allow_private_network,
            allow_stdio=settings.allow_stdio_mcp,
            request_hooks=hooks,
        ),
        urls=guard,
        registry=registry,
        oauth_network=oauth_network,
        resolver=resolver,
        webhooks=webhooks,
        revocations=revocations,
        follows=signals,
        exports=exports,
        sampling=sampling,
        web_fetcher=web_fetcher,
        web_search=web_search,
        embedder=embedder,
    )
    services.closers.extend(
        [registry.aclose, oauth_network.aclose, resolver.aclose, webhooks.aclose]
    )
    services.closers.append(web_fetcher.aclose)
    if web_search is not None:
        services.closers.append(web_search.aclose)
    if embedder is not None:
        services.closers.append(embedder.aclose)
    services.closers.extend(m.aclose for m in (alpha, beta) if m is not None)
    return services
