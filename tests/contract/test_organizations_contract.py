from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from agentsvc_core.entities import Organization
from agentsvc_core.errors import NotFound
from tests.contract.conftest import Backend, now


def test_ensure_is_idempotent_and_keeps_the_first(backend: Backend) -> None:
    orgs = backend.storage.organizations
    first = Organization(id=f"o-{backend.fresh_org()}", created_at=now())
    assert backend.run(orgs.ensure, first) == first
    later = Organization(id=first.id, created_at=first.created_at + timedelta(days=1))
    assert backend.run(orgs.ensure, later) == first
    assert backend.run(orgs.get, first.id) == first


def test_concurrent_ensure_of_one_org_agrees(backend: Backend) -> None:
    orgs = backend.storage.organizations
    org_id = f"c-{backend.fresh_org()}"
    base = now()

    async def race() -> list[Organization]:
        return await asyncio.gather(
            *(
                orgs.ensure(Organization(id=org_id, created_at=base + timedelta(seconds=i)))
                for i in range(20)
            )
        )

    results = backend.run(race)
    assert len({r.created_at for r in results}) == 1
    assert backend.run(orgs.get, org_id) == results[0]


def test_unknown_org_is_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.run(backend.storage.organizations.get, "no-such-org-anywhere")
