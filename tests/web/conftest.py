from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from litestar.testing import TestClient

from agentsvc_web.settings import Settings
from tests.web.harness import SharedHarness
from tests.web.shared import shared_client

JWT_SECRET = "web-test-hmac-secret-long-enough-for-hs512-0123456789abcdefghijklmnop"


def make_jwt(
    sub: str = "user-1",
    org: str = "default",
    *,
    exp_in: float = 300,
    alg: str = "HS256",
    **extra: Any,
) -> str:
    claims: dict[str, Any] = {"sub": sub, "org_id": org, "exp": int(time.time() + exp_in), **extra}
    return jwt.encode(claims, JWT_SECRET, algorithm=alg)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def boot_key() -> str:
    return f"ask_web_{uuid.uuid4().hex}"


@pytest.fixture
def org_id() -> str:
    """Each test has its own organization, so a shared database needs no cleanup."""
    return f"web-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["memory", "postgres"])
def settings(request: pytest.FixtureRequest, boot_key: str, org_id: str) -> Settings:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    return Settings(
        storage=request.param,
        database_url=url,
        migrate_on_start=False,
        bootstrap_api_key=boot_key,
        bootstrap_org=org_id,
        jwt_secret=JWT_SECRET,
        jwt_algorithms=("HS256",),
        max_body_bytes=64 * 1024,
        # no background worker: these tests queue no job, and PgQueuer takes about
        # 2 s to stop an idle one (its NOTIFY watcher polls once a second)
        worker=False,
    )


@pytest.fixture
def client(request: pytest.FixtureRequest, settings: Settings) -> Iterator[TestClient[Any]]:
    """A client of the app of this configuration, started once per process
    (tests/web/shared.py), from an address of its own, with this test's
    organization and key (``auth``) made on it."""
    with shared_client(request, settings) as c:
        yield c


# for tests of the HTTP layer that touch no storage (headers, CORS, limits, OpenAPI)
memory_only = pytest.mark.parametrize("settings", ["memory"], indirect=True)


@pytest.fixture
def auth(boot_key: str) -> dict[str, str]:
    return bearer(boot_key)


@pytest.fixture
def harness(
    request: pytest.FixtureRequest, settings: Settings, boot_key: str, org_id: str
) -> Iterator[SharedHarness]:
    """The harness of this configuration, its apps started once per process."""
    shared = SharedHarness(request, settings, org_id, boot_key)
    try:
        yield shared
    finally:
        shared.finish()
