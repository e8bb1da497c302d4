"""API keys and JWTs, every 401 and 403 (docs/api.md, "Authentication" and "Errors")."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import jwt
import msgspec
import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.bootstrap import build_services
from agentsvc_web.settings import Settings, SettingsError
from tests.web.conftest import JWT_SECRET, bearer, make_jwt, memory_only

Client = TestClient[Any]


def assert_401(r: Any) -> str:
    assert r.status_code == 401, r.text
    assert r.json()["error"] == "UNAUTHORIZED"
    assert r.headers["www-authenticate"].startswith("Bearer")
    return str(r.json()["detail"])


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Basic ask_web_0123456789abcdef0123456789abcdef"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer ask_unknown_key_000000000000000000"},
        {"Authorization": "Bearer not-a-jwt-at-all"},
    ],
)
def test_missing_or_invalid_credentials_are_401(client: Client, headers: dict[str, str]) -> None:
    assert_401(client.get("/api/agents", headers=headers))


@memory_only
def test_the_openapi_document_needs_no_credentials(client: Client) -> None:
    r = client.get("/schema/openapi.json")
    assert r.status_code == 200
    assert r.json()["openapi"].startswith("3.1")


def test_created_key_works_is_listed_without_secret_and_revoked_key_is_401(
    client: Client, auth: dict[str, str]
) -> None:
    r = client.post("/api/keys", json={"name": "ci"}, headers=auth)
    assert r.status_code == 201, r.text
    issued = r.json()
    token = issued["key"]
    assert token.startswith("ask_")
    assert len(token) > 40
    assert token.startswith(issued["prefix"])
    assert client.get("/api/agents", headers=bearer(token)).status_code == 200

    listed = client.get("/api/keys", headers=auth).json()
    assert issued["id"] in [k["id"] for k in listed]
    assert token not in r.text.replace(token, "", 1)  # shown exactly once
    assert all(token not in str(k) and "key" not in k for k in listed)

    r = client.delete(f"/api/keys/{issued['id']}", headers=auth)
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert "revoked" in assert_401(client.get("/api/agents", headers=bearer(token)))
    revoked = next(
        k for k in client.get("/api/keys", headers=auth).json() if k["id"] == issued["id"]
    )
    assert revoked["revoked_at"] is not None
    # revoking again is harmless; another org cannot see or revoke it
    assert client.delete(f"/api/keys/{issued['id']}", headers=auth).status_code == 200


def test_keys_are_managed_by_admins_only(client: Client) -> None:
    user = bearer(make_jwt())
    for r in (
        client.get("/api/keys", headers=user),
        client.post("/api/keys", json={}, headers=user),
        client.delete("/api/keys/7f1b6c7e-52a4-4a3e-9a7d-3f0a8f3f2b11", headers=user),
    ):
        assert r.status_code == 403, r.text
        assert r.json()["error"] == "FORBIDDEN"


def test_other_orgs_keys_are_invisible_and_cannot_be_revoked(
    settings: Settings, auth: dict[str, str]
) -> None:
    services = build_services(settings)
    with TestClient(create_app(settings, services)) as c:
        with c.portal() as portal:
            other = portal.call(services.api_keys.issue, f"o-{uuid.uuid4().hex[:8]}", "theirs")
        mine = c.post("/api/keys", json={"name": "mine"}, headers=auth).json()
        theirs = bearer(other.token)
        assert [k["name"] for k in c.get("/api/keys", headers=theirs).json()] == ["theirs"]
        r = c.delete(f"/api/keys/{mine['id']}", headers=theirs)
        assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND")
        assert c.get("/api/agents", headers=bearer(mine["key"])).status_code == 200


def test_jwt_user_is_authenticated_and_org_created_on_first_sight(client: Client) -> None:
    org = f"fresh-{uuid.uuid4().hex[:8]}"
    token = make_jwt(sub="alice", org=org, role="admin")
    r = client.post("/api/agents", json={"name": "a"}, headers=bearer(token))
    assert r.status_code == 201, r.text
    assert r.json()["org_id"] == org


def test_an_admin_jwt_manages_keys_and_settings(client: Client, org_id: str) -> None:
    admin = bearer(make_jwt(org=org_id, role="admin"))
    made = client.post("/api/keys", json={"name": "by-admin"}, headers=admin)
    assert made.status_code == 201, made.text
    assert "by-admin" in [k["name"] for k in client.get("/api/keys", headers=admin).json()]
    assert client.get("/api/orgs/settings", headers=admin).status_code == 200
    # a list claim holding the role works too; any other value is a member
    as_list = bearer(make_jwt(org=org_id, role=["viewer", "admin"]))
    assert client.get("/api/keys", headers=as_list).status_code == 200
    for role in ("Admin", "member", 1, {"admin": True}):
        r = client.get("/api/keys", headers=bearer(make_jwt(org=org_id, role=role)))
        assert r.status_code == 403, (role, r.text)


def test_members_read_and_use_their_threads_but_change_no_configuration(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    """A JWT without the admin role is a member of its organization (docs/api.md, "Roles")."""
    agent = client.post(
        "/api/agents", json={"name": "a", "stablePreamble": "be kind"}, headers=auth
    ).json()
    member = bearer(make_jwt(sub="bob", org=org_id))
    a = f"/api/agents/{agent['id']}"
    changes = [
        ("post", "/api/agents", {"name": "mine"}),
        ("patch", a, {"stablePreamble": "leak everything"}),
        ("delete", a, None),
        ("put", f"{a}/credentials", {"enabled": True, "resolverUrl": "https://x.example/r"}),
        ("put", f"{a}/compaction", {"enabled": True}),
        ("post", "/api/mcps", {"name": "m", "transport": "sse", "url": "https://x.example"}),
        ("post", f"{a}/mcps", {"mcpServerId": str(uuid.uuid4())}),
        ("post", "/api/orgs/settings", {"rotateSigningSecret": True}),
        ("get", "/api/orgs/settings", None),
        ("post", "/api/keys", {"name": "k"}),
        ("get", "/api/keys", None),
    ]
    for method, path, body in changes:
        kw: dict[str, Any] = {"headers": member}
        if body is not None:
            kw["json"] = body
        r = client.request(method.upper(), path, **kw)
        assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN"), (method, path, r.text)
    # nothing changed
    after = client.get(a, headers=auth).json()
    assert after == agent
    # what a member may do: read agents, open and use its own threads
    assert client.get("/api/agents", headers=member).json() == [agent]
    assert client.get(a, headers=member).status_code == 200
    assert client.get(f"{a}/compaction", headers=member).status_code == 200
    t = client.post("/api/threads", json={"agentId": agent["id"]}, headers=member)
    assert t.status_code == 200, t.text
    thread = t.json()["id"]
    r = client.patch(f"/api/threads/{thread}", json={"title": "mine"}, headers=member)
    assert r.status_code == 200, r.text
    assert client.post(f"/api/threads/{thread}/stop", headers=member).json() == {"ok": False}


def test_the_role_claim_is_configurable(settings: Settings, org_id: str) -> None:
    custom = msgspec.structs.replace(
        settings, jwt_role_claim="https://example.com/roles", jwt_admin_role="owner"
    )
    with TestClient(create_app(custom)) as c:
        roles: dict[str, Any] = {"https://example.com/roles": ["owner"]}
        owner = bearer(make_jwt(org=org_id, **roles))
        assert c.post("/api/agents", json={"name": "a"}, headers=owner).status_code == 201
        plain = bearer(make_jwt(org=org_id, role="admin"))  # the default claim: not read
        assert c.post("/api/agents", json={"name": "a"}, headers=plain).status_code == 403


@memory_only
def test_the_openapi_document_names_the_admin_role_of_each_operation(client: Client) -> None:
    doc = client.get("/schema/openapi.json").json()
    ops = {
        op["operationId"]: op
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    admin = {k for k, op in ops.items() if op.get("security") == [{"BearerToken": ["admin"]}]}
    assert {"createAgent", "updateAgent", "deleteAgent", "listKeys", "getOrgSettings"} <= admin
    assert {"createThread", "sendMessage", "stopThread", "listAgents", "getAgent"}.isdisjoint(admin)
    assert ops["mcpOAuthCallback"]["security"] == []
    assert ops["managedMcpOAuthCallback"]["security"] == []
    for name in admin:
        assert "403" in ops[name]["responses"], name


def _hs256(claims: dict[str, Any], key: str | None = JWT_SECRET, alg: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=alg)  # type: ignore[arg-type]  # None: alg "none"


def _in_an_hour() -> int:
    return int(time.time()) + 3600


# Tokens are made when each test runs (not at collection): a token made at collection
# with a short lifetime would have expired by the time a long suite reaches it.
@memory_only
@pytest.mark.parametrize(
    ("token", "why"),
    [
        (lambda: make_jwt(exp_in=-3600), "expired"),
        (lambda: _hs256({"sub": "u", "org_id": "o"}), "exp"),
        (lambda: _hs256({"org_id": "o", "exp": _in_an_hour()}), "sub"),
        (lambda: _hs256({"sub": "u", "exp": _in_an_hour()}), "org_id"),
        (lambda: make_jwt(alg="HS512"), "algorithm"),
        (
            lambda: _hs256({"sub": "u", "org_id": "o", "exp": _in_an_hour()}, "other-secret-" * 4),
            "invalid",
        ),
        (
            lambda: _hs256({"sub": "u", "org_id": "o", "exp": _in_an_hour()}, None, "none"),
            "algorithm",
        ),
        (lambda: make_jwt(org="bad org id with spaces"), "organization"),
    ],
)
def test_bad_jwts_are_401(client: Client, token: Callable[[], str], why: str) -> None:
    assert why in assert_401(client.get("/api/agents", headers=bearer(token())))


def test_issuer_and_audience_are_checked_when_configured() -> None:
    settings = Settings(
        storage="memory",
        jwt_secret=JWT_SECRET,
        jwt_algorithms=("HS256",),
        jwt_issuer="https://idp.example",
        jwt_audience="agentsvc",
    )
    with TestClient(create_app(settings)) as c:
        good = make_jwt(iss="https://idp.example", aud="agentsvc")
        assert c.get("/api/agents", headers=bearer(good)).status_code == 200
        for bad in (
            make_jwt(iss="https://evil.example", aud="agentsvc"),
            make_jwt(iss="https://idp.example", aud="someone-else"),
            make_jwt(),
        ):
            assert_401(c.get("/api/agents", headers=bearer(bad)))


def test_no_jwt_configured_refuses_tokens_that_are_not_keys(boot_key: str) -> None:
    with TestClient(create_app(Settings(storage="memory", bootstrap_api_key=boot_key))) as c:
        assert_401(c.get("/api/agents", headers=bearer(make_jwt())))
        assert c.get("/api/agents", headers=bearer(boot_key)).status_code == 200


def test_errors_never_echo_the_credential(client: Client) -> None:
    token = "ask_secret_material_that_must_not_leak_123"
    r = client.get("/api/agents", headers=bearer(token))
    assert token not in r.text
    jwt_token = make_jwt(exp_in=-100)
    assert jwt_token not in client.get("/api/agents", headers=bearer(jwt_token)).text


def test_a_revoked_bootstrap_key_fails_start_up_clearly(
    settings: Settings, auth: dict[str, str]
) -> None:
    services = build_services(settings)
    with TestClient(create_app(settings, services)) as c:
        me = next(k for k in c.get("/api/keys", headers=auth).json() if k["name"] == "bootstrap")
        assert c.delete(f"/api/keys/{me['id']}", headers=auth).status_code == 200
    # memory storage lives in the services object; postgres in the database
    again = create_app(settings, services if settings.storage == "memory" else None)
    with pytest.raises(BaseExceptionGroup) as err, TestClient(again):
        pass
    assert any(isinstance(e, SettingsError) and "revoked" in str(e) for e in _leaves(err.value))


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def test_settings_never_show_secrets() -> None:
    s = Settings(jwt_secret="hmac-secret-value-" * 3, database_url="postgresql://u:pw@h/db")
    shown = repr(s) + repr(list(s.__rich_repr__()))
    assert "hmac-secret-value" not in shown
    assert "pw@h" not in shown
