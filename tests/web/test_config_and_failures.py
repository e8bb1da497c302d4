"""What docs/api.md and the README promise, checked through the app: a bug's 500
(docs/api.md, "Errors"), the JWT organization claim and leeway as configured from the
environment ("Authentication"), the platform default model from the environment (the
README's configuration table), and an agent's threads outliving the agent ("Agents")."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import jwt
import pytest
from litestar.testing import TestClient

from agentsvc_adapters.memory.storage import MemoryAgents
from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.web.conftest import JWT_SECRET, bearer
from tests.web.test_agents_api import create

Client = TestClient[Any]


def app_from_env(**env: str) -> TestClient[Any]:
    return TestClient(create_app(Settings.from_env({"AGENTSVC_STORAGE": "memory", **env})))


def test_a_bug_is_500_internal_error_without_internals_and_its_trace_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key = f"ask_web_{uuid.uuid4().hex}"

    async def broken(self: MemoryAgents, org_id: str, **filters: Any) -> list[Any]:
        raise RuntimeError("bug in the list: secret sk-live-0123456789 at /srv/x.py")

    monkeypatch.setattr(MemoryAgents, "list", broken)
    with app_from_env(AGENTSVC_BOOTSTRAP_API_KEY=key) as c, caplog.at_level(logging.ERROR):
        r = c.get("/api/agents", headers=bearer(key))
    assert r.status_code == 500
    assert r.json() == {"error": "INTERNAL_ERROR", "detail": "internal error"}
    for internal in ("RuntimeError", "sk-live", "bug in the list", "Traceback", ".py"):
        assert internal not in r.text
    traced = [x for x in caplog.records if x.exc_info]
    assert traced, "the trace is not in the log"
    assert isinstance(traced[0].exc_info[1], RuntimeError)  # type: ignore[index]
    assert "/api/agents" in traced[0].getMessage()


def token(claims: dict[str, Any], exp_in: float = 300) -> dict[str, str]:
    body = {"sub": "user-1", "role": "admin", "exp": int(time.time() + exp_in), **claims}
    return bearer(jwt.encode(body, JWT_SECRET, algorithm="HS256"))


def test_the_organization_comes_from_the_configured_claim() -> None:
    with app_from_env(AGENTSVC_JWT_SECRET=JWT_SECRET, AGENTSVC_JWT_ORG_CLAIM="tenant") as c:
        h = token({"tenant": "org-from-tenant", "org_id": "org-from-default-claim"})
        agent = c.post("/api/agents", json={"name": "a"}, headers=h)
        assert agent.status_code == 201, agent.text
        assert agent.json()["org_id"] == "org-from-tenant"
        only_default = c.get("/api/agents", headers=token({"org_id": "org-from-tenant"}))
        assert (only_default.status_code, only_default.json()["error"]) == (401, "UNAUTHORIZED")
    with app_from_env(AGENTSVC_JWT_SECRET=JWT_SECRET) as c:  # the default claim: org_id
        agent = c.post("/api/agents", json={"name": "a"}, headers=token({"org_id": "o-1"}))
        assert agent.json()["org_id"] == "o-1"
        assert c.get("/api/agents", headers=token({"tenant": "o-1"})).status_code == 401


def test_an_expired_token_has_a_leeway_of_30_seconds() -> None:
    with app_from_env(AGENTSVC_JWT_SECRET=JWT_SECRET) as c:
        claims = {"org_id": "leeway-org"}
        assert c.get("/api/agents", headers=token(claims, exp_in=-10)).status_code == 200
        late = c.get("/api/agents", headers=token(claims, exp_in=-60))
        assert (late.status_code, late.json()["error"]) == (401, "UNAUTHORIZED")


def test_the_platform_default_model_comes_from_the_environment() -> None:
    assert Settings.from_env({}).default_model == "local"
    assert Settings.from_env({"AGENTSVC_DEFAULT_MODEL": " gpt-x "}).default_model == "gpt-x"
    key = f"ask_web_{uuid.uuid4().hex}"
    with app_from_env(AGENTSVC_BOOTSTRAP_API_KEY=key, AGENTSVC_DEFAULT_MODEL="gpt-x") as c:
        assert create(c, bearer(key))["default_model"] == "gpt-x"


def test_deleting_an_agent_keeps_its_threads_and_their_history(
    client: Client, auth: dict[str, str]
) -> None:
    agent = create(client, auth)
    thread = client.post(
        "/api/threads", json={"agentId": agent["id"], "title": "kept"}, headers=auth
    )
    assert thread.status_code in (200, 201), thread.text
    tid = thread.json()["id"]
    sent = client.post(
        f"/api/threads/{tid}/messages", json={"content": "remember me"}, headers=auth
    )
    assert sent.status_code == 200
    before = client.get(f"/api/threads/{tid}/messages", headers=auth).json()
    assert before["total"] == 2
    r = client.delete(f"/api/agents/{agent['id']}", headers=auth)
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert client.get(f"/api/agents/{agent['id']}", headers=auth).status_code == 404
    kept = client.get(f"/api/threads/{tid}", headers=auth)
    assert kept.status_code == 200, kept.text
    assert (kept.json()["id"], kept.json()["title"]) == (tid, "kept")
    assert client.get(f"/api/threads/{tid}/messages", headers=auth).json() == before
    listed = client.get("/api/threads", params={"agentId": agent["id"]}, headers=auth)
    assert [t["id"] for t in listed.json()["threads"]] == [tid]
