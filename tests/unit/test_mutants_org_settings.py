"""Organization settings, resolver and compaction configurations (docs/byok.md,
docs/compaction.md; use_cases/org_settings.py) over the memory storage: who may read
and change them, their bounds, the signing secret's rotation and grace, and the turn's
keys."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.telemetry.metrics import SpanMetrics
from agentsvc_core.entities import Principal
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports.resolver import (
    CredentialResolver,
    Resolution,
    ResolverOutcome,
    ResolverRequest,
)
from agentsvc_core.ports.telemetry import FinishedSpan, SpanSink
from agentsvc_core.telemetry import SpanTracer
from agentsvc_core.use_cases.org_settings import (
    MAX_DOMAINS,
    AgentConfigs,
    CompactionConfig,
    CompactionSettings,
    KeyBroker,
    OrgSettings,
    ResolverConfig,
)
from tests.contract.test_agents_contract import agent_in
from tests.unit.turn_world import Clock

ORG = "org-settings"
ADMIN = Principal(org_id=ORG, method="api_key")
MEMBER = Principal(org_id=ORG, method="jwt", user_id="alice")
JWT_ADMIN = Principal(org_id=ORG, method="jwt", user_id="root", role="admin")
BOX = AesGcmBox([("k1", b"\x03" * 32)])


class Urls:
    def __init__(self) -> None:
        self.refuse: str | None = None
        self.asked: list[str] = []

    def refusal(self, url: str) -> str | None:
        self.asked.append(url)
        return self.refuse


class Setup:
    def __init__(self, *, allow_http: bool = False) -> None:
        self.storage = MemoryStorage()
        self.clock = Clock()
        self.urls = Urls()
        self.settings = OrgSettings(
            self.storage.secrets,
            self.storage.agents,
            BOX,
            self.urls,
            self.clock,
            allow_http=allow_http,
        )
        self.compaction = CompactionSettings(self.storage.secrets, self.storage.agents, BOX)

    async def agent(self) -> uuid.UUID:
        agent = agent_in(ORG)
        await self.storage.agents.add(agent)
        return agent.id


# --- the signing secret and embed domains ---------------------------------------


async def test_a_signing_secret_is_made_once_and_kept() -> None:
    s = Setup()
    first = await s.settings.get(ADMIN)
    assert first.signing_secret.startswith("whsec_")
    assert len(first.signing_secret) == len("whsec_") + 43  # 32 random bytes
    assert (await s.settings.get(ADMIN)).signing_secret == first.signing_secret
    assert await s.settings.signing_secrets(ORG) == [first.signing_secret]
    assert (first.org_id, first.allowed_embed_domains) == (ORG, ())


async def test_organizations_have_their_own_secrets() -> None:
    s = Setup()
    other = Principal(org_id="org-other", method="api_key")
    assert (await s.settings.get(ADMIN)).signing_secret != (
        await s.settings.get(other)
    ).signing_secret


async def test_only_admins_read_or_change_the_settings() -> None:
    s = Setup()
    with pytest.raises(
        PermissionDenied, match=r"^organization settings are managed by the organization's admins$"
    ):
        await s.settings.get(MEMBER)
    with pytest.raises(PermissionDenied):
        await s.settings.update(MEMBER, domains=["a.example"], rotate=True)
    await s.settings.get(JWT_ADMIN)


async def test_rotation_keeps_the_previous_secret_for_a_day() -> None:
    s = Setup()
    old = (await s.settings.get(ADMIN)).signing_secret
    new = (await s.settings.update(ADMIN, domains=None, rotate=True)).signing_secret
    assert new != old
    assert new.startswith("whsec_")
    assert len(new) == len(old)
    assert await s.settings.signing_secrets(ORG) == [new, old]
    s.clock.advance(24 * 3600 - 1)
    assert await s.settings.signing_secrets(ORG) == [new, old]
    s.clock.advance(1)  # the grace ends at 24 h exactly
    assert await s.settings.signing_secrets(ORG) == [new]


async def test_an_update_without_rotation_keeps_the_secret() -> None:
    s = Setup()
    old = (await s.settings.get(ADMIN)).signing_secret
    view = await s.settings.update(ADMIN, domains=["app.example.com"], rotate=False)
    assert view.signing_secret == old
    assert await s.settings.signing_secrets(ORG) == [old]


async def test_embed_domains_are_replaced_and_kept() -> None:
    s = Setup()
    view = await s.settings.update(ADMIN, domains=["*.example.com", "localhost:3000"], rotate=False)
    assert view.allowed_embed_domains == ("*.example.com", "localhost:3000")
    kept = await s.settings.update(ADMIN, domains=None, rotate=True)
    assert kept.allowed_embed_domains == ("*.example.com", "localhost:3000")
    cleared = await s.settings.update(ADMIN, domains=[], rotate=False)
    assert cleared.allowed_embed_domains == ()


async def test_embed_domains_are_bounded_and_checked() -> None:
    s = Setup()
    many = [f"d{i}.example" for i in range(MAX_DOMAINS)]
    await s.settings.update(ADMIN, domains=many, rotate=False)
    with pytest.raises(InvalidInput) as info:
        await s.settings.update(ADMIN, domains=[*many, "one.more"], rotate=False)
    assert (info.value.field, info.value.problem) == ("allowed_embed_domains", "at most 100")
    for bad in ("", " ", "https://a.example", "a" * 254):
        with pytest.raises(InvalidInput) as info:
            await s.settings.update(ADMIN, domains=[bad], rotate=False)
        assert info.value.field == "allowed_embed_domains"
    # at most 253 characters, a wildcard's "*." included
    labels = ".".join(["a" * 63] * 3)
    assert len(f"*.{labels}.{'b' * 60}") == 254
    with pytest.raises(InvalidInput):
        await s.settings.update(ADMIN, domains=[f"*.{labels}.{'b' * 60}"], rotate=False)
    await s.settings.update(ADMIN, domains=[f"*.{labels}.{'b' * 59}"], rotate=False)
    await s.settings.update(ADMIN, domains=many, rotate=False)
    # nothing of a refused update was kept
    assert (await s.settings.get(ADMIN)).allowed_embed_domains == tuple(many)


# --- the resolver -----------------------------------------------------------------


async def test_a_resolver_is_off_by_default() -> None:
    s = Setup()
    agent = await s.agent()
    assert await s.settings.resolver(ADMIN, agent) == ResolverConfig(
        agent_id=agent, org_id=ORG, enabled=False, resolver_url="", timeout_ms=5000
    )


async def test_the_resolver_of_an_unknown_agent_is_not_found() -> None:
    s = Setup()
    with pytest.raises(NotFound):
        await s.settings.resolver(ADMIN, uuid.uuid4())
    with pytest.raises(NotFound):
        await s.settings.set_resolver(ADMIN, uuid.uuid4(), enabled=False, url=None, timeout_ms=500)


async def test_a_resolver_is_stored_and_read_back() -> None:
    s = Setup()
    agent = await s.agent()
    config = await s.settings.set_resolver(
        ADMIN, agent, enabled=True, url="https://r.example/keys", timeout_ms=1500
    )
    assert config == ResolverConfig(
        agent_id=agent,
        org_id=ORG,
        enabled=True,
        resolver_url="https://r.example/keys",
        timeout_ms=1500,
    )
    assert await s.settings.resolver(ADMIN, agent) == config
    assert await s.settings.resolver_of(ORG, agent) == config
    assert s.urls.asked == ["https://r.example/keys"]


@pytest.mark.parametrize("timeout_ms", [100, 30_000])
async def test_the_resolver_timeout_bounds_are_inclusive(timeout_ms: int) -> None:
    s = Setup()
    agent = await s.agent()
    await s.settings.set_resolver(ADMIN, agent, enabled=False, url=None, timeout_ms=timeout_ms)


@pytest.mark.parametrize("timeout_ms", [99, 30_001])
async def test_a_resolver_timeout_out_of_bounds_is_refused(timeout_ms: int) -> None:
    s = Setup()
    agent = await s.agent()
    with pytest.raises(InvalidInput) as info:
        await s.settings.set_resolver(ADMIN, agent, enabled=False, url=None, timeout_ms=timeout_ms)
    assert (info.value.field, info.value.problem) == (
        "timeout_ms",
        "must be between 100 and 30000",
    )


async def resolver_refusal(url: str, *, allow_http: bool = False, refuse: str | None = None) -> str:
    s = Setup(allow_http=allow_http)
    s.urls.refuse = refuse
    agent = await s.agent()
    with pytest.raises(InvalidInput) as info:
        await s.settings.set_resolver(ADMIN, agent, enabled=True, url=url, timeout_ms=500)
    assert info.value.field == "resolver_url"
    return info.value.problem


async def test_a_resolver_url_must_be_https() -> None:
    assert await resolver_refusal("http://r.example/") == "must be an https:// URL"
    assert await resolver_refusal("ftp://r.example/") == "must be an https:// URL"
    assert await resolver_refusal("ftp://r.example/", allow_http=True) == "must be an https:// URL"


async def test_http_resolver_urls_when_allowed() -> None:
    s = Setup(allow_http=True)
    agent = await s.agent()
    config = await s.settings.set_resolver(
        ADMIN, agent, enabled=True, url="http://127.0.0.1:9/", timeout_ms=500
    )
    assert config.resolver_url == "http://127.0.0.1:9/"


async def test_a_resolver_url_with_spaces_too_long_or_refused_by_the_policy_is_refused() -> None:
    assert "spaces" in await resolver_refusal("https://r.example/a b")
    longest = "https://r.example/" + "a" * (2048 - 18)
    assert len(longest) == 2048
    await resolver_refusal(longest + "a")
    s = Setup()
    agent = await s.agent()
    await s.settings.set_resolver(ADMIN, agent, enabled=True, url=longest, timeout_ms=500)
    assert await resolver_refusal("https://r.example/", refuse="a private address") == (
        "a private address"
    )


async def test_an_enabled_resolver_needs_a_url() -> None:
    assert await resolver_refusal("") == "is required when enabled is true"


async def test_a_disabled_resolver_may_keep_a_url() -> None:
    s = Setup()
    agent = await s.agent()
    config = await s.settings.set_resolver(
        ADMIN, agent, enabled=False, url="https://r.example/", timeout_ms=500
    )
    assert (config.enabled, config.resolver_url) == (False, "https://r.example/")


# --- the keys of a turn -----------------------------------------------------------


class Resolver(CredentialResolver):
    def __init__(
        self, answer: str | None = "sk-user", outcome: ResolverOutcome | None = None
    ) -> None:
        self.answer = answer
        self.outcome = outcome  # None: "key" for a key, else "platform"
        self.status_code: int | None = None
        self.calls: list[tuple[str, ResolverRequest, list[str], int]] = []

    async def resolve(
        self, url: str, request: ResolverRequest, secrets: list[str], timeout_ms: int
    ) -> Resolution:
        self.calls.append((url, request, secrets, timeout_ms))
        outcome = self.outcome or ("key" if self.answer else "platform")
        return Resolution(self.answer, outcome, self.status_code)


class Spans(SpanSink):
    def __init__(self) -> None:
        self.ended: list[FinishedSpan] = []

    def on_end(self, span: FinishedSpan) -> None:
        self.ended.append(span)


def enabled_config() -> ResolverConfig:
    return ResolverConfig(
        agent_id=uuid.uuid4(), org_id=ORG, enabled=True, resolver_url="https://r.example/"
    )


async def test_the_broker_asks_the_resolver_with_the_signing_secrets() -> None:
    s = Setup()
    resolver = Resolver()
    broker = KeyBroker(s.settings, resolver)
    config = ResolverConfig(
        agent_id=uuid.uuid4(),
        org_id=ORG,
        enabled=True,
        resolver_url="https://r.example/",
        timeout_ms=1234,
    )
    assert await broker.key(config, user_id="alice", provider="alpha", model="m") == "sk-user"
    (call,) = resolver.calls
    assert call == (
        "https://r.example/",
        ResolverRequest(user_id="alice", org_id=ORG, provider="alpha", model="m"),
        await s.settings.signing_secrets(ORG),
        1234,
    )


@pytest.mark.parametrize(("enabled", "url"), [(False, "https://r.example/"), (True, "")])
async def test_no_resolver_call_when_disabled_or_without_url(enabled: bool, url: str) -> None:
    s = Setup()
    resolver = Resolver()
    config = ResolverConfig(agent_id=uuid.uuid4(), org_id=ORG, enabled=enabled, resolver_url=url)
    key = await KeyBroker(s.settings, resolver).key(config, user_id="u", provider="a", model="m")
    assert key is None
    assert resolver.calls == []


async def test_a_turn_asks_once_per_provider_family_even_for_no_key() -> None:
    s = Setup()
    resolver = Resolver(answer=None)
    config = ResolverConfig(
        agent_id=uuid.uuid4(), org_id=ORG, enabled=True, resolver_url="https://r.example/"
    )
    keys = KeyBroker(s.settings, resolver).for_turn(config, user_id="bob")
    assert await keys.key("alpha", "m1") is None
    assert await keys.key("alpha", "m2") is None
    resolver.answer = "sk-beta"
    assert await keys.key("beta", "b1") == "sk-beta"
    assert await keys.key("beta", "b1") == "sk-beta"
    assert [(c[1].provider, c[1].model, c[1].user_id) for c in resolver.calls] == [
        ("alpha", "m1", "bob"),
        ("beta", "b1", "bob"),
    ]


@pytest.mark.parametrize(("answer", "outcome"), [("sk-user", "key"), (None, "platform")])
async def test_the_span_of_an_answer_says_key_or_platform_and_is_not_failed(
    answer: str | None, outcome: ResolverOutcome
) -> None:
    s, spans = Setup(), Spans()
    broker = KeyBroker(s.settings, Resolver(answer), SpanTracer([spans]))
    got = await broker.key(enabled_config(), user_id="u", provider="beta", model="m")
    assert got == answer
    (span,) = spans.ended
    assert span.name == "resolve_credentials"
    assert span.kind == "client"
    assert dict(span.attributes) == {
        "agentsvc.provider.family": "beta",
        "agentsvc.resolver.outcome": outcome,
    }
    assert (span.status, span.error_type) == ("unset", None)


@pytest.mark.parametrize(
    ("outcome", "status_code", "error_type"),
    [
        ("refused", None, "RESOLVER_REFUSED"),
        ("timeout", None, "RESOLVER_TIMEOUT"),
        ("unreachable", None, "RESOLVER_UNREACHABLE"),
        ("status", 503, "RESOLVER_STATUS"),
        ("too_large", None, "RESOLVER_TOO_LARGE"),
        ("malformed", None, "RESOLVER_MALFORMED"),
    ],
)
async def test_a_failed_resolver_call_is_a_failed_span_that_says_why(
    outcome: ResolverOutcome, status_code: int | None, error_type: str
) -> None:
    s, spans = Setup(), Spans()
    resolver = Resolver(None, outcome)
    resolver.status_code = status_code
    registry = CollectorRegistry()
    broker = KeyBroker(s.settings, resolver, SpanTracer([spans, SpanMetrics(registry)]))
    assert await broker.key(enabled_config(), user_id="u", provider="beta", model="m") is None
    (span,) = spans.ended
    assert (span.status, span.error_type) == ("error", error_type)
    expected: dict[str, object] = {
        "agentsvc.provider.family": "beta",
        "agentsvc.resolver.outcome": outcome,
        "error.type": error_type,
    }
    if status_code is not None:
        expected["http.response.status_code"] = status_code
    assert dict(span.attributes) == expected
    # /metrics keeps one bounded "failed" label; the span says which failure
    assert registry.get_sample_value("agentsvc_resolver_calls_total", {"outcome": "failed"}) == 1


def test_a_resolution_never_shows_its_key() -> None:
    answer = Resolution("sk-secret-1f2e", "key")
    assert "sk-secret-1f2e" not in repr(answer)
    assert "sk-secret-1f2e" not in str([answer])
    assert repr(Resolution(None, "status", 500)) == (
        "Resolution(key=None, outcome='status', status_code=500)"
    )


# --- compaction settings ----------------------------------------------------------


async def test_compaction_is_off_by_default() -> None:
    s = Setup()
    agent = await s.agent()
    assert await s.compaction.get(ADMIN, agent) == CompactionConfig(
        agent_id=agent,
        org_id=ORG,
        enabled=False,
        alpha_trigger_tokens=150_000,
        alpha_instructions=None,
        alpha_pause_after=False,
        beta_compact_threshold=100_000,
    )


async def test_compaction_of_an_unknown_agent_is_not_found() -> None:
    s = Setup()
    with pytest.raises(NotFound):
        await s.compaction.update(ADMIN, uuid.uuid4(), {"enabled": True})


async def test_a_compaction_update_changes_only_the_fields_given() -> None:
    s = Setup()
    agent = await s.agent()
    await s.compaction.update(ADMIN, agent, {"enabled": True, "beta_compact_threshold": 2000})
    config = await s.compaction.update(ADMIN, agent, {"alpha_instructions": "keep names"})
    assert (
        config.enabled,
        config.beta_compact_threshold,
        config.alpha_instructions,
        config.alpha_trigger_tokens,
    ) == (True, 2000, "keep names", 150_000)
    assert await s.compaction.of(ORG, agent) == config


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        ({"alpha_trigger_tokens": 49_999}, "alpha_trigger_tokens", "between 50000 and 10000000"),
        (
            {"alpha_trigger_tokens": 10_000_001},
            "alpha_trigger_tokens",
            "between 50000 and 10000000",
        ),
        ({"beta_compact_threshold": 999}, "beta_compact_threshold", "between 1000 and 10000000"),
        (
            {"beta_compact_threshold": 10_000_001},
            "beta_compact_threshold",
            "between 1000 and 10000000",
        ),
        ({"alpha_instructions": "x" * 20_001}, "alpha_instructions", "at most"),
        ({"alpha_instructions": "\x00"}, "alpha_instructions", "NUL"),
    ],
)
async def test_compaction_bounds_are_checked(
    changes: dict[str, Any], field: str, problem: str
) -> None:
    s = Setup()
    agent = await s.agent()
    with pytest.raises(InvalidInput) as info:
        await s.compaction.update(ADMIN, agent, changes)
    assert info.value.field == field
    assert problem in info.value.problem
    assert await s.compaction.of(ORG, agent) == CompactionConfig(agent_id=agent, org_id=ORG)


async def test_compaction_bounds_are_inclusive() -> None:
    s = Setup()
    agent = await s.agent()
    bounds: list[dict[str, object]] = [
        {"alpha_trigger_tokens": 50_000, "beta_compact_threshold": 1_000},
        {"alpha_trigger_tokens": 10_000_000, "beta_compact_threshold": 10_000_000},
        {"alpha_instructions": "x" * 20_000},
    ]
    for changes in bounds:
        await s.compaction.update(ADMIN, agent, changes)


async def test_agent_configs_open_the_records_the_turn_read() -> None:
    s = Setup()
    agent = await s.agent()
    configs = AgentConfigs(s.storage.secrets, BOX)
    assert configs.opened(ORG, agent, {}) == (
        ResolverConfig(agent_id=agent, org_id=ORG),
        CompactionConfig(agent_id=agent, org_id=ORG),
    )
    resolver = await s.settings.set_resolver(
        ADMIN, agent, enabled=True, url="https://r.example/", timeout_ms=700
    )
    compaction = await s.compaction.update(ADMIN, agent, {"enabled": True})
    records = {
        kind: found
        for kind in AgentConfigs.KINDS
        if (found := await s.storage.secrets.get(ORG, kind, str(agent))) is not None
    }
    assert configs.opened(ORG, agent, records) == (resolver, compaction)
    only_compaction = {"compaction": records["compaction"]}
    assert configs.opened(ORG, agent, only_compaction) == (
        ResolverConfig(agent_id=agent, org_id=ORG),
        compaction,
    )
    assert AgentConfigs.KINDS == ("resolver", "compaction")
