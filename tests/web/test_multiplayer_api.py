"""Multiplayer threads through the app (memory and PostgreSQL): the agent's
configuration (``GET/PUT /api/agents/{id}/multiplayer``), what it enforces (opening
a thread, its participants, who a message calls) and a message that does not call
the agent (docs/multiplayer.md)."""

from __future__ import annotations

from typing import Any

from litestar.testing import TestClient

from tests.sse import parse
from tests.web.conftest import bearer, make_jwt

H = dict[str, str]
C = TestClient[Any]

DEFAULTS = {"enabled": True, "respond_to": "all", "display_name": None, "max_participants": 20}


def _agent(c: C, h: H, name: str = "Helper") -> str:
    r = c.post("/api/agents", json={"name": name}, headers=h)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _configure(c: C, h: H, agent: str, **body: Any) -> dict[str, Any]:
    r = c.put(f"/api/agents/{agent}/multiplayer", json=body, headers=h)
    assert r.status_code == 200, r.text
    got: dict[str, Any] = r.json()
    return got


def _room(c: C, h: H, agent: str, *people: tuple[str, str]) -> str:
    """A multiplayer thread of ``agent`` with ``people`` (user id, role) in it."""
    r = c.post("/api/threads", json={"agentId": agent, "kind": "multiplayer"}, headers=h)
    assert r.status_code == 200, r.text
    thread = str(r.json()["id"])
    for user, role in people:
        r = c.post(
            f"/api/threads/{thread}/participants",
            json={"userId": user, "displayName": user.title(), "role": role},
            headers=h,
        )
        assert r.status_code == 200, r.text
    return thread


def _post(c: C, h: H, thread: str, sender: str, content: str) -> list[Any]:
    r = c.post(
        f"/api/threads/{thread}/messages",
        json={"content": content, "senderId": sender},
        headers=h,
    )
    assert r.status_code == 200, r.text
    return parse(r.text)


def test_the_defaults_until_a_put_then_what_was_stored(client: C, auth: H, org_id: str) -> None:
    agent = _agent(client, auth)
    got = client.get(f"/api/agents/{agent}/multiplayer", headers=auth)
    assert got.status_code == 200
    assert got.json() == {"agent_id": agent, "org_id": org_id, **DEFAULTS}
    put = _configure(client, auth, agent, respondTo="mentions", displayName="Helpy")
    assert put == {**got.json(), "respond_to": "mentions", "display_name": "Helpy"}
    # a PUT changes only what it names; null clears the display name
    put = _configure(client, auth, agent, maxParticipants=3)
    assert put["respond_to"] == "mentions"
    assert put["max_participants"] == 3
    put = _configure(client, auth, agent, displayName=None, enabled=False)
    assert (put["display_name"], put["enabled"]) == (None, False)
    assert client.get(f"/api/agents/{agent}/multiplayer", headers=auth).json() == put


def test_bounds_and_unknown_agents(client: C, auth: H) -> None:
    agent = _agent(client, auth)
    for body in (
        {"maxParticipants": 1},
        {"maxParticipants": 101},
        {"respondTo": "everyone"},
        {"displayName": ""},
        {"displayName": "x" * 101},
        {"enabled": "yes"},
    ):
        r = client.put(f"/api/agents/{agent}/multiplayer", json=body, headers=auth)
        assert r.status_code == 422, (body, r.text)
    assert _configure(client, auth, agent, maxParticipants=2)["max_participants"] == 2
    assert _configure(client, auth, agent, maxParticipants=100)["max_participants"] == 100
    r = client.put(f"/api/agents/{agent}/multiplayer", json={"displayName": "  "}, headers=auth)
    assert r.status_code == 422
    missing = "00000000-0000-4000-8000-000000000000"
    assert client.get(f"/api/agents/{missing}/multiplayer", headers=auth).status_code == 404
    r = client.put(f"/api/agents/{missing}/multiplayer", json={}, headers=auth)
    assert r.status_code == 404


def test_a_member_reads_the_configuration_and_only_an_admin_changes_it(
    client: C, auth: H, org_id: str
) -> None:
    agent = _agent(client, auth)
    member = bearer(make_jwt("mia", org=org_id))
    assert client.get(f"/api/agents/{agent}/multiplayer", headers=member).status_code == 200
    r = client.put(f"/api/agents/{agent}/multiplayer", json={"enabled": False}, headers=member)
    assert r.status_code == 403


def test_disabled_multiplayer_refuses_new_multiplayer_threads_only(client: C, auth: H) -> None:
    agent = _agent(client, auth)
    _configure(client, auth, agent, enabled=False)
    r = client.post("/api/threads", json={"agentId": agent, "kind": "multiplayer"}, headers=auth)
    assert r.status_code == 409
    assert r.json()["error"] == "MULTIPLAYER_DISABLED"
    r = client.post("/api/threads", json={"agentId": agent}, headers=auth)
    assert r.status_code == 200
    _configure(client, auth, agent, enabled=True)
    r = client.post("/api/threads", json={"agentId": agent, "kind": "multiplayer"}, headers=auth)
    assert r.status_code == 200


