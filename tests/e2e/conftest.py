from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsvc_adapters.postgres import migrate

# the standing secret scan: its session fixture and the hooks that tap this folder
from tests.e2e.scan_hooks import (  # noqa: F401 (pytest finds them here)
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    secret_scan,
)
from tests.e2e.service import Service, running
from tests.fakes.registry import FakeRegistry
from tests.pg import fresh_database
from tests.web.live import serve

E2E_KEY = "ask_e2e_bootstrap_key_0123456789abcdefgh"
E2E_JWT_SECRET = "e2e-jwt-secret-0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="session")
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """The e2e services' database, apart from the contract and web tests' (the root
    conftest's ``pg_url``): a service runs a job worker, which takes any queued job
    in its database, and the maintenance sweep, which prunes by the real clock what
    is kept until a date gone by. On one database, they took a web test's indexing
    job (``processing`` where ``queued`` was meant) and pruned a contract test's
    trace evaluations (dated January 2026) between its write and its read."""
    with fresh_database(pg_admin_url) as url:
        asyncio.run(migrate(url))
        yield url


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    """A fake MCP registry on loopback: tests never reach the real one."""
    with serve(FakeRegistry()) as url:
        yield url


@pytest.fixture(scope="session")
def service(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, registry_url: str
) -> Iterator[Service]:
    """The service on PostgreSQL, the production adapter."""
    tmp: Path = tmp_path_factory.mktemp("svc")
    with running(
        {
            "AGENTSVC_STORAGE": "postgres",
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": E2E_KEY,
            "AGENTSVC_JWT_SECRET": E2E_JWT_SECRET,
            "AGENTSVC_MCP_REGISTRY_URL": registry_url,
            # the registry is a fake on loopback, which the outbound guard refuses
            # otherwise; the suite only ever talks to loopback
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
            # the suite (schemathesis above all) sends thousands of requests, many
            # of them unauthenticated, from one address with one key: limits on,
            # with budgets it never exhausts (tests/e2e/test_limits_e2e.py tests them)
            "AGENTSVC_RATE_LIMIT_PER_MIN": "10000000",
            "AGENTSVC_RATE_LIMIT_PER_ADDRESS_PER_MIN": "10000000",
            "AGENTSVC_AUTH_FAILURES_PER_MIN": "10000000",
        },
        log=tmp / "service.log",
    ) as svc:
        yield svc
