"""The Litestar application: routes, auth, error mapping, OpenAPI."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version

from litestar import Litestar, get
from litestar._openapi.plugin import OpenAPIPlugin  # (private: see _finish_document_when_built)
from litestar.datastructures import State
from litestar.di import Provide
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, OpenAPI, SecurityScheme

from agentsvc_web.access import access_guard, document_roles
from agentsvc_web.auth import bearer_auth
from agentsvc_web.body import JsonRequest
from agentsvc_web.bootstrap import Services, build_services
from agentsvc_web.chat_page import chat_page_routes
from agentsvc_web.controllers import (
    AgentController,
    AnalyticsController,
    KeyController,
    ThreadController,
    TracesController,
)
from agentsvc_web.controllers.branches import BranchController
from agentsvc_web.controllers.channels import (
    AgentChannelsController,
    ChannelLimits,
    ChannelWebhookController,
)
from agentsvc_web.controllers.code_sessions import (
    CodeAgentsController,
    CodeSessionsController,
)
from agentsvc_web.controllers.computer import AgentComputerController, ThreadComputerController
from agentsvc_web.controllers.erasure import UserDataController
from agentsvc_web.controllers.event_webhooks import EventWebhooksController
from agentsvc_web.controllers.integrations import (
    AgentIntegrationController,
    IntegrationController,
)
from agentsvc_web.controllers.knowledge import (
    FORM_OVERHEAD,
    KnowledgeController,
    uploads_up_to,
)
from agentsvc_web.controllers.managed_oauth import (
    AgentMcpServicesController,
    ManagedOAuthController,
    ManagedRegistryController,
)
from agentsvc_web.controllers.marketplace import (
    AgentMarketplaceController,
    MarketplaceController,
    PublicAvatarController,
)
from agentsvc_web.controllers.mcps import (
    AgentMcpController,
    McpController,
    McpOAuthController,
    RegistryController,
    RunnerMcpController,
)
from agentsvc_web.controllers.memories import AgentMemoryController
from agentsvc_web.controllers.models import ModelsController
from agentsvc_web.controllers.multiplayer import (
    AgentMultiplayerController,
    ThreadEventsController,
)
from agentsvc_web.controllers.plans import AgentPlanController, PlanController
from agentsvc_web.controllers.projects import ProjectController
from agentsvc_web.controllers.publishing.guards import ChatLimits
from agentsvc_web.controllers.publishing.owner import AgentPublishController
from agentsvc_web.controllers.publishing.public import (
    PublicChatController,
    PublicMarketplaceController,
)
from agentsvc_web.controllers.runners.public import (
    RunnerButtonController,
    RunnerWebhookController,
)
from agentsvc_web.controllers.runners.routes import RunnerController
from agentsvc_web.controllers.scheduled_tasks import ScheduledTasksController
from agentsvc_web.controllers.settings import (
    AgentCompactionController,
    AgentCredentialsController,
    OrgSettingsController,
)
from agentsvc_web.controllers.skills import AgentSkillsController, SkillController
from agentsvc_web.controllers.suggestions import (
    AgentSuggestionsController,
    RunnerSuggestionsController,
)
from agentsvc_web.controllers.thread_context import ThreadContextController
from agentsvc_web.controllers.tools import AgentDelegatedController, ToolController
from agentsvc_web.controllers.web import AgentWebController
from agentsvc_web.errors import EXCEPTION_HANDLERS
from agentsvc_web.headers import hardening_headers
from agentsvc_web.idempotency import idempotency_keys
from agentsvc_web.limits import RateLimits, rate_limits
from agentsvc_web.logs import configure_logging
from agentsvc_web.observe import outermost
from agentsvc_web.openapi import document_body_limits, document_event_streams, operations
from agentsvc_web.operations import metrics, readyz
from agentsvc_web.options import answer_options
from agentsvc_web.playground_ui import playground_router
from agentsvc_web.read_timeout import BodyDeadline, RequestReadTimeout, request_timeout_response
from agentsvc_web.schema_ui import asset_routers, viewers
from agentsvc_web.schemas import OkBody
from agentsvc_web.settings import Settings
from agentsvc_web.shutdown import drain_on_signals
from agentsvc_web.tracing import RequestSpans

# The one source of the version is pyproject.toml; the installed package's
# metadata carries it (``agentsvc --version`` and the OpenAPI document read it).
VERSION = version("agentsvc")


@get(
    "/healthz",
    operation_id="healthz",
    summary="Liveness probe (no authentication)",
    tags=["operations"],
    security=[],
)
async def healthz() -> OkBody:
    return OkBody(ok=True)


def _const(value: object) -> Provide:
    def provide() -> object:
        return value

    return Provide(provide, use_cache=True, sync_to_thread=False)


def create_app(settings: Settings | None = None, services: Services | None = None) -> Litestar:
    """Build the app. With no arguments (as ``uvicorn --factory`` calls it) the
    settings come from the environment."""
    settings = settings or Settings.from_env()
    # one format for every logger, in every worker process (agentsvc_web/logs.py)
    configure_logging(settings.log_level, settings.log_format)
    services = services or build_services(settings)

    by_address, by_credential = rate_limits(RateLimits.from_settings(settings))

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        async with services.running():
            yield

    app = Litestar(
        route_handlers=[
            AgentController,
            KeyController,
            ThreadController,
            McpController,
            AgentMcpController,
            RunnerMcpController,
            RegistryController,
            McpOAuthController,
            ManagedRegistryController,
            ManagedOAuthController,
            AgentMcpServicesController,
            AgentCredentialsController,
            AgentCompactionController,
            AgentWebController,
            AgentMultiplayerController,
            ThreadEventsController,
            OrgSettingsController,
            IntegrationController,
            AgentIntegrationController,
            TracesController,
            AnalyticsController,
            ToolController,
            AgentDelegatedController,
            PlanController,
            AgentPlanController,
            AgentMemoryController,
            KnowledgeController,
            AgentSuggestionsController,
            RunnerButtonController,
            RunnerController,
            RunnerSuggestionsController,
            RunnerWebhookController,
            ScheduledTasksController,
            ProjectController,
            SkillController,
            AgentSkillsController,
            MarketplaceController,
            AgentMarketplaceController,
            PublicAvatarController,
            AgentPublishController,
            AgentChannelsController,
            ChannelWebhookController,
            AgentComputerController,
            ThreadComputerController,
            CodeAgentsController,
            CodeSessionsController,
            ModelsController,
            ThreadContextController,
            UserDataController,
            EventWebhooksController,
            BranchController,
            PublicChatController,
            PublicMarketplaceController,
            *chat_page_routes(),
            uploads_up_to(settings.knowledge_max_bytes),
            healthz,
            readyz,
            metrics,
            *asset_routers(),
            playground_router(),
        ],
        dependencies={
            "agents": _const(services.agents),
            "api_keys": _const(services.api_keys),
            "threads": _const(services.threads),
            "conversation": _const(services.conversation),
            "branches": _const(services.branches),
            "streams": _const(services.streams),
            "mcps": _const(services.mcps),
            "registry": _const(services.registry_search),
            "oauth": _const(services.oauth),
            "managed_oauth": _const(services.managed_oauth),
            "org_settings": _const(services.org_settings),
            "compaction": _const(services.compaction),
            "integrations": _const(services.integrations),
            "web": _const(services.web),
            "multiplayer": _const(services.multiplayer),
            "thread_events": _const(services.thread_events),
            "traces": _const(services.traces),
            "analytics": _const(services.analytics),
            "webhook_tools": _const(services.webhook_tools),
            "plans": _const(services.plans),
            "plan_settings": _const(services.plan_settings),
            "memories": _const(services.memories),
            "memory_settings": _const(services.memory_settings),
            "knowledge": _const(services.knowledge),
            "runners": _const(services.runners),
            "runner_runs": _const(services.runner_runs),
            "runner_analytics": _const(services.runner_analytics),
            "scheduled_tasks": _const(services.scheduled_tasks),
            "suggestions": _const(services.suggestions),
            "projects": _const(services.projects),
            "templates": _const(services.templates),
            "marketplace": _const(services.marketplace),
            "publishing": _const(services.publishing),
            "public_chats": _const(services.public_chats),
            "public_listing": _const(services.public_listing),
            "skills": _const(services.skills),
            "skill_bindings": _const(services.skill_bindings),
            "channels": _const(services.channels),
            "channel_inbound": _const(services.channel_inbound),
            "computers": _const(services.computers),
            "code_agents": _const(services.code_agents),
            "code_sessions": _const(services.code_sessions),
            "models": _const(services.models),
            "thread_compaction": _const(services.thread_compaction),
            "erasure": _const(services.erasure),
            "event_webhooks": _const(services.event_webhooks),
        },
        middleware=[
            DefineMiddleware(RequestSpans, tracer=services.tracer),
            DefineMiddleware(BodyDeadline, timeout_s=settings.request_read_timeout_s),
            by_address,
            bearer_auth(services.authenticator),
            by_credential,
            idempotency_keys(
                services.idempotency,
                max(settings.max_body_bytes, settings.knowledge_max_bytes + FORM_OVERHEAD),
            ),
        ],
        guards=[access_guard],
        exception_handlers={**EXCEPTION_HANDLERS, RequestReadTimeout: request_timeout_response},
        request_class=JsonRequest,
        before_send=[hardening_headers],
        before_request=answer_options,
        state=State(
            {
                "sse_keepalive_s": settings.sse_keepalive_s,
                "readiness": services.readiness,
                "metrics": services.metrics,
                "metrics_token": settings.metrics_token,
                "http_metrics": services.http_metrics,
                # the public chats' request budgets and their preflights' chats
                "chat_limits": ChatLimits(settings.rate_limit_max_keys),
                "public_chats": services.public_chats,
                # the channels' inbound endpoints' request budgets
                "channel_limits": ChannelLimits(settings.rate_limit_max_keys),
            }
        ),
        lifespan=[lifespan],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="agentsvc",
            version=VERSION,
            description="Agent Conversation Service: agents, threads and streamed replies.",
            path="/schema",
            render_plugins=viewers(),  # no CDN: the viewers' assets are served from here
            components=Components(
                security_schemes={
                    "BearerToken": SecurityScheme(
                        type="http",
                        scheme="bearer",
                        description="An API key (ask_...) or a JWT",
                    )
                }
            ),
            security=[{"BearerToken": []}],
            use_handler_docstrings=False,
        ),
        debug=False,
        logging_config=None,
    )
    _finish_document_when_built(app)
    # request ids, HTTP metrics and CORS, around everything (agentsvc_web/observe.py)
    outermost(app, services.http_metrics, settings.cors_origins)
    return app


def serve_app() -> Litestar:
    """The app ``agentsvc serve`` runs (uvicorn's factory, in each worker):
    ``create_app()``, whose startup makes SIGTERM and SIGINT drain the running
    replies (``agentsvc_web.shutdown``) and ends with ``freeze_heap``."""
    settings = Settings.from_env()
    configure_logging(settings.log_level, settings.log_format)
    services = build_services(settings)
    app = create_app(settings, services)
    app.on_startup.append(
        drain_on_signals(
            services.conversation,
            settings.shutdown_grace_s,
            services.readiness,
            leaving=services.thread_events.close,
        )
    )
    app.on_startup.append(freeze_heap)
    return app


def freeze_heap() -> None:
    """Take what startup built (about 150,000 objects: the app, its routes and
    schemas, the libraries) out of the garbage collector's full passes: it lives as
    long as the process, and a full pass over it stopped every stream for about
    100 ms. Not in ``create_app``: tests build many apps in one process, and frozen
    objects are never collected."""
    gc.collect()
    gc.freeze()


def _finish_document_when_built(app: Litestar) -> None:
    """The OpenAPI document is built when first asked for (``/schema``, a test that
    reads ``app.openapi_schema``), not with every app: building it takes longer
    than the rest of ``create_app`` (about 0.1 s of each web test's app). Once
    built it is finished (``_FinishedDocument``), and Litestar keeps and serves
    the finished object."""
    plugin = app.plugins.get(OpenAPIPlugin)
    plugin.__class__ = _FinishedDocument


class _FinishedDocument(OpenAPIPlugin):
    """Litestar's OpenAPI plugin (private, Litestar 2.x, pinned <3), its build step
    followed by ours: the framework's 400s pruned, the event streams' schemas
    added, the roles written, 413 declared wherever a body is read. No slots of
    its own: an instance of the plugin can take this class."""

    __slots__ = ()

    def _build_openapi(self) -> OpenAPI:
        document = super()._build_openapi()
        _prune_framework_400s(document)
        document_event_streams(document)
        document_roles(self.app, document)
        document_body_limits(document)
        return document


def _prune_framework_400s(document: OpenAPI) -> None:
    """Litestar documents a 400 with its own body on every route that has
    parameters. Ours answers parameter errors with 422 and the one error body, so
    a 400 that is not ours is removed from the document."""
    for op in operations(document):
        bad = op.responses.get("400") if op.responses else None
        if op.responses is not None and bad is not None and "ErrorBody" not in str(bad):
            del op.responses["400"]
