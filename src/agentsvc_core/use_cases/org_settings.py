"""Organization settings (signing secret, embed domains) and agents' resolver configs.

Kept as sealed records of the organization (``SecretStore``): the signing secret
is a secret; the rest is small and sealed alike.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.errors import InvalidInput, PermissionDenied
from agentsvc_core.ports import AgentRepository, Clock, SealedRecord, SecretBox, SecretStore
from agentsvc_core.ports.erasure import ErasureStore
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.resolver import CredentialResolver, ResolverOutcome, ResolverRequest
from agentsvc_core.ports.telemetry import Tracer
from agentsvc_core.rules import check_embed_domain, check_text, check_url_text
from agentsvc_core.telemetry import SpanTracer
from agentsvc_core.use_cases.sealed import SealedRecords

ROTATION_GRACE = timedelta(hours=24)
MIN_TIMEOUT_MS = 100
MAX_TIMEOUT_MS = 30_000
MAX_DOMAINS = 100
MIN_RETENTION_DAYS = 1
MAX_RETENTION_DAYS = 3650


class _Signing(msgspec.Struct, frozen=True, kw_only=True):
    current: str
    previous: str | None = None
    previous_until: datetime | None = None
    allowed_embed_domains: tuple[str, ...] = ()


class OrgSettingsView(msgspec.Struct, frozen=True, kw_only=True):
    org_id: str
    allowed_embed_domains: tuple[str, ...]
    signing_secret: str
    thread_retention_days: int | None = None  # None: threads are kept


class ResolverConfig(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: UUID
    org_id: str
    enabled: bool = False
    resolver_url: str = ""
    timeout_ms: int = 5000


class OrgSettings:
    def __init__(
        self,
        store: SecretStore,
        agents: AgentRepository,
        box: SecretBox,
        urls: UrlPolicy,
        clock: Clock,
        *,
        allow_http: bool,
        retention: ErasureStore | None = None,
    ) -> None:
        """``retention``: where the organization's thread retention is kept (None:
        the setting is always null and cannot be set)."""
        self._retention = retention
        self._records = SealedRecords(store, box)
        self._agents = agents
        self._urls = urls
        self._clock = clock
        self._allow_http = allow_http

    # --- signing secret -----------------------------------------------------------

    async def _signing(self, org: str) -> _Signing:
        signing = await self._records.get(org, "org_settings", "signing", _Signing)
        if signing is not None:
            return signing
        created = _Signing(current="whsec_" + secrets.token_urlsafe(32))
        await self._records.put(org, "org_settings", "signing", created)
        return created

    async def signing_secrets(self, org: str) -> list[str]:
        """Secrets to sign with, newest first (the previous one during its grace period)."""
        s = await self._signing(org)
        keys = [s.current]
        if s.previous and s.previous_until and s.previous_until > self._clock.now():
            keys.append(s.previous)
        return keys

    async def embed_domains(self, org: str) -> tuple[str, ...]:
        """The sites allowed to embed the organization's pages (runner buttons)."""
        return (await self._signing(org)).allowed_embed_domains

    @staticmethod
    def _admin(who: Principal) -> None:
        if not who.is_admin:
            raise PermissionDenied("organization settings are managed by the organization's admins")

    async def get(self, who: Principal) -> OrgSettingsView:
        self._admin(who)
        s = await self._signing(who.org_id)
        days = None if self._retention is None else await self._retention.retention_days(who.org_id)
        return OrgSettingsView(
            org_id=who.org_id,
            allowed_embed_domains=s.allowed_embed_domains,
            signing_secret=s.current,
            thread_retention_days=days,
        )

    async def update(
        self,
        who: Principal,
        *,
        domains: list[str] | None,
        rotate: bool,
        retention_days: int | UnsetType | None = UNSET,
    ) -> OrgSettingsView:
        """``retention_days``: threads untouched for that many days are deleted by the
        maintenance sweep (None: kept; ``UNSET``: unchanged)."""
        self._admin(who)
        if domains is not None:  # every field checked before anything is written
            if len(domains) > MAX_DOMAINS:
                raise InvalidInput("allowed_embed_domains", f"at most {MAX_DOMAINS}")
            for d in domains:
                check_text("allowed_embed_domains", d, max_len=253, required=True)
                check_embed_domain("allowed_embed_domains", d)
        if retention_days is not UNSET:
            await self._set_retention(who.org_id, retention_days)
        s = await self._signing(who.org_id)
        if domains is not None:
            s = msgspec.structs.replace(s, allowed_embed_domains=tuple(domains))
        if rotate:
            s = msgspec.structs.replace(
                s,
                current="whsec_" + secrets.token_urlsafe(32),
                previous=s.current,
                previous_until=self._clock.now() + ROTATION_GRACE,
            )
        await self._records.put(who.org_id, "org_settings", "signing", s)
        return await self.get(who)

    async def _set_retention(self, org: str, days: int | None) -> None:
        if days is not None and not MIN_RETENTION_DAYS <= days <= MAX_RETENTION_DAYS:
            raise InvalidInput(
                "thread_retention_days",
                f"must be between {MIN_RETENTION_DAYS} and {MAX_RETENTION_DAYS}, or null",
            )
        if self._retention is None:
            raise InvalidInput("thread_retention_days", "this service keeps no retention")
        await self._retention.set_retention_days(org, days)

    # --- resolver configuration ---------------------------------------------------

    async def resolver(self, who: Principal, agent_id: UUID) -> ResolverConfig:
        await self._agents.get(who.org_id, agent_id)
        return await self.resolver_of(who.org_id, agent_id)

    async def resolver_of(self, org: str, agent_id: UUID) -> ResolverConfig:
        config = await self._records.get(org, "resolver", str(agent_id), ResolverConfig)
        return config or ResolverConfig(agent_id=agent_id, org_id=org)

    async def set_resolver(
        self, who: Principal, agent_id: UUID, *, enabled: bool, url: str | None, timeout_ms: int
    ) -> ResolverConfig:
        await self._agents.get(who.org_id, agent_id)
        if not MIN_TIMEOUT_MS <= timeout_ms <= MAX_TIMEOUT_MS:
            raise InvalidInput(
                "timeout_ms", f"must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS}"
            )
        url = url or ""
        if url:
            check_text("resolver_url", url, max_len=2048)
            check_url_text("resolver_url", url)
            if not url.startswith("https://") and not (
                self._allow_http and url.startswith("http://")
            ):
                raise InvalidInput("resolver_url", "must be an https:// URL")
            refusal = self._urls.refusal(url)
            if refusal:
                raise InvalidInput("resolver_url", refusal)
        if enabled and not url:
            raise InvalidInput("resolver_url", "is required when enabled is true")
        config = ResolverConfig(
            agent_id=agent_id,
            org_id=who.org_id,
            enabled=enabled,
            resolver_url=url,
            timeout_ms=timeout_ms,
        )
        await self._records.put(who.org_id, "resolver", str(agent_id), config)
        return config


