"""Database integrations' storage: the memory and PostgreSQL adapters agree."""

from __future__ import annotations

import asyncio
import uuid

import msgspec
import pytest

from agentsvc_core.entities import Integration
from agentsvc_core.errors import Conflict, NotFound
from tests.contract.conftest import Backend, now


def integration(
    org: str, name: str = "Sales DB", slug: str = "sales-db", **over: object
) -> Integration:
    t = now()
    base = Integration(
        id=uuid.uuid4(),
        org_id=org,
        name=name,
        slug=slug,
        type="postgresql",
        connection="sealed:v1:abc",
        allowed_tables=None,
        max_rows=200,
        max_bytes=65536,
        statement_timeout_ms=5000,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def test_round_trip_list_and_get_many(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.integrations
    first = backend.run(repo.add, integration(org, allowed_tables=("orders", "sales.ü")))
    assert backend.run(repo.get, org, first.id) == first
    second = backend.run(repo.add, integration(org, name="Other", slug="other", allowed_tables=()))
    assert backend.run(repo.get, org, second.id).allowed_tables == ()
    assert backend.run(repo.list_all, org) == [first, second]
    missing = uuid.uuid4()
    # in the order asked, missing and repeated ids left out
    assert backend.run(repo.get_many, org, [second.id, missing, first.id, second.id]) == [
        second,
        first,
    ]
    assert backend.run(repo.get_many, org, []) == []


def test_names_conflict_and_slugs_are_made_unique(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.integrations
    backend.run(repo.add, integration(org))
    with pytest.raises(Conflict, match="'Sales DB' exists already"):
        backend.run(repo.add, integration(org))

    async def race() -> list[Integration]:
        return await asyncio.gather(
            *(repo.add(integration(org, name=f"sales db {n}", slug="sales-db")) for n in range(5))
        )

    made = backend.run(race)
    assert sorted(i.slug for i in made) == [f"sales-db-{n}" for n in range(2, 7)]
    other = backend.fresh_org()
    assert backend.run(repo.add, integration(other)).slug == "sales-db"  # per organization


def test_other_organizations_see_nothing_and_delete(backend: Backend) -> None:
    org, other = backend.fresh_org(), backend.fresh_org()
    repo = backend.storage.integrations
    mine = backend.run(repo.add, integration(org))
    with pytest.raises(NotFound):
        backend.run(repo.get, other, mine.id)
    with pytest.raises(NotFound):
        backend.run(repo.delete, other, mine.id)
    assert backend.run(repo.get_many, other, [mine.id]) == []
    assert backend.run(repo.list_all, other) == []
    backend.run(repo.delete, org, mine.id)
    with pytest.raises(NotFound):
        backend.run(repo.get, org, mine.id)
    with pytest.raises(NotFound):
        backend.run(repo.delete, org, mine.id)


def test_reseal_compares_and_sets(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.integrations
    mine = backend.run(repo.add, integration(org))
    assert (org, mine.id, "sealed:v1:abc") in backend.run(repo.sealed_connections, None)
    assert backend.run(repo.sealed_connections, org) == [(org, mine.id, "sealed:v1:abc")]
    assert backend.run(repo.reseal, org, mine.id, "sealed:v1:other", "new") is False
    assert backend.run(repo.reseal, org, mine.id, "sealed:v1:abc", "sealed:v2:def") is True
    assert backend.run(repo.get, org, mine.id).connection == "sealed:v2:def"
    assert backend.run(repo.reseal, backend.fresh_org(), mine.id, "sealed:v2:def", "x") is False
