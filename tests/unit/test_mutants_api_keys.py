"""API keys: who may manage them, the issued token and its stored form, and the
development bootstrap's refusals, pinned against the memory adapters. Written to
kill the mutants `make mutation` found alive in ``agentsvc_core.use_cases.api_keys``
(docs/development.md)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from uuid import UUID

import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.signals import LocalRevocations
from agentsvc_core.entities import API_KEY_PREFIX, Principal
from agentsvc_core.errors import InvalidInput, PermissionDenied
from agentsvc_core.ports import Clock
from agentsvc_core.rules import MAX_KEY_NAME
from agentsvc_core.use_cases import ApiKeys

ADMIN = Principal(org_id="acme", method="api_key")
ADMIN_USER = Principal(org_id="acme", method="jwt", role="admin", user_id="u")
MEMBER = Principal(org_id="acme", method="jwt", role="member", user_id="u")


def keys() -> tuple[ApiKeys, MemoryStorage, list[UUID | None]]:
    storage = MemoryStorage()
    revocations = LocalRevocations()
    heard: list[UUID | None] = []
    revocations.on_revoked(heard.append)
    return (
        ApiKeys(storage.api_keys, storage.organizations, SystemClock(), revocations),
        (storage),
        heard,
    )


async def test_members_may_not_manage_keys() -> None:
    api_keys, _, heard = keys()
    issued = await api_keys.create(ADMIN, "k")
    for attempt in (
        api_keys.create(MEMBER, "k"),
        api_keys.list(MEMBER),
        api_keys.revoke(MEMBER, issued.key.id),
    ):
        with pytest.raises(PermissionDenied) as raised:
            await attempt
        assert str(raised.value) == "API keys are managed by the organization's admins"
    assert heard == []
    assert [k.id for k in await api_keys.list(ADMIN_USER)] == [issued.key.id]
    assert not (await api_keys.list(ADMIN))[0].revoked


async def test_an_issued_key_and_its_stored_form() -> None:
    api_keys, storage, _ = keys()
    issued = await api_keys.create(ADMIN, "ci")
    token = issued.token
    assert token.startswith(API_KEY_PREFIX)
    assert len(token) == len(API_KEY_PREFIX) + 43  # 32 bytes of base64url
    assert issued.key.display_prefix == token[: len(API_KEY_PREFIX) + 6]
    assert issued.key.key_hash == hashlib.sha256(token.encode()).hexdigest()
    assert (issued.key.org_id, issued.key.name) == ("acme", "ci")
    assert (await storage.organizations.get("acme")).id == "acme"
    assert await storage.api_keys.find_by_hash(issued.key.key_hash) == issued.key
    other = await api_keys.create(ADMIN)
    assert other.token != token
    assert other.key.name == ""
    assert (await api_keys.issue("acme")).key.name == ""


async def test_a_key_and_its_organization_are_stamped_with_the_clock() -> None:
    storage = MemoryStorage()
    at = datetime(2026, 1, 1, tzinfo=UTC)

    class Fixed(Clock):
        def now(self) -> datetime:
            return at

    issued = await ApiKeys(storage.api_keys, storage.organizations, Fixed()).issue("new-org")
    assert issued.key.created_at == at
    assert (await storage.organizations.get("new-org")).created_at == at


async def test_key_names_and_organizations_are_checked() -> None:
    api_keys, _, _ = keys()
    assert (await api_keys.issue("acme", "n" * MAX_KEY_NAME)).key.name == "n" * MAX_KEY_NAME
    with pytest.raises(InvalidInput) as raised:
        await api_keys.issue("acme", "n" * (MAX_KEY_NAME + 1))
    assert raised.value.field == "name"
    with pytest.raises(InvalidInput) as raised:
        await api_keys.issue("a b")
    assert raised.value.field == "org"


async def test_revoking_publishes_the_revocation() -> None:
    api_keys, _, heard = keys()
    issued = await api_keys.create(ADMIN)
    revoked = await api_keys.revoke(ADMIN, issued.key.id)
    assert revoked.revoked
    assert heard == [issued.key.id]


async def test_the_bootstrap_key_must_be_long_enough() -> None:
    api_keys, _, _ = keys()
    shortest = API_KEY_PREFIX + "x" * 16
    assert (await api_keys.ensure("acme", shortest)).name == "bootstrap"
    for bad in (API_KEY_PREFIX + "x" * 15, "xx" + "x" * 40):
        with pytest.raises(InvalidInput) as raised:
            await api_keys.ensure("acme", bad)
        assert raised.value.field == "AGENTSVC_BOOTSTRAP_API_KEY"
        assert raised.value.problem == (
            f"must start with {API_KEY_PREFIX!r} and carry at least 16 more characters"
        )


async def test_the_bootstrap_key_is_stored_once_for_its_organization() -> None:
    api_keys, _, _ = keys()
    token = API_KEY_PREFIX + "b" * 30
    first = await api_keys.ensure("acme", token, name="dev")
    assert first.name == "dev"
    assert await api_keys.ensure("acme", token) == first
    assert len(await api_keys.list(ADMIN)) == 1
    with pytest.raises(InvalidInput) as raised:
        await api_keys.ensure("other", token)
    assert raised.value.field == "AGENTSVC_BOOTSTRAP_API_KEY"
    assert raised.value.problem == "already belongs to another organization"
    await api_keys.revoke(ADMIN, first.id)
    with pytest.raises(InvalidInput) as raised:
        await api_keys.ensure("acme", token)
    assert raised.value.field == "AGENTSVC_BOOTSTRAP_API_KEY"
    assert raised.value.problem.startswith("has been revoked; choose another key")
