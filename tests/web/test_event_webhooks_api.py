"""Event webhooks (docs/webhooks.md) through the real Litestar app, on memory and
PostgreSQL: endpoints' CRUD with the secret answered only at creation and
rotation, the event types, the rules (known types, https), admins only (reads
too), another organization's ids are 404; a message sent makes a delivery the
endpoint lists (newest first, paged) and a resend is a new delivery of the same
event. (This app has no worker: the delivery job is tested in
tests/unit/test_event_webhooks.py and end to end in
tests/e2e/test_event_webhooks_e2e.py.)"""

from __future__ import annotations

import uuid
from typing import Any

from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt
from tests.web.turns import agent_and_thread, say

Client = TestClient[Any]
URL = "https://hooks.example/agentsvc"


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _endpoint(c: Client, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    body = {"url": URL, "events": ["message.created"], **body}
    made: dict[str, Any] = _ok(c.post("/api/webhooks", json=body, headers=auth), 201)
    return made


def test_endpoints_crud_and_the_secret_shown_once(client: Client, auth: dict[str, str]) -> None:
    made = _endpoint(client, auth, events=["run.failed", "message.created"], description="ops")
    secret = made["secret"]
    assert secret.startswith("whsec_")
    endpoint = made["endpoint"]
    assert endpoint == {
        "id": endpoint["id"],
        "org_id": endpoint["org_id"],
        "url": URL,
        "description": "ops",
        "events": ["message.created", "run.failed"],
        "enabled": True,
        "disabled_reason": None,
        "created_at": endpoint["created_at"],
        "updated_at": endpoint["updated_at"],
    }
    path = f"/api/webhooks/{endpoint['id']}"
    assert _ok(client.get(path, headers=auth)) == endpoint
    listed = client.get("/api/webhooks", headers=auth)
    assert endpoint in listed.json()
    assert secret not in listed.text
    changed = _ok(
        client.patch(path, json={"enabled": False, "events": ["run.paused"]}, headers=auth)
    )
    assert changed["enabled"] is False
    assert changed["events"] == ["run.paused"]
    assert changed["url"] == URL
    rotated = _ok(client.post(f"{path}/rotate-secret", headers=auth))
    assert rotated["secret"].startswith("whsec_")
    assert rotated["secret"] != secret
    assert secret not in client.get(path, headers=auth).text
    stranger = bearer(make_jwt(org=f"other-{uuid.uuid4().hex[:8]}", role="admin"))
    assert client.get(path, headers=stranger).status_code == 404
    assert client.post(f"{path}/rotate-secret", headers=stranger).status_code == 404
    assert _ok(client.delete(path, headers=auth)) == {"ok": True}
    assert client.get(path, headers=auth).status_code == 404
    assert client.delete(path, headers=auth).status_code == 404


def test_event_types_are_listed(client: Client, auth: dict[str, str]) -> None:
    types = {t["type"] for t in _ok(client.get("/api/webhooks/event-types", headers=auth))}
    assert {
        "message.created",
        "reply.completed",
        "reply.failed",
        "run.completed",
        "run.paused",
        "run.failed",
        "knowledge.document.ready",
        "knowledge.document.failed",
        "code_session.finished",
        "channel.status_changed",
    } == types


def test_endpoints_refuse_bad_input(client: Client, auth: dict[str, str]) -> None:
    for body in (
        {"url": URL, "events": []},
        {"url": URL, "events": ["message.created", "message.deleted"]},
        {"url": "http://hooks.example/x", "events": ["run.failed"]},  # https only here
        {"url": "https://127.0.0.1/x", "events": ["run.failed"]},
        {"url": "not a url", "events": ["run.failed"]},
    ):
        r = client.post("/api/webhooks", json=body, headers=auth)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"] == "VALIDATION_ERROR", r.text
    made = _endpoint(client, auth)["endpoint"]
    r = client.patch(f"/api/webhooks/{made['id']}", json={"events": ["nope"]}, headers=auth)
    assert r.status_code == 422


def test_members_may_not_even_read(client: Client, auth: dict[str, str], org_id: str) -> None:
    made = _endpoint(client, auth)["endpoint"]
    member = bearer(make_jwt(org=org_id))
    for method, path in (
        ("GET", "/api/webhooks"),
        ("GET", "/api/webhooks/event-types"),
        ("GET", f"/api/webhooks/{made['id']}"),
        ("GET", f"/api/webhooks/{made['id']}/deliveries"),
        ("POST", "/api/webhooks"),
        ("POST", f"/api/webhooks/{made['id']}/rotate-secret"),
        ("DELETE", f"/api/webhooks/{made['id']}"),
    ):
        r = client.request(
            method,
            path,
            headers=member,
            json={"url": URL, "events": ["run.failed"]} if method == "POST" else None,
        )
        assert r.status_code == 403, (method, path, r.text)


def test_a_message_makes_a_delivery_and_a_resend_another(
    client: Client, auth: dict[str, str]
) -> None:
    made = _endpoint(client, auth)["endpoint"]
    quiet = _endpoint(client, auth, events=["run.failed"])["endpoint"]
    _, thread = agent_and_thread(client, auth)
    say(client, auth, thread, "first")
    say(client, auth, thread, "second")
    base = f"/api/webhooks/{made['id']}/deliveries"
    page = _ok(client.get(f"{base}?limit=1", headers=auth))
    [newest] = page["deliveries"]
    assert newest["event_type"] == "message.created"
    assert newest["status"] == "pending"
    assert newest["attempts"] == []
    assert newest["event_id"].startswith("msg_")
    rest = _ok(client.get(f"{base}?limit=5&cursor={page['nextCursor']}", headers=auth))
    assert len(rest["deliveries"]) == 1
    assert rest["nextCursor"] is None
    older = rest["deliveries"][0]
    assert older["event_id"] != newest["event_id"]
    empty = _ok(client.get(f"/api/webhooks/{quiet['id']}/deliveries", headers=auth))
    assert empty == {"deliveries": [], "nextCursor": None}
    again = _ok(client.post(f"{base}/{older['id']}/resend", headers=auth), 202)
    assert again["event_id"] == older["event_id"]
    assert again["id"] != older["id"]
    listed = _ok(client.get(base, headers=auth))["deliveries"]
    assert next(d["id"] for d in listed) == again["id"]
    assert len(listed) == 3
    # a delivery of another endpoint, an unknown one, a bad cursor
    r = client.post(f"/api/webhooks/{quiet['id']}/deliveries/{older['id']}/resend", headers=auth)
    assert r.status_code == 422
    r = client.post(f"{base}/{uuid.uuid4()}/resend", headers=auth)
    assert r.status_code == 404
    assert client.get(f"{base}?cursor=nope", headers=auth).status_code == 422
