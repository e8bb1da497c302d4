"""Database integrations' storage: the memory and PostgreSQL adapters agree."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import timedelta

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


def test_modify_changes_what_the_change_gives_and_keeps_the_rest(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.integrations
    mine = backend.run(repo.add, integration(org, allowed_tables=("orders",)))
    later = mine.updated_at + timedelta(minutes=1)

    def change(i: Integration) -> Integration:
        assert i == mine  # the change sees what is stored
        return msgspec.structs.replace(
            i,
            connection="sealed:v1:new",
            allowed_tables=None,
            max_rows=7,
            max_bytes=2048,
            statement_timeout_ms=250,
            updated_at=later,
        )

    changed = backend.run(repo.modify, org, mine.id, change)
    assert backend.run(repo.get, org, mine.id) == changed
    assert (changed.connection, changed.allowed_tables, changed.max_rows) == (
        "sealed:v1:new",
        None,
        7,
    )
    assert (changed.max_bytes, changed.statement_timeout_ms) == (2048, 250)
    assert (changed.name, changed.slug, changed.created_at) == (
        mine.name,
        mine.slug,
        mine.created_at,
    )
    assert changed.updated_at == later
    tables = backend.run(
        repo.modify, org, mine.id, lambda i: msgspec.structs.replace(i, allowed_tables=("a", "s.b"))
    )
    assert (
        backend.run(repo.get, org, mine.id).allowed_tables == tables.allowed_tables == ("a", "s.b")
    )


def test_modify_renames_with_a_unique_slug_and_refuses_a_taken_name(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.integrations
    first = backend.run(repo.add, integration(org))
    second = backend.run(repo.add, integration(org, name="Other", slug="other"))

    def rename(name: str, slug: str) -> Callable[[Integration], Integration]:
        return lambda i: msgspec.structs.replace(i, name=name, slug=slug)

    with pytest.raises(Conflict, match="'Sales DB' exists already"):
        backend.run(repo.modify, org, second.id, rename("Sales DB", "sales-db"))
    assert backend.run(repo.get, org, second.id) == second  # nothing changed
    renamed = backend.run(repo.modify, org, second.id, rename("Sales db", "sales-db"))
    assert renamed.slug == "sales-db-2"
    assert backend.run(repo.get, org, second.id) == renamed
    # its own name and slug again: kept as they are
    same = backend.run(repo.modify, org, first.id, rename("Sales DB", "sales-db"))
    assert (same.name, same.slug) == ("Sales DB", "sales-db")
    # the freed slug is taken by the next rename
    back = backend.run(repo.modify, org, first.id, rename("Leads", "leads"))
    assert back.slug == "leads"
    assert backend.run(repo.modify, org, second.id, rename("Sales", "sales-db")).slug == "sales-db"


def test_modify_of_another_organizations_or_a_missing_one_is_not_found(backend: Backend) -> None:
    org, other = backend.fresh_org(), backend.fresh_org()
    repo = backend.storage.integrations
    mine = backend.run(repo.add, integration(org))
    for who, which in ((other, mine.id), (org, uuid.uuid4())):
        with pytest.raises(NotFound):
            backend.run(repo.modify, who, which, lambda i: msgspec.structs.replace(i, max_rows=1))
    assert backend.run(repo.get, org, mine.id) == mine


def test_concurrent_modifies_lose_no_change(backend: Backend) -> None:
    org = backend.fresh_org()
    repo = backend.storage.integrations
    mine = backend.run(repo.add, integration(org, allowed_tables=()))

    def add_table(name: str) -> Callable[[Integration], Integration]:
        return lambda i: msgspec.structs.replace(
            i, allowed_tables=(*(i.allowed_tables or ()), name)
        )

    async def race() -> None:
        await asyncio.gather(*(repo.modify(org, mine.id, add_table(f"t{n}")) for n in range(5)))

    backend.run(race)
    assert sorted(backend.run(repo.get, org, mine.id).allowed_tables or ()) == [
        f"t{n}" for n in range(5)
    ]
