"""Rate limits (docs/deploy.md, "Request budgets": 429 RATE_LIMITED with Retry-After):
per credential, per client address, and on failed authentication."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from litestar.exceptions import TooManyRequestsException
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.limits import AddressLimits, RateLimits
from agentsvc_web.settings import Settings
from tests.web.conftest import JWT_SECRET, bearer, make_jwt

Client = TestClient[Any]


def limited(
    boot_key: str, *, per_min: int = 0, per_address: int = 0, failures: int = 0
) -> Settings:
    return Settings(
        storage="memory",
        bootstrap_api_key=boot_key,
        bootstrap_org=f"rl-{uuid.uuid4().hex[:8]}",
        jwt_secret=JWT_SECRET,
        jwt_algorithms=("HS256",),
        rate_limit_per_min=per_min,
        rate_limit_per_address_per_min=per_address,
        auth_failures_per_min=failures,
    )


@pytest.fixture
def app_with() -> Iterator[Any]:
    """``app_with(settings)``: a started test client (its address is ``testclient``)."""
    clients: list[Client] = []

    def make(settings: Settings) -> Client:
        c = TestClient(create_app(settings))
        clients.append(c.__enter__())
        return c

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def assert_429(r: Any) -> int:
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "RATE_LIMITED"
    assert r.json()["detail"]
    retry = int(r.headers["retry-after"])
    assert retry >= 1
    return retry


def test_a_credential_past_its_budget_is_429_with_retry_after(app_with: Any) -> None:
    key = f"ask_rl_{uuid.uuid4().hex}"
    c = app_with(limited(key, per_min=5))
    for _ in range(5):
        assert c.get("/api/agents", headers=bearer(key)).status_code == 200
    r = c.get("/api/agents", headers=bearer(key))
    assert assert_429(r) <= 12  # one token comes back every 12 s
    assert "credential" in r.json()["detail"]
    # another credential has its own budget: a JWT user, counted by org and user
    for _ in range(5):
        assert c.get("/api/agents", headers=bearer(make_jwt(sub="ann"))).status_code == 200
    assert_429(c.get("/api/agents", headers=bearer(make_jwt(sub="ann"))))
    assert c.get("/api/agents", headers=bearer(make_jwt(sub="bob"))).status_code == 200
    # the liveness probe is never limited
    assert c.get("/healthz").status_code == 200


def test_an_address_past_its_budget_is_429_whatever_the_credential(app_with: Any) -> None:
    key = f"ask_rl_{uuid.uuid4().hex}"
    c = app_with(limited(key, per_address=4))
    for i in range(4):
        token = key if i % 2 else make_jwt(sub=f"u{i}")
        assert c.get("/api/agents", headers=bearer(token)).status_code == 200
    r = c.get("/api/threads", headers=bearer(make_jwt(sub="fresh")))  # one budget, all routes
    assert_429(r)
    assert "address" in r.json()["detail"]
    for _ in range(3):
        assert c.get("/healthz").status_code == 200


def test_failed_authentications_stop_an_address_before_any_lookup(app_with: Any) -> None:
    key = f"ask_rl_{uuid.uuid4().hex}"
    c = app_with(limited(key, failures=3))
    # successes cost nothing from the failure budget
    for _ in range(10):
        assert c.get("/api/agents", headers=bearer(key)).status_code == 200
    guesses = [f"ask_guess_{i:032d}" for i in range(3)]
    for guess in guesses:
        assert c.get("/api/agents", headers=bearer(guess)).status_code == 401
    # the fourth guess, a forged JWT, no header at all, and even the right key: 429
    for headers in (bearer("ask_guess_" + "9" * 32), bearer("not.a.jwt"), {}, bearer(key)):
        r = c.get("/api/agents", headers=headers)
        assert_429(r)
        assert "authentication" in r.json()["detail"]
    assert c.get("/healthz").status_code == 200


def test_wrong_runner_tokens_are_failed_authentications(app_with: Any) -> None:
    """A runner trigger's token is a credential in the URL: a wrong one is 404 (no
    hint that tokens exist), and counts like a wrong API key; a right one costs
    nothing from the failure budget, whatever its answer."""
    key = f"ask_rl_{uuid.uuid4().hex}"
    c = app_with(limited(key, failures=3))
    agent = c.post("/api/agents", json={"name": "a"}, headers=bearer(key)).json()
    step = {"id": "s", "kind": "agent", "agentId": agent["id"], "prompt": "hi"}
    runner = c.post("/api/runners", json={"name": "r", "steps": [step]}, headers=bearer(key))
    assert runner.status_code == 201, runner.text
    rid = runner.json()["id"]
    made = c.post(f"/api/runners/{rid}/triggers", json={"kind": "webhook"}, headers=bearer(key))
    token = made.json()["token"]
    for _ in range(5):  # a right token, even refused for its body (422), is no failure
        r = c.post(f"/api/runners/webhooks/{token}", content=b"[]")
        assert r.status_code == 422, r.text
    wrong = "rt_" + "x" * 32
    assert c.post(f"/api/runners/webhooks/{wrong}", json={}).status_code == 404
    assert c.get(f"/api/runners/{rid}/button", params={"token": wrong}).status_code == 404
    assert c.get(f"/api/runners/{rid}/embed.js", params={"token": token}).status_code == 404
    # three failures: the address is refused everything, the right token included
    for r in (
        c.post(f"/api/runners/webhooks/{token}", json={}),
        c.get("/api/agents", headers=bearer(key)),
    ):
        assert_429(r)
        assert "authentication" in r.json()["detail"]


def test_a_wrong_metrics_token_is_a_failed_authentication(app_with: Any) -> None:
    key = f"ask_rl_{uuid.uuid4().hex}"
    metrics_token = "metrics-" + uuid.uuid4().hex
    settings = msgspec.structs.replace(limited(key, failures=2), metrics_token=metrics_token)
    c = app_with(settings)
    assert c.get("/metrics", headers=bearer(metrics_token)).status_code == 200
    for _ in range(2):
        assert c.get("/metrics", headers=bearer("not-the-token")).status_code == 401
    assert_429(c.get("/metrics", headers=bearer(metrics_token)))


def test_a_limit_of_zero_turns_it_off(app_with: Any) -> None:
    key = f"ask_rl_{uuid.uuid4().hex}"
    c = app_with(limited(key))
    for _ in range(50):
        assert c.get("/api/agents", headers=bearer(key)).status_code == 200
    for _ in range(50):
        assert c.get("/api/agents", headers=bearer("ask_guess_" + "0" * 32)).status_code == 401


def test_the_defaults_are_generous_and_on() -> None:
    s = Settings.from_env({})
    assert (s.rate_limit_per_min, s.rate_limit_per_address_per_min) == (600, 1200)
    assert s.auth_failures_per_min == 30
    assert s.request_read_timeout_s == 30
    s = Settings.from_env(
        {
            "AGENTSVC_RATE_LIMIT_PER_MIN": "0",
            "AGENTSVC_RATE_LIMIT_PER_ADDRESS_PER_MIN": "7",
            "AGENTSVC_AUTH_FAILURES_PER_MIN": "3",
            "AGENTSVC_REQUEST_READ_TIMEOUT_S": "2",
            "AGENTSVC_FORWARDED_ALLOW_IPS": "10.0.0.1",
        }
    )
    assert (s.rate_limit_per_min, s.rate_limit_per_address_per_min) == (0, 7)
    assert (s.auth_failures_per_min, s.request_read_timeout_s) == (3, 2)
    assert s.forwarded_allow_ips == "10.0.0.1"


async def test_an_ipv6_client_counts_by_its_64_network() -> None:
    limits = RateLimits(0, 1, 0)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    async def call(address: str) -> bool:
        scope = {"type": "http", "path": "/api/agents", "client": (address, 1)}
        try:
            await AddressLimits(app, limits)(scope, None, None)  # type: ignore[arg-type]
        except TooManyRequestsException:
            return False
        return True

    assert await call("2001:db8:0:7::1")
    assert not await call("2001:db8:0:7:ffff::2")  # the same /64
    assert await call("2001:db8:0:8::1")  # the next one
    assert await call("::ffff:10.0.0.1")  # IPv4 mapped: each address its own
    assert await call("::ffff:10.0.0.2")
    assert await call("10.0.0.1")
    assert not await call("10.0.0.1")
