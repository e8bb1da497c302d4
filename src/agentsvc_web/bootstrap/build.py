"""``build_services``: the adapters the settings choose (storage, the signals between
processes, the model providers, the tracing export, the one outbound guard and the
clients over it), handed to ``Services``, which wires the use cases."""

from __future__ import annotations

import os

from agentsvc_adapters.auth import JwtConfigError, JwtVerifier
from agentsvc_adapters.embeddings import OpenAIEmbedder
from agentsvc_adapters.git import GitSkillSource
from agentsvc_adapters.llm import AlphaModel, BetaModel, Families, LocalModel, PrefixRouter
from agentsvc_adapters.managed_oauth import ShippedManagedCatalogue
from agentsvc_adapters.mcp import SdkMcpClient
from agentsvc_adapters.oauth import HttpOAuth
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.postgres import PostgresStopBus, PostgresStorage
from agentsvc_adapters.registry import HttpMcpRegistry
from agentsvc_adapters.resolver import HttpCredentialResolver
from agentsvc_adapters.signals import LocalRevocations, LocalStopBus
from agentsvc_adapters.telemetry import (
    OtelConfigError,
    add_traceparent,
    otel_export_from_env,
    sampler_from_env,
)
from agentsvc_adapters.web import BraveSearch, HttpWebFetcher
from agentsvc_adapters.web.brave import BRAVE_URL
from agentsvc_adapters.webhooks import HttpWebhookCaller
from agentsvc_core.ports import Revocations, StopBus, TokenVerifier
from agentsvc_web.bootstrap.services import Services
from agentsvc_web.bootstrap.storage import build_storage, secret_box
from agentsvc_web.settings import Settings, SettingsError


def build_services(settings: Settings) -> Services:
    """Every adapter the settings choose, and the use cases wired over them."""
    storage = build_storage(settings)
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
    keyed = frozenset(
        f for f, key in (("alpha", settings.alpha_api_key), ("beta", settings.beta_api_key)) if key
    )
    router = PrefixRouter(
        Families(local=local, alpha=alpha, beta=beta, keyed=keyed), settings.model_routes
    )
    try:
        exports = otel_export_from_env()
        sampling = sampler_from_env() if exports else (1.0, True)
    except OtelConfigError as exc:
        raise SettingsError(str(exc)) from None
    # with tracing export on, outbound calls name the current span (W3C traceparent)
    hooks = (add_traceparent,) if exports else ()
    # the one outbound guard: the URL policy and the HTTP clients of every adapter
    # that contacts a URL a user or the configuration supplies
    try:  # the managed OAuth providers' catalogue, checked now: a bad one stops the start
        managed_catalogue = ShippedManagedCatalogue(os.environ)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    guard = OutboundGuard(allow_private_network=settings.allow_private_network, request_hooks=hooks)
    registry = HttpMcpRegistry(settings.mcp_registry_url, guard)
    oauth_network = HttpOAuth(guard)
    resolver = HttpCredentialResolver(guard)
    webhooks = HttpWebhookCaller(guard)
    web_fetcher = HttpWebFetcher(guard)
    skill_source = GitSkillSource(guard)
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
        news=signals,
        exports=exports,
        sampling=sampling,
        web_fetcher=web_fetcher,
        skill_source=skill_source,
        web_search=web_search,
        embedder=embedder,
        managed_catalogue=managed_catalogue,
    )
    services.closers.extend(
        [registry.aclose, oauth_network.aclose, resolver.aclose, webhooks.aclose]
    )
    services.closers.append(web_fetcher.aclose)
    services.closers.append(skill_source.aclose)
    if web_search is not None:
        services.closers.append(web_search.aclose)
    if embedder is not None:
        services.closers.append(embedder.aclose)
    services.closers.extend(m.aclose for m in (alpha, beta) if m is not None)
    return services


def _verifier(settings: Settings) -> TokenVerifier | None:
    """JWTs are accepted when a secret or a JWKS URL is configured."""
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
