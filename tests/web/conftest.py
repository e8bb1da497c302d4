from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings

BOOT_KEY = "ask_bootstrap_key_for_web_tests_0123456789"
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
def settings() -> Settings:
    return Settings(
        bootstrap_api_key=BOOT_KEY,
        jwt_secret=JWT_SECRET,
        jwt_algorithms=("HS256",),
        max_body_bytes=64 * 1024,
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient[Any]]:
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture
def auth() -> dict[str, str]:
    return bearer(BOOT_KEY)
