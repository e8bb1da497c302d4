"""The real ``agentsvc serve`` process, driven over HTTP as a client would."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import jwt
import pytest

from tests.e2e.conftest import E2E_JWT_SECRET, E2E_KEY
from tests.e2e.service import AGENTSVC, Service

pytestmark = pytest.mark.e2e


def test_agent_lifecycle_over_http(service: Service) -> None:
    h = {"Authorization": f"Bearer {E2E_KEY}"}
    with httpx.Client(base_url=service.url, headers=h, timeout=10) as c:
        r = c.post("/api/agents", json={"name": "Support", "stablePreamble": "Be brief."})
        assert r.status_code == 201
        agent = r.json()
        assert agent["published_chats"] == []
        assert r.headers["content-type"].startswith("application/json")

        r = c.patch(f"/api/agents/{agent['id']}", json={"description": "Helps customers"})
        assert r.status_code == 200
        assert r.json()["description"] == "Helps customers"
        assert r.json()["stable_preamble"] == "Be brief."

        assert agent["id"] in [a["id"] for a in c.get("/api/agents").json()]
        assert c.delete(f"/api/agents/{agent['id']}").json() == {"ok": True}
        r = c.get(f"/api/agents/{agent['id']}")
        assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND")

        r = c.post("/api/agents", content=b"{oops", headers={"Content-Type": "application/json"})
        assert (r.status_code, r.json()["error"]) == (400, "BAD_REQUEST")
        r = c.post("/api/agents", json={"name": 1})
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR")

    r = httpx.get(f"{service.url}/api/agents")
    assert (r.status_code, r.json()["error"]) == (401, "UNAUTHORIZED")


def _jwt(sub: str, **claims: object) -> dict[str, str]:
    token = jwt.encode(
        {"sub": sub, "org_id": "e2e-jwt-org", "exp": int(time.time()) + 60, **claims},
        E2E_JWT_SECRET,
        algorithm="HS256",
    )
    return {"Authorization": f"Bearer {token}"}


def test_jwt_user_over_http(service: Service) -> None:
    """An admin JWT configures its organization; a member JWT is refused (403)."""
    r = httpx.post(
        f"{service.url}/api/agents", json={"name": "Bob's"}, headers=_jwt("bob", role="admin")
    )
    assert r.status_code == 201
    assert r.json()["org_id"] == "e2e-jwt-org"
    r = httpx.patch(
        f"{service.url}/api/agents/{r.json()['id']}",
        json={"stablePreamble": "x"},
        headers=_jwt("eve"),
    )
    assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN")


def test_openapi_document_is_served(service: Service) -> None:
    doc = httpx.get(f"{service.url}/schema/openapi.json", timeout=120).json()
    assert doc["openapi"].startswith("3.1")
    for path in ("/api/agents", "/api/agents/{agent_id}", "/api/keys", "/api/keys/{key_id}"):
        assert path in doc["paths"], path


def test_print_dev_key_creates_a_key_that_works_across_restarts(tmp_path: Path) -> None:
    env = {"AGENTSVC_STORAGE": "memory", "AGENTSVC_DATA_DIR": str(tmp_path / "data")}
    keys = []
    for _ in range(2):
        svc = Service(env, ("--print-dev-key",), log=tmp_path / "out.log")
        try:
            svc.wait_ready()
            printed = [w for w in svc.output().split() if w.startswith("ask_")]
            assert printed, svc.output()
            keys.append(printed[0])
            r = httpx.get(
                f"{svc.url}/api/agents", headers={"Authorization": f"Bearer {printed[0]}"}
            )
            assert r.status_code == 200
            # the playground's address, which answers without the key (the page asks for it)
            assert f"playground: {svc.url}/playground " in svc.output(), svc.output()
            assert httpx.get(f"{svc.url}/playground").status_code == 200
        finally:
            svc.stop()
    assert keys[0] == keys[1]
    key_file = tmp_path / "data" / "dev-api-key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"


def test_bad_configuration_fails_fast_with_a_clear_message(tmp_path: Path) -> None:
    svc = Service(
        {
            "AGENTSVC_STORAGE": "memory",
            "AGENTSVC_JWT_SECRET": "s" * 40,
            "AGENTSVC_JWT_ALGORITHMS": "RS256",
        },
        log=tmp_path / "out.log",
    )
    try:
        with pytest.raises(RuntimeError, match="cannot be used"):
            svc.wait_ready(timeout=20)
    finally:
        svc.stop()


def test_keys_create_refuses_memory_storage() -> None:
    out = subprocess.run(
        [AGENTSVC, "keys", "create", "--org", "acme"],
        env={"AGENTSVC_STORAGE": "memory", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "AGENTSVC_BOOTSTRAP_API_KEY" in out.stderr


def test_a_malformed_database_url_never_echoes_the_password(tmp_path: Path) -> None:
    svc = Service(
        {"AGENTSVC_DATABASE_URL": "host=127.0.0.1 password SuperSecretPw99 user=x"},
        log=tmp_path / "out.log",
    )
    try:
        with pytest.raises(RuntimeError, match="malformed"):
            svc.wait_ready(timeout=90)  # it exits at once; a loaded machine starts slowly
    finally:
        svc.stop()
    assert "SuperSecretPw99" not in svc.output()
