"""Channels (docs/channels.md) through the real Litestar app, on memory and
PostgreSQL: the owner creates, lists, changes and deletes an agent's channels
(credentials write-only, the generic channel's signing secret shown once), pages
and changes contacts, asks for a QR code; the public inbound endpoint refuses a
wrong signature, answers a signed message at once and stores a redelivery once.
(The answering job runs in the end-to-end tests: this app has no worker.)"""

from __future__ import annotations

import time
import uuid
from typing import Any

import msgspec
from litestar.testing import TestClient

from agentsvc_adapters.signing import sign
from tests.web.conftest import bearer, make_jwt

Client = TestClient[Any]
TARGET = "https://hooks.example.com/agent-replies"


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _agent(c: Client, auth: dict[str, str]) -> str:
    body = {"name": "Helper", "defaultModel": "local"}
    return str(_ok(c.post("/api/agents", json=body, headers=auth), 201)["id"])


def _webhook_channel(c: Client, auth: dict[str, str], agent: str, **body: Any) -> dict[str, Any]:
    body = {"type": "webhook", "name": "Site", "config": {"target_url": TARGET}, **body}
    made: dict[str, Any] = _ok(
        c.post(f"/api/agents/{agent}/channels", json=body, headers=auth), 201
    )
    return made


def signed(secret: str, body: bytes, at: int | None = None) -> dict[str, str]:
    timestamp, nonce = str(at if at is not None else int(time.time())), str(uuid.uuid4())
    return {
        "Content-Type": "application/json",
        "X-Service-Timestamp": timestamp,
        "X-Service-Nonce": nonce,
        "X-Service-Signature": sign(secret, timestamp, nonce, body),
    }


def _message(event_id: str = "e1", **over: Any) -> bytes:
    body = {"eventId": event_id, "chatId": "chat-1", "senderId": "u1", "text": "hi", **over}
    return msgspec.json.encode(body)


