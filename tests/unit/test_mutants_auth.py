"""The authenticator's checks and its JWT path, against the memory adapters and a
stub verifier. Written to kill the mutants `make mutation` found alive in
``agentsvc_core.use_cases.auth`` (docs/development.md); the key cache has its own
tests in test_auth_cache.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.signals import LocalRevocations
from agentsvc_core.entities import Organization
from agentsvc_core.errors import InvalidInput, Unauthenticated
from agentsvc_core.ports import OrganizationRepository, TokenVerifier
from agentsvc_core.ports.tokens import VerifiedToken
from agentsvc_core.use_cases import ApiKeys, Authenticator
from tests.unit.test_auth_cache import ADMIN, CountingKeys, build

JWT = "eyJhbGciOiJSUzI1NiJ9.e30.sig"


class StubVerifier(TokenVerifier):
    def __init__(self, verified: VerifiedToken) -> None:
        self.verified = verified
        self.seen: list[str] = []

    async def verify(self, token: str) -> VerifiedToken:
        self.seen.append(token)
        return self.verified


class CountingOrgs(OrganizationRepository):
    def __init__(self, inner: OrganizationRepository) -> None:
        self.inner = inner
        self.ensured: list[Organization] = []

    async def ensure(self, org: Organization) -> Organization:
        self.ensured.append(org)
        return await self.inner.ensure(org)

    async def get(self, org_id: str) -> Organization:
        return await self.inner.get(org_id)


def jwt_auth(verified: VerifiedToken) -> tuple[Authenticator, StubVerifier, CountingOrgs]:
    storage = MemoryStorage()
    verifier = StubVerifier(verified)
    orgs = CountingOrgs(storage.organizations)
    return Authenticator(storage.api_keys, orgs, SystemClock(), verifier), verifier, orgs


async def test_an_empty_token_is_refused_before_any_lookup() -> None:
    storage = MemoryStorage()
    keys = CountingKeys(storage.api_keys)
    auth = Authenticator(keys, storage.organizations, SystemClock(), None)
    with pytest.raises(Unauthenticated) as raised:
        await auth.authenticate("")
    assert str(raised.value) == "missing bearer token"
    assert keys.lookups == 0


async def test_an_api_key_becomes_an_api_key_principal() -> None:
    storage = MemoryStorage()
    issuer = ApiKeys(storage.api_keys, storage.organizations, SystemClock())
    auth = Authenticator(storage.api_keys, storage.organizations, SystemClock(), None)
    issued = await issuer.issue("acme", "k")
    who = await auth.authenticate(issued.token)
    assert (who.org_id, who.method, who.key_id, who.user_id) == (
        "acme",
        "api_key",
        issued.key.id,
        None,
    )
    assert who.is_admin
    with pytest.raises(Unauthenticated) as raised:
        await auth.authenticate("ask_" + "0" * 43)
    assert str(raised.value) == "unknown API key"
    await issuer.revoke(ADMIN, issued.key.id)
    with pytest.raises(Unauthenticated) as raised:
        await auth.authenticate(issued.token)
    assert str(raised.value) == "this API key has been revoked"


async def test_without_revocation_notices_keys_are_never_cached() -> None:
    """A cache that cannot hear of revocations would let a revoked key live on."""
    storage = MemoryStorage()
    keys = CountingKeys(storage.api_keys)
    issuer = ApiKeys(keys, storage.organizations, SystemClock())
    issued = await issuer.issue("acme", "k")
    for auth in (
        Authenticator(keys, storage.organizations, SystemClock(), None),
        Authenticator(keys, storage.organizations, SystemClock(), None, key_cache_s=3600),
    ):
        keys.lookups = 0
        for _ in range(3):
            await auth.authenticate(issued.token)
        assert keys.lookups == 3


async def test_by_default_there_is_no_cache_even_with_notices() -> None:
    storage = MemoryStorage()
    keys = CountingKeys(storage.api_keys)
    revocations = LocalRevocations()
    issuer = ApiKeys(keys, storage.organizations, SystemClock(), revocations)
    auth = Authenticator(keys, storage.organizations, SystemClock(), None, revocations=revocations)
    issued = await issuer.issue("acme", "k")
    for _ in range(3):
        await auth.authenticate(issued.token)
    assert keys.lookups == 3


async def test_revoked_keys_are_never_cached() -> None:
    issuer, auth, keys, _ = build(3600)
    issued = await issuer.issue("acme", "k")
    await keys.inner.revoke("acme", issued.key.id, datetime.now(UTC))  # no notice
    for _ in range(3):
        with pytest.raises(Unauthenticated, match="revoked"):
            await auth.authenticate(issued.token)
    assert keys.lookups == 3


async def test_the_cache_holds_exactly_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    issuer, auth, keys, _ = build(3600)
    monkeypatch.setattr(Authenticator, "MAX_CACHED_KEYS", 2)
    issued = [await issuer.issue("acme", f"k{i}") for i in range(3)]
    for key in issued:
        await auth.authenticate(key.token)
    assert keys.lookups == 3
    await auth.authenticate(issued[1].token)
    await auth.authenticate(issued[2].token)
    assert keys.lookups == 3  # the two newest are cached
    await auth.authenticate(issued[0].token)
    assert keys.lookups == 4  # the third insert dropped the oldest


async def test_every_notice_invalidates_a_lookup_in_flight() -> None:
    """Two notices, the second while a lookup is in flight: the lookup's result is
    not cached (a generation that only ever becomes 1 would miss the second)."""
    issuer, auth, keys, revocations = build(3600)
    other = await issuer.issue("acme", "other")
    issued = await issuer.issue("acme", "k")
    revocations.deliver_revoked(other.key.id)  # the first notice
    keys.gate = asyncio.Event()
    lookup = asyncio.create_task(auth.authenticate(issued.token))
    await asyncio.sleep(0)
    await keys.inner.revoke("acme", issued.key.id, datetime.now(UTC))
    revocations.deliver_revoked(issued.key.id)  # the second, while in flight
    keys.gate.set()
    keys.gate = None
    await lookup
    with pytest.raises(Unauthenticated, match="revoked"):
        await auth.authenticate(issued.token)


async def test_a_jwt_without_a_verifier_is_refused() -> None:
    storage = MemoryStorage()
    auth = Authenticator(storage.api_keys, storage.organizations, SystemClock(), None)
    with pytest.raises(Unauthenticated) as raised:
        await auth.authenticate(JWT)
    assert str(raised.value) == "not an API key, and JWT authentication is not configured"


async def test_a_jwt_becomes_a_jwt_principal_of_its_user() -> None:
    auth, verifier, _ = jwt_auth(VerifiedToken(subject="u1", org_id="acme", role="admin"))
    who = await auth.authenticate(JWT)
    assert verifier.seen == [JWT]
    assert (who.org_id, who.method, who.role, who.user_id, who.key_id) == (
        "acme",
        "jwt",
        "admin",
        "u1",
        None,
    )
    assert who.is_admin
    assert not who.acts_for_org
    member, _, _ = jwt_auth(VerifiedToken(subject="u2", org_id="acme"))
    who = await member.authenticate(JWT)
    assert (who.role, who.is_admin) == ("member", False)


async def test_a_jwt_organization_is_ensured_once_per_process() -> None:
    auth, verifier, orgs = jwt_auth(VerifiedToken(subject="u1", org_id="acme"))
    before = datetime.now(UTC)
    for _ in range(3):
        await auth.authenticate(JWT)
    assert [o.id for o in orgs.ensured] == ["acme"]
    assert orgs.ensured[0].created_at >= before
    assert (await orgs.get("acme")).id == "acme"
    verifier.verified = VerifiedToken(subject="u1", org_id="beta")
    await auth.authenticate(JWT)
    assert [o.id for o in orgs.ensured] == ["acme", "beta"]


@pytest.mark.parametrize("org_id", ["", "a b", "o" * 129, "../x"])
async def test_a_jwt_with_an_invalid_organization_is_unauthenticated(org_id: str) -> None:
    auth, _, orgs = jwt_auth(VerifiedToken(subject="u1", org_id=org_id))
    with pytest.raises(Unauthenticated) as raised:
        await auth.authenticate(JWT)
    assert str(raised.value) == "the token's organization claim is not a valid id"
    assert isinstance(raised.value.__cause__, InvalidInput)
    assert raised.value.__cause__.field == "org"
    assert orgs.ensured == []


async def test_a_valid_jwt_organization_is_not_refused() -> None:
    auth, _, _ = jwt_auth(VerifiedToken(subject="u1", org_id="o" * 128))
    assert (await auth.authenticate(JWT)).org_id == "o" * 128
