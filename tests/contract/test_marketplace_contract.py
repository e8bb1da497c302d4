"""Marketplace profiles: the memory and PostgreSQL adapters agree on the
MarketplaceStore contract (agentsvc_core/ports/marketplace.py): fields round-trip,
a handle is one agent's across organizations, a change of the fields never touches
the avatar (so one made from an older read cannot undo a new picture), the avatar
is read by its digest, and a profile goes with its agent."""

from __future__ import annotations

import uuid
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities.marketplace import Avatar, MarketplaceProfile
from agentsvc_core.errors import Conflict, NotFound
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in


def _agent(backend: Backend, org: str | None = None) -> tuple[str, uuid.UUID]:
    org = org or backend.fresh_org()
    agent = agent_in(org)
    backend.run(backend.storage.agents.add, agent)
    return org, agent.id


def test_the_fields_round_trip_and_a_change_keeps_the_avatar(backend: Backend) -> None:
    store = backend.storage.marketplace
    org, agent = _agent(backend)
    assert backend.run(store.get, org, agent) is None
    t = now()
    profile = MarketplaceProfile(
        agent_id=agent,
        org_id=org,
        handle=f"h-{uuid.uuid4().hex[:10]}",
        display_name="Name",
        tagline="Tag",
        description="Long\nText",
        categories=("a", "b"),
        capabilities=("Reads web pages",),
        listed=True,
        updated_at=t,
    )
    assert backend.run(store.put, profile) == profile
    assert backend.run(store.get, org, agent) == profile
    # a put that names an avatar stores none: only put_avatar does
    claimed = msgspec.structs.replace(
        profile, avatar=Avatar(content_type="image/png", sha256="0" * 64)
    )
    assert backend.run(store.put, claimed) == profile
    picture = Avatar(content_type="image/png", sha256="a" * 64)
    with_picture = msgspec.structs.replace(profile, avatar=picture, updated_at=t + timedelta(1))
    backend.run(store.put_avatar, with_picture, b"\x89PNG bytes")
    assert backend.run(store.get, org, agent) == with_picture
    assert backend.run(store.avatar, org, agent) == ("image/png", b"\x89PNG bytes")
    assert backend.run(store.public_avatar, agent, "a" * 64) == ("image/png", b"\x89PNG bytes")
    assert backend.run(store.public_avatar, agent, "b" * 64) is None
    # a change of the fields made from a read before the picture keeps the picture
    stale = msgspec.structs.replace(profile, tagline="New", updated_at=t + timedelta(2))
    kept = backend.run(store.put, stale)
    assert kept == msgspec.structs.replace(stale, avatar=picture)
    assert backend.run(store.get, org, agent) == kept
    assert backend.run(store.avatar, org, agent) == ("image/png", b"\x89PNG bytes")
    # cleared: no avatar, no bytes, the time moved; clearing again says so
    at = t + timedelta(3)
    assert backend.run(store.clear_avatar, org, agent, at) is True
    assert backend.run(store.get, org, agent) == msgspec.structs.replace(
        kept, avatar=None, updated_at=at
    )
    assert backend.run(store.avatar, org, agent) is None
    assert backend.run(store.public_avatar, agent, "a" * 64) is None
    assert backend.run(store.clear_avatar, org, agent, at) is False


def test_a_handle_is_one_agents_across_organizations(backend: Backend) -> None:
    store = backend.storage.marketplace
    org, mine = _agent(backend)
    other_org, theirs = _agent(backend)
    handle = f"h-{uuid.uuid4().hex[:10]}"
    backend.run(
        store.put, MarketplaceProfile(agent_id=mine, org_id=org, handle=handle, updated_at=now())
    )
    taken = MarketplaceProfile(agent_id=theirs, org_id=other_org, handle=handle, updated_at=now())
    with pytest.raises(Conflict) as err:
        backend.run(store.put, taken)
    assert err.value.code == "HANDLE_TAKEN"
    assert backend.run(store.get, other_org, theirs) is None
    # profiles without a handle are as many as there are
    for org_id, agent_id in ((org, mine), (other_org, theirs)):
        backend.run(
            store.put, MarketplaceProfile(agent_id=agent_id, org_id=org_id, updated_at=now())
        )
    assert backend.run(store.get, org, mine).handle is None  # type: ignore[union-attr]


def test_a_profile_needs_its_agent_and_goes_with_it(backend: Backend) -> None:
    store = backend.storage.marketplace
    org, agent = _agent(backend)
    with pytest.raises(NotFound):
        backend.run(
            store.put, MarketplaceProfile(agent_id=uuid.uuid4(), org_id=org, updated_at=now())
        )
    other = backend.fresh_org()
    with pytest.raises(NotFound):  # another organization's agent
        backend.run(store.put, MarketplaceProfile(agent_id=agent, org_id=other, updated_at=now()))
    profile = MarketplaceProfile(agent_id=agent, org_id=org, updated_at=now())
    backend.run(
        store.put_avatar,
        msgspec.structs.replace(profile, avatar=Avatar(content_type="image/webp", sha256="c" * 64)),
        b"webp",
    )
    assert backend.run(store.get, other, agent) is None
    assert backend.run(store.delete, other, agent) is False
    backend.run(backend.storage.agents.delete, org, agent)
    assert backend.run(store.get, org, agent) is None
    assert backend.run(store.public_avatar, agent, "c" * 64) is None
    assert backend.run(store.delete, org, agent) is False