def test_no_participant_beyond_max_participants(client: C, auth: H) -> None:
    agent = _agent(client, auth)
    _configure(client, auth, agent, maxParticipants=2)
    thread = _room(client, auth, agent, ("ada", "owner"), ("bob", "member"))
    r = client.post(f"/api/threads/{thread}/participants", json={"userId": "cy"}, headers=auth)
    assert r.status_code == 409
    assert r.json()["error"] == "TOO_MANY_PARTICIPANTS"
    # one already there may still change; one who left makes room
    r = client.post(
        f"/api/threads/{thread}/participants",
        json={"userId": "bob", "role": "owner"},
        headers=auth,
    )
    assert (r.status_code, r.json()["role"]) == (200, "owner")
    r = client.request(
        "DELETE", f"/api/threads/{thread}/participants", json={"userId": "bob"}, headers=auth
    )
    assert r.status_code == 200
    r = client.post(f"/api/threads/{thread}/participants", json={"userId": "cy"}, headers=auth)
    assert r.status_code == 200


def test_respond_to_mentions_answers_only_a_message_that_names_the_agent(
    client: C, auth: H
) -> None:
    agent = _agent(client, auth, "Helper")
    _configure(client, auth, agent, respondTo="mentions", displayName="Helpy")
    thread = _room(client, auth, agent, ("ada", "owner"), ("bob", "member"))
    quiet = _post(client, auth, thread, "bob", "lunch at noon? email helper@example.com")
    assert [(e.event, e.data) for e in quiet] == [
        ("done", {"ok": True, "content": "", "replied": False})
    ]
    for content in ("@helpy what is 2+2", "Hey @HELPER, hi", "(@Helpy)"):
        events = _post(client, auth, thread, "ada", content)
        assert events[-1].event == "done", content
        assert events[-1].data["content"].startswith(f'You said: "{content}"')
        assert "replied" not in events[-1].data
    for content in ("@helpyx no", "@help no", "me@helpy no"):
        events = _post(client, auth, thread, "bob", content)
        assert events[-1].data.get("replied") is False, content
    history = client.get(f"/api/threads/{thread}/messages", headers=auth).json()
    assert [(m["role"], m["sender_name"]) for m in history["messages"][:3]] == [
        ("user", "Bob"),
        ("user", "Ada"),
        ("assistant", None),
    ]
    assert history["messages"][0]["content"].startswith("lunch at noon?")
    assert history["total"] == 1 + 3 * 2 + 3


def test_respond_to_owners_answers_only_the_owners(client: C, auth: H) -> None:
    agent = _agent(client, auth)
    _configure(client, auth, agent, respondTo="owners")
    thread = _room(client, auth, agent, ("ada", "owner"), ("bob", "member"))
    assert _post(client, auth, thread, "bob", "@Helper hi")[-1].data["replied"] is False
    done = _post(client, auth, thread, "ada", "hi")[-1]
    assert done.event == "done"
    assert "message_id" in done.data or "messageId" in done.data
    # the agent heard the member's message too: it is in the history it reads
    assert 'Before that you said: "@Helper hi"' in done.data["content"]


def test_the_default_answers_every_message_and_single_threads_ignore_the_rules(
    client: C, auth: H
) -> None:
    agent = _agent(client, auth)
    thread = _room(client, auth, agent, ("bob", "member"))
    assert _post(client, auth, thread, "bob", "hi")[-1].data["content"].startswith("You said")
    _configure(client, auth, agent, respondTo="mentions")
    r = client.post("/api/threads", json={"agentId": agent}, headers=auth)
    single = r.json()["id"]
    r = client.post(f"/api/threads/{single}/messages", json={"content": "hi"}, headers=auth)
    assert parse(r.text)[-1].data["content"].startswith("You said")


def test_events_belong_to_multiplayer_threads(client: C, auth: H, org_id: str) -> None:
    agent = _agent(client, auth)
    r = client.post("/api/threads", json={"agentId": agent}, headers=auth)
    single = r.json()["id"]
    assert client.get(f"/api/threads/{single}/events", headers=auth).status_code == 422
    thread = _room(client, auth, agent, ("ada", "owner"))
    stranger = bearer(make_jwt("zed", org=org_id))
    assert client.get(f"/api/threads/{thread}/events", headers=stranger).status_code == 403
    other = bearer(make_jwt("zed", org="another-org"))
    assert client.get(f"/api/threads/{thread}/events", headers=other).status_code == 404
    bad = {**auth, "Last-Event-ID": "x"}
    assert client.get(f"/api/threads/{thread}/events", headers=bad).status_code in (400, 422)
