"""The in-process cache of API-key lookups: hits skip storage, revocations end them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from uuid import UUID

import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.signals import LocalRevocations
from agentsvc_core.entities import ApiKey, Principal
from agentsvc_core.errors import Unauthenticated
from agentsvc_core.ports import ApiKeyRepository
from agentsvc_core.use_cases import ApiKeys, Authenticator

ADMIN = Principal(org_id="acme", method="api_key")


class CountingKeys(ApiKeyRepository):
    """The memory repository, counting lookups; ``gate`` holds a lookup open."""

    def __init__(self, inner: ApiKeyRepository) -> None:
        self.inner = inner
        self.lookups = 0
        self.gate: asyncio.Event | None = None

    async def find_by_hash(self, key_hash: str) -> ApiKey | None:
        self.lookups += 1
        found = await self.inner.find_by_hash(key_hash)
        if self.gate is not None:
            await self.gate.wait()
        return found

    async def add(self, key: ApiKey) -> None:
        await self.inner.add(key)

    async def list(self, org_id: str) -> list[ApiKey]:
        return await self.inner.list(org_id)

    async def revoke(self, org_id: str, key_id: UUID, at: datetime) -> ApiKey:
        return await self.inner.revoke(org_id, key_id, at)


def build(cache_s: float) -> tuple[ApiKeys, Authenticator, CountingKeys, LocalRevocations]:
    storage = MemoryStorage()
    keys = CountingKeys(storage.api_keys)
    revocations = LocalRevocations()
    clock = SystemClock()
    issuer = ApiKeys(keys, storage.organizations, clock, revocations)
    auth = Authenticator(
        keys, storage.organizations, clock, None, key_cache_s=cache_s, revocations=revocations
    )
    return issuer, auth, keys, revocations


async def test_a_valid_key_is_looked_up_once_then_served_from_the_cache() -> None:
    issuer, auth, keys, _ = build(60)
    issued = await issuer.issue("acme", "k")
    for _ in range(5):
        who = await auth.authenticate(issued.token)
        assert (who.org_id, who.key_id) == ("acme", issued.key.id)
    assert keys.lookups == 1


async def test_without_a_cache_time_every_request_looks_up() -> None:
    issuer, auth, keys, _ = build(0)
    issued = await issuer.issue("acme", "k")
    for _ in range(3):
        await auth.authenticate(issued.token)
    assert keys.lookups == 3


async def test_unknown_keys_are_not_cached() -> None:
    _, auth, keys, _ = build(60)
    for _ in range(3):
        with pytest.raises(Unauthenticated, match="unknown"):
            await auth.authenticate("ask_" + "0" * 43)
    assert keys.lookups == 3


async def test_revoking_ends_a_cached_key_at_once() -> None:
    issuer, auth, _, _ = build(3600)
    issued = await issuer.issue("acme", "k")
    kept = await issuer.issue("acme", "other")
    await auth.authenticate(issued.token)
    await auth.authenticate(kept.token)
    await issuer.revoke(ADMIN, issued.key.id)
    with pytest.raises(Unauthenticated, match="revoked"):
        await auth.authenticate(issued.token)
    assert (await auth.authenticate(kept.token)).key_id == kept.key.id


async def test_a_notice_from_another_process_ends_a_cached_key() -> None:
    issuer, auth, keys, revocations = build(3600)
    issued = await issuer.issue("acme", "k")
    await auth.authenticate(issued.token)
    # another process revoked it: storage says so, and the notice arrives here
    await keys.inner.revoke("acme", issued.key.id, datetime.now(UTC))
    revocations.deliver_revoked(issued.key.id)
    with pytest.raises(Unauthenticated, match="revoked"):
        await auth.authenticate(issued.token)


async def test_missed_notices_drop_the_whole_cache() -> None:
    issuer, auth, keys, revocations = build(3600)
    issued = await issuer.issue("acme", "k")
    await auth.authenticate(issued.token)
    await keys.inner.revoke("acme", issued.key.id, datetime.now(UTC))
    revocations.deliver_revoked(None)  # the listener reconnected: notices may be lost
    with pytest.raises(Unauthenticated, match="revoked"):
        await auth.authenticate(issued.token)


async def test_a_lookup_overtaken_by_a_revocation_is_not_cached() -> None:
    """The lookup read the key before the revocation committed; the notice came
    while it was in flight: what it read must not be remembered."""
    issuer, auth, keys, revocations = build(3600)
    issued = await issuer.issue("acme", "k")
    keys.gate = asyncio.Event()
    lookup = asyncio.create_task(auth.authenticate(issued.token))
    await asyncio.sleep(0)
    assert keys.lookups == 1
    await keys.inner.revoke("acme", issued.key.id, datetime.now(UTC))
    revocations.deliver_revoked(issued.key.id)
    keys.gate.set()
    keys.gate = None
    assert (await lookup).key_id == issued.key.id  # it started before the revocation
    with pytest.raises(Unauthenticated, match="revoked"):
        await auth.authenticate(issued.token)


async def test_cached_keys_expire() -> None:
    issuer, auth, keys, _ = build(0.05)
    issued = await issuer.issue("acme", "k")
    await auth.authenticate(issued.token)
    await auth.authenticate(issued.token)
    assert keys.lookups == 1
    await asyncio.sleep(0.08)
    await auth.authenticate(issued.token)
    assert keys.lookups == 2


async def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    issuer, auth, keys, _ = build(3600)
    monkeypatch.setattr(Authenticator, "MAX_CACHED_KEYS", 3)
    issued = [await issuer.issue("acme", f"k{i}") for i in range(5)]
    for i in issued:
        await auth.authenticate(i.token)
    assert keys.lookups == 5
    await auth.authenticate(issued[-1].token)  # the newest are kept
    assert keys.lookups == 5
    await auth.authenticate(issued[0].token)  # the oldest was dropped
    assert keys.lookups == 6
