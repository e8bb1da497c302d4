"""Deleting threads, erasing and exporting a user, the thread retention setting
(docs/privacy.md): who may, what answers, what is gone."""

from __future__ import annotations

from typing import Any

from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt
from tests.web.harness import SharedHarness
from tests.web.turns import agent_and_thread, say, thread_of

Client = TestClient[Any]
H = dict[str, str]


def _err(r: Any, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error"] == code


def test_an_owner_deletes_their_thread_and_it_is_gone(
    harness: SharedHarness, auth: H, org_id: str
) -> None:
    alice = bearer(make_jwt(sub="alice", org=org_id))
    with harness.client() as c:
        agent, _ = agent_and_thread(c, auth)
        thread = thread_of(c, alice, agent)
        say(c, alice, thread, "the secret word is walrus")
        kept = thread_of(c, alice, agent)
        r = c.delete(f"/api/threads/{thread}", headers=alice)
        assert r.status_code == 200, r.text
        assert r.json() == {"ok": True}
        _err(c.get(f"/api/threads/{thread}", headers=alice), 404, "NOT_FOUND")
        _err(c.get(f"/api/threads/{thread}/messages", headers=auth), 404, "NOT_FOUND")
        _err(c.delete(f"/api/threads/{thread}", headers=alice), 404, "NOT_FOUND")
        traces = c.get("/api/logs", params={"threadId": thread}, headers=auth)
        assert "walrus" not in traces.text
        for t in traces.json().get("traces", []):
            assert "walrus" not in c.get(f"/api/logs/{t['id']}", headers=auth).text
        assert c.get(f"/api/threads/{kept}", headers=alice).status_code == 200


def test_only_the_owner_or_an_admin_deletes_a_thread(
    harness: SharedHarness, auth: H, org_id: str
) -> None:
    alice = bearer(make_jwt(sub="alice", org=org_id))
    bob = bearer(make_jwt(sub="bob", org=org_id))
    admin = bearer(make_jwt(sub="root", org=org_id, role="admin"))
    stranger = bearer(make_jwt(sub="alice", org=f"{org_id}-x"))
    with harness.client() as c:
        agent, _ = agent_and_thread(c, auth)
        c.put(f"/api/agents/{agent}/multiplayer", json={"enabled": True}, headers=auth)
        single = thread_of(c, alice, agent)
        r = c.post("/api/threads", json={"agentId": agent, "kind": "multiplayer"}, headers=alice)
        assert r.status_code == 200, r.text
        shared = r.json()["id"]
        r = c.post(f"/api/threads/{shared}/participants", json={"userId": "bob"}, headers=alice)
        assert r.status_code == 200, r.text
        _err(c.delete(f"/api/threads/{single}", headers=bob), 403, "FORBIDDEN")
        _err(c.delete(f"/api/threads/{shared}", headers=bob), 403, "FORBIDDEN")
        assert c.delete(f"/api/threads/{single}", headers=stranger).status_code in (401, 404)
        assert c.get(f"/api/threads/{single}", headers=alice).status_code == 200
        # a JWT admin sees (and deletes) only its own threads, as it reads them; an
        # API key acts for the whole organization
        _err(c.delete(f"/api/threads/{single}", headers=admin), 403, "FORBIDDEN")
        assert c.delete(f"/api/threads/{single}", headers=auth).status_code == 200
        assert c.delete(f"/api/threads/{shared}", headers=alice).status_code == 200
        _err(c.get(f"/api/threads/{shared}", headers=auth), 404, "NOT_FOUND")


def test_a_users_erasure_answers_what_it_removed_then_zeros(
    harness: SharedHarness, auth: H, org_id: str
) -> None:
    carol = bearer(make_jwt(sub="carol", org=org_id))
    with harness.client() as c:
        agent, other = agent_and_thread(c, auth)
        first = thread_of(c, carol, agent)
        say(c, carol, first, "remember the aardvark")
        thread_of(c, carol, agent)

        _err(c.get("/api/users/carol/export", headers=carol), 403, "FORBIDDEN")
        _err(c.delete("/api/users/carol/data", headers=carol), 403, "FORBIDDEN")

        exported = c.get("/api/users/carol/export", headers=auth)
        assert exported.status_code == 200, exported.text
        doc = exported.json()
        assert doc["user_id"] == "carol"
        assert len(doc["threads"]) == 2
        assert doc["threads"][0]["thread"]["id"] == first
        said = [m["content"] for m in doc["threads"][0]["messages"]]
        assert said[0] == "remember the aardvark"
        assert doc["memories"] == []
        assert doc["oauth_grants"] == []
        assert doc["visitor_sessions"] == []

        r = c.delete("/api/users/carol/data", headers=auth)
        assert r.status_code == 200, r.text
        assert r.json() == {
            "user_id": "carol",
            "threads": 2,
            "visitor_sessions": 0,
            "memories": 0,
            "oauth_grants": 0,
            "participations": 0,
        }
        again = c.delete("/api/users/carol/data", headers=auth)
        assert again.json() == {
            "user_id": "carol",
            "threads": 0,
            "visitor_sessions": 0,
            "memories": 0,
            "oauth_grants": 0,
            "participations": 0,
        }
        _err(c.get(f"/api/threads/{first}", headers=auth), 404, "NOT_FOUND")
        assert c.get("/api/users/carol/export", headers=auth).json()["threads"] == []
        # the key's thread (no user) is not carol's
        assert c.get(f"/api/threads/{other}", headers=auth).status_code == 200


def test_the_thread_retention_setting(harness: SharedHarness, auth: H, org_id: str) -> None:
    with harness.client() as c:
        got = c.get("/api/orgs/settings", headers=auth).json()
        assert got["thread_retention_days"] is None
        r = c.post("/api/orgs/settings", json={"threadRetentionDays": 30}, headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["thread_retention_days"] == 30
        # other changes leave it alone
        r = c.post("/api/orgs/settings", json={"rotateSigningSecret": True}, headers=auth)
        assert r.json()["thread_retention_days"] == 30
        for bad in (0, 3651, "30", 1.5):
            r = c.post("/api/orgs/settings", json={"threadRetentionDays": bad}, headers=auth)
            assert r.status_code in (400, 422), (bad, r.text)
        for edge in (1, 3650):
            r = c.post("/api/orgs/settings", json={"threadRetentionDays": edge}, headers=auth)
            assert r.json()["thread_retention_days"] == edge
        r = c.post("/api/orgs/settings", json={"threadRetentionDays": None}, headers=auth)
        assert r.json()["thread_retention_days"] is None
        # a refused change changes nothing, the retention included
        both = {"threadRetentionDays": 7, "allowedEmbedDomains": ["not a host"]}
        r = c.post("/api/orgs/settings", json=both, headers=auth)
        assert r.status_code == 422, r.text
        got = c.get("/api/orgs/settings", headers=auth).json()
        assert got["thread_retention_days"] is None
        member = bearer(make_jwt(sub="m", org=org_id))
        r = c.post("/api/orgs/settings", json={"threadRetentionDays": 5}, headers=member)
        assert r.status_code == 403
