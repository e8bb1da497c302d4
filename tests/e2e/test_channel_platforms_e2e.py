"""The messaging platforms end to end: the real service process (PostgreSQL, its
job worker, the built-in ``local`` model) with every platform's base URL pointed
at a strict loopback fake of that platform (tests/fakes: the Telegram Bot API,
Slack's Web API and Events API sender, Meta's Graph API and webhooks, an
Evolution API sidecar for WhatsApp Web), as a user would point them at the real
ones (docs/channels.md).

- Telegram: creating the channel checks the token and registers the webhook with
  its secret; an update delivered twice gets exactly one reply, in its chat.
- Slack: an event retried three times (``X-Slack-Retry-Num``) is answered once, in
  its thread, each delivery acknowledged within Slack's 3 s.
- WhatsApp Cloud: Meta's ``hub.challenge`` handshake, a signed message answered to
  its sender.
- WhatsApp Web: the QR pairing goes from ``connecting`` to ``connected`` when the
  phone scans it, and then a message is answered.
- On each platform a wrong proof (secret token, signature, sidecar secret) is
  refused with 401 and answers nothing."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest

from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.service import Service, client, new_org, running
from tests.fakes import evolution, slack, telegram, whatsapp_cloud
from tests.pg import fresh_database
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

WAIT_S = 60.0  # the worker answers within seconds; a deadline, not a timing
SLACK_ACK_S = 3.0  # Slack retries a delivery that got no 200 within 3 s


class Fakes(NamedTuple):
    telegram: telegram.FakeTelegram
    slack: slack.FakeSlack
    graph: whatsapp_cloud.FakeGraph
    evolution: evolution.FakeEvolution
    evolution_url: str


class World(NamedTuple):
    svc: Service
    fakes: Fakes
    c: httpx.Client
    agent: str


@pytest.fixture(scope="module")
def platforms(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str) -> Iterator[World]:
    tmp: Path = tmp_path_factory.mktemp("channel-platforms")
    fakes_apps = (
        telegram.FakeTelegram(),
        slack.FakeSlack(),
        whatsapp_cloud.FakeGraph(),
        evolution.FakeEvolution(),
    )
    # a database of its own: another test's service on the shared one could take
    # this service's jobs, and answer them with platforms pointed elsewhere
    with (
        fresh_database(pg_admin_url) as pg_url,
        serve(fakes_apps[0]) as telegram_url,
        serve(fakes_apps[1]) as slack_url,
        serve(fakes_apps[2]) as graph_url,
        serve(fakes_apps[3]) as evolution_url,
        running(
            {
                "AGENTSVC_STORAGE": "postgres",
                "AGENTSVC_DATABASE_URL": pg_url,
                "AGENTSVC_JWT_SECRET": E2E_JWT_SECRET,
                "AGENTSVC_DATA_DIR": str(tmp / "data"),
                "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",  # the fakes are on loopback
                "AGENTSVC_TELEGRAM_API_URL": telegram_url,
                "AGENTSVC_SLACK_API_URL": f"{slack_url}/api",
                "AGENTSVC_WHATSAPP_CLOUD_API_URL": graph_url,
                "AGENTSVC_WHATSAPP_WEB_URL": evolution_url,
                "AGENTSVC_WHATSAPP_WEB_API_KEY": evolution.EVOLUTION_KEY,
            },
            log=tmp / "service.log",
        ) as svc,
    ):
        _, key = new_org(svc.url, E2E_JWT_SECRET, "platforms")
        with client(svc, key) as c:
            agent = c.post("/api/agents", json={"name": "Tea desk", "defaultModel": "local"})
            assert agent.status_code == 201, agent.text
            yield World(svc, Fakes(*fakes_apps, evolution_url), c, agent.json()["id"])


def create(world: World, body: dict[str, Any]) -> dict[str, Any]:
    made = world.c.post(f"/api/agents/{world.agent}/channels", json=body)
    assert made.status_code == 201, made.text
    channel: dict[str, Any] = made.json()
    assert channel["inbound_url"] == f"{world.svc.url}/api/channels/{channel['id']}/webhook"
    return channel


def wait_for(what: Callable[[], list[Any]], count: int) -> list[Any]:
    """``what()`` once it holds ``count`` items (polling to a deadline)."""
    deadline = time.monotonic() + WAIT_S
    while len(items := what()) < count:
        assert time.monotonic() < deadline, f"{len(items)} of {count}: {items}"
        time.sleep(0.05)
    return items


def thread_of(world: World, channel: dict[str, Any], external_id: str) -> list[tuple[str, str]]:
    contacts = world.c.get(f"/api/agents/{world.agent}/channels/{channel['id']}/contacts")
    assert contacts.status_code == 200, contacts.text
    (contact,) = [k for k in contacts.json()["contacts"] if k["external_id"] == external_id]
    history = world.c.get(f"/api/threads/{contact['thread_id']}/messages").json()
    return [(m["role"], m["content"]) for m in history["messages"]]


def test_a_telegram_update_delivered_twice_is_answered_once_in_its_chat(
    platforms: World,
) -> None:
    fake = platforms.fakes.telegram
    channel = create(
        platforms,
        {"type": "telegram", "name": "Tea bot", "credentials": {"botToken": telegram.TOKEN}},
    )
    assert channel["status"] == "connected", channel
    assert channel["config"]["bot_username"] == fake.bot["username"]
    assert "bot_token" not in json.dumps(channel)
    assert telegram.TOKEN not in json.dumps(channel)
    # the service registered its own endpoint, with a secret token Telegram will send
    assert fake.webhook["url"] == channel["inbound_url"]
    assert fake.webhook["secret_token"]

    update = fake.update("Which tea for a cold evening?", chat_id=5550001)
    headers, body = fake.webhook_request(update)
    for _ in range(2):  # Telegram delivers it again
        r = httpx.post(channel["inbound_url"], content=body, headers=headers)
        assert r.status_code == 200, r.text
    (reply,) = wait_for(lambda: fake.sent, 1)
    assert reply["chat_id"] == 5550001
    assert reply["parse_mode"] == "HTML"
    assert reply["text"]

    # another chat is answered in its own chat, and the duplicate never was
    other = fake.update("And for the morning?", chat_id=5550002, user_id=5550002)
    headers2, body2 = fake.webhook_request(other)
    assert httpx.post(channel["inbound_url"], content=body2, headers=headers2).status_code == 200
    sent = wait_for(lambda: fake.sent, 2)
    assert [m["chat_id"] for m in sent] == [5550001, 5550002]
    assert thread_of(platforms, channel, "5550001")[0] == ("user", "Which tea for a cold evening?")

    # a wrong secret token (or none) is refused, and answers nothing
    forged = fake.update("let me in", chat_id=5550003)
    _, raw = fake.webhook_request(forged)
    for wrong in ({"x-telegram-bot-api-secret-token": "not-the-secret"}, {}):
        r = httpx.post(
            channel["inbound_url"],
            content=raw,
            headers={"content-type": "application/json", **wrong},
        )
        assert r.status_code == 401, r.text
        assert r.json()["error"] == "UNAUTHORIZED"
    time.sleep(0.5)  # give a wrongly queued job the time to show itself
    assert len(fake.sent) == 2

    # a reply the platform refuses for good is recorded on its message, with the
    # reason, and the channel says so
    blocked = fake.update("Are you there?", chat_id=5550004, user_id=5550004)
    fake.chats[5550004].blocked = True  # the user blocked the bot
    headers3, body3 = fake.webhook_request(blocked)
    assert httpx.post(channel["inbound_url"], content=body3, headers=headers3).status_code == 200
    base = f"/api/agents/{platforms.agent}/channels/{channel['id']}"

    def failed() -> list[dict[str, Any]]:
        page = platforms.c.get(f"{base}/messages", params={"state": "failed"})
        assert page.status_code == 200, page.text
        return list(page.json()["messages"])

    (lost,) = wait_for(failed, 1)
    assert lost["chat_id"] == "5550004"
    assert lost["text"] == "Are you there?"
    assert "blocked" in lost["error"]
    listed = platforms.c.get(f"/api/agents/{platforms.agent}/channels").json()
    (now,) = [c for c in listed if c["id"] == channel["id"]]
    assert now["status"] == "error"
    assert "blocked" in now["status_reason"]
    every = platforms.c.get(f"{base}/messages", params={"limit": 2}).json()
    assert [m["chat_id"] for m in every["messages"]] == ["5550004", "5550002"]
    rest = platforms.c.get(
        f"{base}/messages", params={"limit": 2, "cursor": every["nextCursor"]}
    ).json()
    assert [(m["chat_id"], m["state"]) for m in rest["messages"]] == [("5550001", "done")]
    assert rest["nextCursor"] is None

    # deleting the channel removes the webhook it registered
    gone = platforms.c.delete(f"/api/agents/{platforms.agent}/channels/{channel['id']}")
    assert gone.status_code == 200, gone.text
    assert [m for m, _ in fake.calls][-1] == "deleteWebhook"
    assert not fake.webhook.get("url")


def test_a_slack_event_retried_three_times_is_answered_once_in_its_thread(
    platforms: World,
) -> None:
    fake = platforms.fakes.slack
    channel = create(
        platforms,
        {
            "type": "slack",
            "name": "Tea Makers",
            "credentials": {"botToken": slack.BOT_TOKEN, "signingSecret": slack.SIGNING_SECRET},
        },
    )
    assert channel["status"] == "connected", channel
    assert channel["config"]["team"] == slack.TEAM["team"]
    sender = slack.EventSender()
    # Slack checks the URL first: the challenge comes back as it was sent
    headers, body = sender.signed(
        sender.url_verification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
    )
    r = httpx.post(channel["inbound_url"], content=body, headers=headers, timeout=SLACK_ACK_S)
    assert r.status_code == 200
    assert r.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}

    ts = "1732744900.000200"
    event = sender.callback(
        slack.message_event(f"<@{slack.BOT_USER}> which tea goes with cake?", ts=ts)
    )
    raw = json.dumps(event).encode()
    for attempt in range(4):  # the delivery and Slack's three retries
        headers, _ = sender.signed(event, retry=attempt, body=raw)
        # within Slack's deadline, or httpx raises: the ack comes before any model call
        r = httpx.post(channel["inbound_url"], content=raw, headers=headers, timeout=SLACK_ACK_S)
        assert r.status_code == 200, r.text
    (reply,) = wait_for(lambda: fake.posted, 1)
    assert reply["channel"] == "C0GENERAL1"
    assert reply["thread_ts"] == ts  # in the thread of the message it answers
    assert reply["text"]

    # a signature made with another secret, or a stale timestamp, is refused
    bad = slack.EventSender(signing_secret="0" * 32)
    forged = bad.callback(slack.message_event(f"<@{slack.BOT_USER}> hi", ts="1732744901.0"))
    headers, body = bad.signed(forged)
    r = httpx.post(channel["inbound_url"], content=body, headers=headers)
    assert r.status_code == 401, r.text
    stale_event = sender.callback(slack.message_event(f"<@{slack.BOT_USER}> hi", ts="1732744902.0"))
    headers, body = sender.signed(stale_event, timestamp=int(time.time()) - 600)
    assert httpx.post(channel["inbound_url"], content=body, headers=headers).status_code == 401
    time.sleep(0.5)  # give a wrongly queued job the time to show itself
    assert len(fake.posted) == 1


def test_whatsapp_cloud_verifies_its_webhook_and_answers_the_sender(platforms: World) -> None:
    fake = platforms.fakes.graph
    meta = whatsapp_cloud.MetaWebhooks()
    channel = create(
        platforms,
        {
            "type": "whatsapp_cloud",
            "name": "Shop WhatsApp",
            "config": {"phoneNumberId": whatsapp_cloud.PHONE_NUMBER_ID},
            "credentials": {
                "accessToken": whatsapp_cloud.TOKEN,
                "appSecret": whatsapp_cloud.APP_SECRET,
                "verifyToken": whatsapp_cloud.VERIFY_TOKEN,
            },
        },
    )
    assert channel["config"]["verified_name"] == "Tea Garden"
    # Meta's check when the URL is saved: the challenge, as is; a wrong token is 403
    r = httpx.get(channel["inbound_url"], params=meta.verification("1158201444"))
    assert (r.status_code, r.text) == (200, "1158201444")
    wrong = {**meta.verification("1"), "hub.verify_token": "not-it"}
    assert httpx.get(channel["inbound_url"], params=wrong).status_code == 403

    note = whatsapp_cloud.text_notification("Do you ship oolong?", wamid="wamid.E2E1")
    request = meta.request(note)
    for _ in range(2):
        r = httpx.post(channel["inbound_url"], content=request.body, headers=dict(request.headers))
        assert r.status_code == 200, r.text
    (reply,) = wait_for(lambda: fake.sent, 1)
    assert reply["to"] == "16315551181"
    assert reply["type"] == "text"
    assert reply["text"]["body"]

    forged = whatsapp_cloud.MetaWebhooks(app_secret="f" * 32).request(
        whatsapp_cloud.text_notification("let me in", wamid="wamid.E2E2")
    )
    r = httpx.post(channel["inbound_url"], content=forged.body, headers=dict(forged.headers))
    assert r.status_code == 401, r.text
    time.sleep(0.5)  # give a wrongly queued job the time to show itself
    assert len(fake.sent) == 1


def test_whatsapp_web_pairs_by_qr_then_answers(platforms: World) -> None:
    fake, sidecar = platforms.fakes.evolution, platforms.fakes.evolution_url
    channel = create(platforms, {"type": "whatsapp_web", "name": "My WhatsApp"})
    assert channel["status"] == "connecting", channel
    qr_url = f"/api/agents/{platforms.agent}/channels/whatsapp_web/qr"
    shown = platforms.c.get(qr_url)
    assert shown.status_code == 200, shown.text
    assert shown.json()["status"] == "connecting"
    data_url = shown.json()["qr"]["data_url"]
    assert data_url.startswith("data:image/png;base64,")
    assert base64.b64decode(data_url.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # asked again, it is still a QR to scan (an expired one is not a failure)
    assert platforms.c.get(qr_url).json()["status"] == "connecting"

    name = channel["config"]["instance"]
    key = {"apikey": evolution.EVOLUTION_KEY}
    scanned = httpx.post(f"{sidecar}/_test/scan/{name}", headers=key)  # the phone scans it
    assert scanned.json() == {"webhook_status": 200}, scanned.text
    listed = platforms.c.get(f"/api/agents/{platforms.agent}/channels").json()
    (now,) = [c for c in listed if c["id"] == channel["id"]]
    assert now["status"] == "connected"
    connected = platforms.c.get(qr_url)
    assert connected.status_code == 409, connected.text

    said = httpx.post(
        f"{sidecar}/_test/deliver/{name}",
        headers=key,
        json={"text": "Bom dia! Do you have mate?", "from": "5511912345678"},
    )
    assert said.json() == {"webhook_status": 200}, said.text
    (reply,) = wait_for(lambda: fake.sent, 1)
    assert reply["instance"] == name
    assert reply["number"].startswith("5511912345678")

    # the sidecar's events carry the channel's own secret: without it, 401
    event = {"event": "messages.upsert", "instance": name, "data": evolution.text_message("hi")}
    r = httpx.post(channel["inbound_url"], json=event)
    assert r.status_code == 401, r.text
    time.sleep(0.5)  # give a wrongly queued job the time to show itself
    assert len(fake.sent) == 1