def test_create_list_change_and_delete(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    made = _webhook_channel(client, auth, agent, dmPolicy="allowlist", allowFrom=["u1"])
    secret = made.pop("signing_secret")
    assert secret.startswith("chs_")
    cid = made["id"]
    assert made == {
        "id": cid,
        "agent_id": agent,
        "type": "webhook",
        "name": "Site",
        "status": "connected",
        "status_reason": None,
        "has_credentials": True,
        "config": {"target_url": TARGET, "channel_id": cid},
        "dm_policy": "allowlist",
        "allow_from": ["u1"],
        "group_policy": "mention",
        "inbound_url": f"http://127.0.0.1:8000/api/channels/{cid}/webhook",
        "created_at": made["created_at"],
        "updated_at": made["updated_at"],
    }
    listed = _ok(client.get(f"/api/agents/{agent}/channels", headers=auth))
    assert listed == [made]  # the secret only in the create answer
    changed = _ok(
        client.patch(
            f"/api/agents/{agent}/channels/{cid}",
            json={"name": "Web", "groupPolicy": "all", "dmPolicy": "open"},
            headers=auth,
        )
    )
    assert (changed["name"], changed["group_policy"], changed["dm_policy"]) == (
        "Web",
        "all",
        "open",
    )
    assert "signing_secret" not in changed
    assert _ok(client.delete(f"/api/agents/{agent}/channels/{cid}", headers=auth)) == {"ok": True}
    assert _ok(client.get(f"/api/agents/{agent}/channels", headers=auth)) == []
    assert client.delete(f"/api/agents/{agent}/channels/{cid}", headers=auth).status_code == 404


def test_create_refuses_what_the_type_does_not_take(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    url = f"/api/agents/{agent}/channels"
    missing = client.post(url, json={"type": "webhook"}, headers=auth)
    assert missing.status_code == 422
    assert "config.target_url" in missing.json()["detail"]
    extra = client.post(
        url, json={"type": "webhook", "config": {"target_url": TARGET, "x": "1"}}, headers=auth
    )
    assert extra.status_code == 422
    creds = client.post(
        url,
        json={"type": "webhook", "config": {"target_url": TARGET}, "credentials": {"a": "b"}},
        headers=auth,
    )
    assert creds.status_code == 422
    assert client.post(url, json={"type": "fax"}, headers=auth).status_code == 422
    assert (
        client.post(url, json={"type": "webhook", "dmPolicy": "x"}, headers=auth).status_code == 422
    )
    bad_target = _webhook_channel(client, auth, agent, config={"target_url": "ftp://x.example"})
    assert (bad_target["status"], bad_target["status_reason"]) == (
        "error",
        "target_url must be an http(s) URL",
    )


def test_another_organizations_agent_and_channel_are_not_found(
    client: Client, auth: dict[str, str]
) -> None:
    agent = _agent(client, auth)
    made = _webhook_channel(client, auth, agent)
    other = bearer(make_jwt(org="another-org", role="admin"))
    assert client.get(f"/api/agents/{agent}/channels", headers=other).status_code == 404
    path = f"/api/agents/{agent}/channels/{made['id']}"
    assert client.patch(path, json={"name": "x"}, headers=other).status_code == 404
    assert client.delete(path, headers=other).status_code == 404
    assert client.get(f"{path}/contacts", headers=other).status_code == 404
    assert client.get(f"{path}/messages", headers=other).status_code == 404
    stranger = _agent(client, auth)  # the same organization, another agent
    assert (
        client.delete(f"/api/agents/{stranger}/channels/{made['id']}", headers=auth).status_code
        == 404
    )


def test_contacts_page_and_unknown_contact(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    made = _webhook_channel(client, auth, agent)
    path = f"/api/agents/{agent}/channels/{made['id']}/contacts"
    assert _ok(client.get(path, headers=auth)) == {"contacts": [], "nextCursor": None}
    assert client.get(f"{path}?cursor=nope", headers=auth).status_code == 422
    missing = client.patch(f"{path}/{uuid.uuid4()}", json={"status": "approved"}, headers=auth)
    assert missing.status_code == 404
    bad = client.patch(f"{path}/{uuid.uuid4()}", json={"status": "friend"}, headers=auth)
    assert bad.status_code == 422


def test_the_messages_a_channel_received(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    made = _webhook_channel(client, auth, agent)
    path = f"/api/agents/{agent}/channels/{made['id']}/messages"
    assert _ok(client.get(path, headers=auth)) == {"messages": [], "nextCursor": None}
    url = f"/api/channels/{made['id']}/webhook"
    for event_id in ("e~1", "e_2"):  # event ids may hold the cursor's separators
        body = _message(event_id)
        assert client.post(
            url, content=body, headers=signed(made["signing_secret"], body)
        ).is_success
    first = _ok(client.get(f"{path}?limit=1", headers=auth))
    (newest,) = first["messages"]
    assert newest["event_id"] == "e_2"
    assert newest["state"] in ("received", "admitted", "answering", "replied", "done")
    assert newest["text"] == "hi"
    rest = _ok(client.get(path, params={"limit": 1, "cursor": first["nextCursor"]}, headers=auth))
    assert [m["event_id"] for m in rest["messages"]] == ["e~1"]
    for bad in ("nope", "2026-11-27T00:00:00Z", "x~e1"):
        assert client.get(path, params={"cursor": bad}, headers=auth).status_code == 422
    assert client.get(f"{path}?state=lost", headers=auth).status_code == 422
    assert _ok(client.get(f"{path}?state=failed", headers=auth))["messages"] == []


def test_the_qr_route(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    assert client.get(f"/api/agents/{agent}/channels/webhook/qr", headers=auth).status_code == 422
    fax = client.get(f"/api/agents/{agent}/channels/fax/qr", headers=auth)
    assert fax.status_code == 422


def test_the_inbound_endpoint(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    made = _webhook_channel(client, auth, agent)
    secret, url = made["signing_secret"], f"/api/channels/{made['id']}/webhook"
    body = _message()
    wrong = client.post(url, content=body, headers=signed("chs_wrong", body))
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "UNAUTHORIZED"
    assert secret not in wrong.text
    stale = client.post(url, content=body, headers=signed(secret, body, int(time.time()) - 400))
    assert stale.status_code == 401
    unsigned = client.post(url, content=body, headers={"Content-Type": "application/json"})
    assert unsigned.status_code == 401
    malformed = b'{"text": "no ids"}'
    assert client.post(url, content=malformed, headers=signed(secret, malformed)).status_code == 400
    for _ in range(2):  # a redelivery is acknowledged the same
        ok = client.post(url, content=body, headers=signed(secret, body))
        assert ok.status_code == 200, ok.text
        assert ok.json() == {"ok": True}
    assert client.get(url).status_code == 405
    unknown = f"/api/channels/{uuid.uuid4()}/webhook"
    assert client.post(unknown, content=body, headers=signed(secret, body)).status_code == 404
    # the endpoint needs no API key, and an API key does not help a wrong signature
    assert client.post(url, content=body, headers={**auth, **signed("x", body)}).status_code == 401
