"""Channels end to end: the real service process (PostgreSQL, its job worker, the
built-in ``local`` model) and the generic signed webhook channel, its replies
delivered to a receiver on loopback that checks every call's signature with the
docs' receiver (docs/examples/webhook_tool_receiver.py: the same ``X-Service-*``
scheme, keyed with the channel's signing secret).

A signed inbound message produces exactly one signed reply, in the right chat,
even when it is delivered twice (and again after it was answered); a wrong
signature is 401 and answers nothing; the contact is kept with its thread."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from agentsvc_adapters.signing import sign
from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.receivers import SignedReceiver
from tests.e2e.service import Service, client, new_org
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

WAIT_S = 60.0  # the worker answers within seconds; a deadline, not a timing


def signed(secret: str, body: bytes) -> dict[str, str]:
    timestamp, nonce = str(int(time.time())), str(uuid.uuid4())
    return {
        "Content-Type": "application/json",
        "X-Service-Timestamp": timestamp,
        "X-Service-Nonce": nonce,
        "X-Service-Signature": sign(secret, timestamp, nonce, body),
    }


def message(event_id: str, chat_id: str, sender: str, text: str) -> bytes:
    body = {
        "eventId": event_id,
        "chatId": chat_id,
        "senderId": sender,
        "senderName": sender.title(),
        "text": text,
    }
    return msgspec.json.encode(body)


def wait_for_calls(receiver: SignedReceiver, count: int) -> list[dict[str, Any]]:
    """The receiver's calls once there are ``count`` of them (polling to a deadline)."""
    deadline = time.monotonic() + WAIT_S
    while len(receiver.calls) < count:
        assert time.monotonic() < deadline, f"{len(receiver.calls)} replies, not {count}"
        time.sleep(0.05)
    return receiver.calls


@pytest.fixture
def world(service: Service) -> Iterator[dict[str, Any]]:
    receiver = SignedReceiver()
    _, key = new_org(service.url, E2E_JWT_SECRET, "channels")
    with serve(receiver) as base, client(service, key) as c:
        agent = c.post("/api/agents", json={"name": "Front desk", "defaultModel": "local"})
        assert agent.status_code == 201, agent.text
        made = c.post(
            f"/api/agents/{agent.json()['id']}/channels",
            json={"type": "webhook", "name": "Site", "config": {"target_url": f"{base}/replies"}},
        )
        assert made.status_code == 201, made.text
        channel = made.json()
        receiver.secret = channel["signing_secret"]
        yield {"c": c, "receiver": receiver, "channel": channel, "agent": agent.json()["id"]}


def test_a_signed_message_gets_exactly_one_signed_reply_in_its_chat(
    world: dict[str, Any],
) -> None:
    c: httpx.Client = world["c"]
    receiver: SignedReceiver = world["receiver"]
    channel = world["channel"]
    secret, url = channel["signing_secret"], f"/api/channels/{channel['id']}/webhook"
    first = message("evt-1", "chat-ann", "ann", "Hello from Ann")
    for _ in range(2):  # the platform delivers it twice
        r = httpx.post(c.base_url.join(url), content=first, headers=signed(secret, first))
        assert r.status_code == 200, r.text
        assert r.json() == {"ok": True}
    (reply,) = wait_for_calls(receiver, 1)
    assert reply["verified"]
    assert reply["path"] == "/replies"
    assert reply["body"]["chatId"] == "chat-ann"
    assert reply["body"]["channelId"] == channel["id"]
    assert reply["body"]["text"]
    # delivered again once answered: still nothing more; another chat's message
    # is answered in its own chat
    again = httpx.post(c.base_url.join(url), content=first, headers=signed(secret, first))
    assert again.status_code == 200
    second = message("evt-2", "chat-bob", "bob", "Hello from Bob")
    r = httpx.post(c.base_url.join(url), content=second, headers=signed(secret, second))
    assert r.status_code == 200
    calls = wait_for_calls(receiver, 2)
    assert [call["body"]["chatId"] for call in calls] == ["chat-ann", "chat-bob"]
    assert all(call["verified"] for call in calls)
    contacts = c.get(f"/api/agents/{world['agent']}/channels/{channel['id']}/contacts").json()
    assert [(k["external_id"], k["display_name"]) for k in contacts["contacts"]] == [
        ("bob", "Bob"),
        ("ann", "Ann"),
    ]
    thread = contacts["contacts"][1]["thread_id"]
    history = c.get(f"/api/threads/{thread}/messages").json()
    texts = [(m["role"], m["content"]) for m in history["messages"]]
    assert texts[0] == ("user", "Hello from Ann")
    assert [role for role, _ in texts] == ["user", "assistant"]
    assert len(receiver.calls) == 2


def test_a_wrong_signature_is_refused_and_answers_nothing(world: dict[str, Any]) -> None:
    c: httpx.Client = world["c"]
    channel = world["channel"]
    url = c.base_url.join(f"/api/channels/{channel['id']}/webhook")
    body = message("evt-x", "chat-eve", "eve", "let me in")
    wrong = httpx.post(url, content=body, headers=signed("chs_not_the_secret", body))
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "UNAUTHORIZED"
    tampered = signed(channel["signing_secret"], body)
    r = httpx.post(url, content=body.replace(b"let me in", b"let me out"), headers=tampered)
    assert r.status_code == 401
    contacts = (
        world["c"].get(f"/api/agents/{world['agent']}/channels/{channel['id']}/contacts").json()
    )
    assert contacts == {"contacts": [], "nextCursor": None}
    assert world["receiver"].calls == []
