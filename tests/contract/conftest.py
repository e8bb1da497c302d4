"""One fixture, two adapters: every contract test runs on memory and on PostgreSQL.

An anyio blocking portal runs one event loop for the whole session, so the
Postgres pool is opened once and Hypothesis (which dislikes function-scoped
fixtures) can call async code from plain test functions. Each example isolates
itself with a fresh organization id, so no table is ever truncated.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.postgres import PostgresStopBus, PostgresStorage
from agentsvc_core.entities import Organization
from agentsvc_core.ports import Storage

T = TypeVar("T")


class Backend:
    def __init__(self, name: str, storage: Storage, portal: BlockingPortal) -> None:
        self.name = name
        self.storage = storage
        self._portal = portal

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        return self._portal.call(fn, *args)

    def fresh_org(self) -> str:
        org_id = f"org-{uuid.uuid4().hex[:16]}"
        self.run(self.storage.organizations.ensure, Organization(id=org_id, created_at=now()))
        return org_id


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture(scope="session")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as p:
        yield p


@pytest.fixture(scope="session", params=["memory", "postgres"])
def backend(request: pytest.FixtureRequest, portal: BlockingPortal) -> Iterator[Backend]:
    yield from backend_on(request, portal, "pg_url")


def backend_on(
    request: pytest.FixtureRequest, portal: BlockingPortal, url_fixture: str
) -> Iterator[Backend]:
    """The storage ``request.param`` names; PostgreSQL's on the database of the
    fixture ``url_fixture``."""
    if request.param == "memory":
        yield Backend("memory", MemoryStorage(), portal)
        return
    url: str = request.getfixturevalue(url_fixture)
    # the fold sums rows at once (not two minutes later, as in the service): the
    # tests' rows have committed before anything folds them
    storage = PostgresStorage(url, min_size=2, max_size=20, fold_settle_s=0)
    portal.call(storage.open)
    # as in the service: its stop bus's connection holds the lock that says this
    # process (the one that begins the tests' runs) is alive
    alive = PostgresStopBus(storage.conninfo, storage.pool, storage.owner)
    portal.call(alive.start)
    try:
        yield Backend("postgres", storage, portal)
    finally:
        portal.call(alive.close)
        portal.call(storage.close)