RESOLVER_SPAN = "resolve_credentials"
# outcomes where the resolver answered as meant; any other is its failure
_ANSWERED: frozenset[ResolverOutcome] = frozenset({"key", "platform"})


class KeyBroker:
    """Which key serves a model call: the user's (from the agent's resolver) or the platform's."""

    def __init__(
        self, settings: OrgSettings, resolver: CredentialResolver, tracer: Tracer | None = None
    ) -> None:
        self._settings = settings
        self._resolver = resolver
        self._tracer = tracer or SpanTracer()

    async def key(
        self, config: ResolverConfig, *, user_id: str, provider: str, model: str
    ) -> str | None:
        if not config.enabled or not config.resolver_url:
            return None
        request = ResolverRequest(
            user_id=user_id, org_id=config.org_id, provider=provider, model=model
        )
        secrets_ = await self._settings.signing_secrets(config.org_id)
        # the resolver call's span: its outcome, never the key
        with self._tracer.start(
            RESOLVER_SPAN, "client", {"agentsvc.provider.family": provider}
        ) as span:
            answer = await self._resolver.resolve(
                config.resolver_url, request, secrets_, config.timeout_ms
            )
            span.set("agentsvc.resolver.outcome", answer.outcome)
            if answer.status_code is not None:
                span.set("http.response.status_code", answer.status_code)
            if answer.outcome not in _ANSWERED:
                # the turn goes on with the platform key, but the trace shows a failure
                span.fail("RESOLVER_" + answer.outcome.upper())
        return answer.key

    def for_turn(self, config: ResolverConfig, *, user_id: str) -> TurnKeys:
        """The keys of one turn: each provider family's resolved at most once."""
        return TurnKeys(self, config, user_id)


