"""The client's tests run against the real service process (tests/e2e/service.py):
memory storage for most, PostgreSQL for one tour. They join the end-to-end suite's
standing secret scan (tests/e2e/secret_scan.py): every answer the client reads and
every line of these services' logs is checked for the secrets they were given."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

# the standing secret scan: its session fixture and the hooks that tap this folder
from tests.e2e.scan_hooks import (  # noqa: F401 (pytest finds them here)
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    secret_scan,
)
from tests.e2e.service import Service, free_port, running
from tests.pg import fresh_database

KEY = "ask_client_tests_key_0123456789abcdefghij"
JWT_SECRET = "client-tests-jwt-secret-0123456789abcdefghijklmnopqrstuv"


def start(tmp: Path, **env: str) -> AbstractContextManager[Service]:
    return running(
        {
            "AGENTSVC_BOOTSTRAP_API_KEY": KEY,
            "AGENTSVC_JWT_SECRET": JWT_SECRET,
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
            # the webhook receiver and the MCP server listen on loopback
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
            # "slowly" replies in ~2 s rather than ~12 s: long enough to cut one
            "AGENTSVC_LOCAL_SLOW_DELAY_MS": "30",
            **env,
        },
        log=tmp / "service.log",
    )


@pytest.fixture(scope="session")
def memory_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with start(
        tmp_path_factory.mktemp("client-memory"),
        AGENTSVC_STORAGE="memory",
        # a provider nobody listens for: a reply with a "beta:" model ends with an
        # error event (PROVIDER_UNAVAILABLE) once its stream has started
        AGENTSVC_BETA_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",
        AGENTSVC_BETA_API_KEY="sk-client-tests-nobody-listens",
        # the TypeScript client's browser test calls it from a page of another origin
        AGENTSVC_CORS_ORIGINS="*",
    ) as svc:
        yield svc


@pytest.fixture(scope="session")
def pg_service(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str) -> Iterator[Service]:
    """On a database of its own: a service with another data folder (other
    encryption keys) on the session's shared database would seal the default
    organization's settings with its keys, which the e2e service cannot open, and
    its jobs (a knowledge upload's indexing) could be taken by another service's
    worker."""
    with (
        fresh_database(pg_admin_url) as url,
        start(
            tmp_path_factory.mktemp("client-pg"),
            AGENTSVC_STORAGE="postgres",
            AGENTSVC_DATABASE_URL=url,
        ) as svc,
    ):
        yield svc
