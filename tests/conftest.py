from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from agentsvc_adapters.postgres import migrate
from tests.pg import fresh_database, test_server, vector_server

# CI runs a few more examples than a laptop loop; both are bounded.
settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


# --- PostgreSQL, shared by the contract, web and e2e suites ------------------


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    with test_server() as url:
        yield url


@pytest.fixture(scope="session")
def pgvector_admin_url() -> Iterator[str]:
    """A second server, with pgvector (the wheel's), for vector search."""
    with vector_server() as url:
        yield url


@pytest.fixture(scope="session")
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, migrated database for this test session."""
    with fresh_database(pg_admin_url) as url:
        asyncio.run(migrate(url))
        yield url


@pytest.fixture(scope="module")
def own_pg_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, migrated database for one test module: for tests whose jobs must
    run in their own service. On ``pg_url`` the session's service (another data
    folder, so other encryption keys, other providers) runs a job worker too, and
    the job queue is the database's: it may take their jobs."""
    with fresh_database(pg_admin_url) as url:
        asyncio.run(migrate(url))
        yield url