class TurnKeys:
    """The keys that pay for one turn's model calls (the resolver is called once per
    message sent, not per model call: docs/byok.md): the first call of a provider
    family resolves its key, the turn's later calls and its compaction summary reuse it. A
    key lives only as long as the turn holds this object: it is never stored, nor
    cached beyond the turn. A resolver that answered no key (platform key) is not
    asked again in the same turn either."""

    __slots__ = ("_broker", "_config", "_keys", "_user_id")

    def __init__(self, broker: KeyBroker, config: ResolverConfig, user_id: str) -> None:
        self._broker = broker
        self._config = config
        self._user_id = user_id
        self._keys: dict[str, str | None] = {}  # provider family -> its key

    async def key(self, provider: str, model: str) -> str | None:
        if provider in self._keys:
            return self._keys[provider]
        key = await self._broker.key(
            self._config, user_id=self._user_id, provider=provider, model=model
        )
        self._keys[provider] = key
        return key

    def known(self) -> tuple[str, ...]:
        """The keys resolved so far (to redact from what the turn's trace keeps)."""
        return tuple(k for k in self._keys.values() if k)


MIN_ALPHA_TRIGGER = 50_000
MIN_BETA_THRESHOLD = 1_000
MAX_TOKENS_BOUND = 10_000_000


class CompactionConfig(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: UUID
    org_id: str
    enabled: bool = False
    alpha_trigger_tokens: int = 150_000
    alpha_instructions: str | None = None
    alpha_pause_after: bool = False
    beta_compact_threshold: int = 100_000


class CompactionSettings:
    """Per-agent compaction configuration (docs/compaction.md)."""

    def __init__(self, store: SecretStore, agents: AgentRepository, box: SecretBox) -> None:
        self._records = SealedRecords(store, box)
        self._agents = agents

    async def of(self, org: str, agent_id: UUID) -> CompactionConfig:
        config = await self._records.get(org, "compaction", str(agent_id), CompactionConfig)
        return config or CompactionConfig(agent_id=agent_id, org_id=org)

    async def get(self, who: Principal, agent_id: UUID) -> CompactionConfig:
        await self._agents.get(who.org_id, agent_id)
        return await self.of(who.org_id, agent_id)

    async def update(
        self, who: Principal, agent_id: UUID, changes: dict[str, object]
    ) -> CompactionConfig:
        """Only the supplied fields change (a concurrent update of others is not
        lost); bounds are checked on the result."""
        await self._agents.get(who.org_id, agent_id)
        return await self._records.change(
            who.org_id,
            "compaction",
            str(agent_id),
            CompactionConfig,
            lambda current: _checked(
                msgspec.structs.replace(
                    current or CompactionConfig(agent_id=agent_id, org_id=who.org_id), **changes
                )
            ),
        )


def _checked(updated: CompactionConfig) -> CompactionConfig:
    if not MIN_ALPHA_TRIGGER <= updated.alpha_trigger_tokens <= MAX_TOKENS_BOUND:
        raise InvalidInput(
            "alpha_trigger_tokens",
            f"must be between {MIN_ALPHA_TRIGGER} and {MAX_TOKENS_BOUND}",
        )
    if not MIN_BETA_THRESHOLD <= updated.beta_compact_threshold <= MAX_TOKENS_BOUND:
        raise InvalidInput(
            "beta_compact_threshold",
            f"must be between {MIN_BETA_THRESHOLD} and {MAX_TOKENS_BOUND}",
        )
    if updated.alpha_instructions is not None:
        check_text("alpha_instructions", updated.alpha_instructions, max_len=20_000)
    return updated


class AgentConfigs:
    """An agent's resolver and compaction configurations, opened from the sealed
    records the turn reads with the thread (``TurnReader``, kinds ``KINDS``)."""

    KINDS = ("resolver", "compaction")

    def __init__(self, store: SecretStore, box: SecretBox) -> None:
        self._records = SealedRecords(store, box)

    def opened(
        self, org: str, agent_id: UUID, records: Mapping[str, SealedRecord]
    ) -> tuple[ResolverConfig, CompactionConfig]:
        """The configurations from the agent's sealed records, by kind (defaults
        for the missing ones)."""
        key = str(agent_id)
        resolver = ResolverConfig(agent_id=agent_id, org_id=org)
        compaction = CompactionConfig(agent_id=agent_id, org_id=org)
        if "resolver" in records:
            resolver = self._records.open(
                org, "resolver", key, records["resolver"].value, ResolverConfig
            )
        if "compaction" in records:
            compaction = self._records.open(
                org, "compaction", key, records["compaction"].value, CompactionConfig
            )
        return resolver, compaction
