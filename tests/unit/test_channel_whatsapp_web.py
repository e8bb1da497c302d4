"""The WhatsApp Web channel adapter against a loopback fake of its sidecar, the
part of Evolution API v2 it speaks (tests/fakes/evolution.py)."""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentsvc_adapters.channels.whatsapp_web import (
    SECRET_HEADER,
    WhatsAppWeb,
    instance_name,
    qr_png,
    whatsapp_web,
)
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.channel_platforms import (
    DeliveryFailed,
    Inbound,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    InboundStatus,
    Outgoing,
    PlatformBusy,
    PlatformNotConfigured,
)
from agentsvc_web.settings import Settings, SettingsError
from tests.fakes.evolution import (
    EVOLUTION_KEY,
    OWN_JID,
    FakeEvolution,
    WebhookInbox,
    text_message,
)
from tests.web.live import serve

OPEN = OutboundGuard(allow_private_network=True)  # the fake is on loopback
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SECRET = "s3cr3t-webhook-token"
CREDS = {"webhook_secret": SECRET}
CHANNEL = "0b7f6c1e-0000-4000-8000-00000000000a"
INSTANCE = f"agentsvc-{CHANNEL}"
CONFIG: dict[str, str | int | bool] = {"instance": INSTANCE}
GROUP = "120363041967849074@g.us"


class Clock:
    def now(self) -> datetime:
        return NOW


@pytest.fixture(scope="module")
def sidecar() -> Iterator[tuple[FakeEvolution, str]]:
    fake = FakeEvolution()
    with serve(fake) as url:
        yield fake, url


@pytest.fixture(scope="module")
def inbox() -> Iterator[tuple[WebhookInbox, str]]:
    receiver = WebhookInbox()
    with serve(receiver) as url:
        yield receiver, url


@pytest.fixture
async def web(sidecar: tuple[FakeEvolution, str]) -> AsyncIterator[WhatsAppWeb]:
    fake, url = sidecar
    fake.instances.clear()
    fake.fail_next.clear()
    fake.qr_ready = True
    adapter = whatsapp_web(OPEN, url + "/", EVOLUTION_KEY, Clock())
    yield adapter
    await adapter.aclose()


def event(name: str, data: Any, **extra: Any) -> InboundRequest:
    payload = {"event": name, "instance": INSTANCE, "data": data, "sender": OWN_JID, **extra}
    return InboundRequest(
        method="POST",
        headers={"content-type": "application/json", SECRET_HEADER: SECRET},
        query={},
        body=json.dumps(payload).encode(),
    )


def read(request: InboundRequest, config: Any = None) -> Any:
    adapter = WhatsAppWeb(OPEN, None, None, Clock())
    return adapter.read_inbound(request, CREDS, CONFIG if config is None else config, NOW)


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


# the proof on inbound events


@pytest.mark.parametrize("given", [None, "", "wrong", SECRET + "x", SECRET[:-1]])
def test_an_event_without_the_channel_s_secret_is_401(given: str | None) -> None:
    request = event("messages.upsert", text_message("hi"))
    headers = {k: v for k, v in request.headers.items() if k != SECRET_HEADER}
    if given is not None:
        headers[SECRET_HEADER] = given
    answer = read(InboundRequest(method="POST", headers=headers, query={}, body=request.body))
    assert isinstance(answer, InboundRefused)
    assert answer.status == 401
    assert SECRET not in answer.detail


def test_a_channel_without_a_secret_refuses_everything() -> None:
    adapter = WhatsAppWeb(OPEN, None, None, Clock())
    request = event("messages.upsert", text_message("hi"))
    headers = {**request.headers, SECRET_HEADER: ""}
    request = InboundRequest(method="POST", headers=headers, query={}, body=request.body)
    answer = adapter.read_inbound(request, {}, CONFIG, NOW)
    assert isinstance(answer, InboundRefused)
    assert answer.status == 401


@pytest.mark.parametrize(
    ("method", "body"),
    [("GET", b""), ("POST", b"not json"), ("POST", b"[]"), ("POST", b'{"event": 1}')],
)
def test_what_is_not_a_sidecar_event_is_400(method: Any, body: bytes) -> None:
    request = InboundRequest(method=method, headers={SECRET_HEADER: SECRET}, query={}, body=body)
    answer = read(request)
    assert isinstance(answer, InboundRefused)
    assert answer.status == 400


# MESSAGES_UPSERT


def test_a_direct_text_message_is_read() -> None:
    inbound = read(event("messages.upsert", text_message("Olá, tem chá verde?")))
    assert inbound == Inbound(
        messages=(
            InboundMessage(
                event_id="3EB0C431C26A1916E0A2",
                chat_id="5511912345678@s.whatsapp.net",
                sender_id="5511912345678@s.whatsapp.net",
                sender_name="Ana Souza",
                text="Olá, tem chá verde?",
                sent_at=datetime(2023, 11, 14, 22, 15, tzinfo=UTC),
            ),
        )
    )


def test_the_event_name_is_read_in_either_spelling() -> None:
    (message,) = read(event("MESSAGES_UPSERT", text_message("hi"))).messages
    assert message.text == "hi"


def test_our_own_messages_and_status_broadcasts_are_ignored() -> None:
    assert read(event("messages.upsert", text_message("mine", from_me=True))) == Inbound()
    assert read(event("messages.upsert", text_message("x", chat="status@broadcast"))) == Inbound()


def test_media_without_text_is_ignored() -> None:
    data = text_message("x")
    data["message"] = {"imageMessage": {"mimetype": "image/jpeg", "caption": ""}}
    assert read(event("messages.upsert", data)) == Inbound()
    data["message"] = {"conversation": ""}
    assert read(event("messages.upsert", data)) == Inbound()


def test_a_message_without_a_key_is_ignored() -> None:
    for key in ({}, {"remoteJid": "1@s.whatsapp.net"}, {"id": "X"}):
        data = {**text_message("x"), "key": key}
        assert read(event("messages.upsert", data)) == Inbound()
    assert read(event("messages.upsert", "nonsense")) == Inbound()


def test_a_group_message_names_its_participant_and_whether_we_are_mentioned() -> None:
    data = text_message(
        "@5511988887777 which tea?",
        chat=GROUP,
        participant="5511977776666@s.whatsapp.net",
        mentioned=["5511988887777:12@s.whatsapp.net"],
    )
    (message,) = read(event("messages.upsert", data)).messages
    assert message.is_group
    assert message.mentioned
    assert message.chat_id == GROUP
    assert message.sender_id == "5511977776666@s.whatsapp.net"
    assert message.text == "@5511988887777 which tea?"


def test_a_group_message_that_mentions_someone_else_is_not_a_mention() -> None:
    data = text_message(
        "hi", chat=GROUP, participant="551@s.whatsapp.net", mentioned=["5500@s.whatsapp.net"]
    )
    (message,) = read(event("messages.upsert", data)).messages
    assert message.is_group
    assert not message.mentioned
    (plain,) = read(event("messages.upsert", text_message("hi", chat=GROUP))).messages
    assert plain.sender_id == GROUP  # no participant: the chat
    assert not plain.mentioned


def test_a_mention_in_the_data_s_context_counts_too() -> None:
    data = {**text_message("hey", chat=GROUP), "contextInfo": {"mentionedJid": [OWN_JID]}}
    (message,) = read(event("messages.upsert", data)).messages
    assert message.mentioned


def test_a_direct_message_is_never_a_mention() -> None:
    data = text_message("hey", mentioned=[OWN_JID])
    (message,) = read(event("messages.upsert", data)).messages
    assert not message.is_group
    assert not message.mentioned


def test_our_number_comes_from_config_when_the_event_has_no_sender() -> None:
    data = text_message("hey", chat=GROUP, mentioned=[OWN_JID])
    request = event("messages.upsert", data, sender=None)
    (message,) = read(request, {**CONFIG, "jid": OWN_JID}).messages
    assert message.mentioned
    (unknown,) = read(request).messages
    assert not unknown.mentioned


def test_several_messages_in_one_event_and_odd_timestamps() -> None:
    first = {**text_message("one", key_id="A"), "messageTimestamp": "1700000000"}
    second = {**text_message("two", key_id="B"), "messageTimestamp": True, "pushName": ""}
    third = {**text_message("three", key_id="C"), "messageTimestamp": 2**41}
    inbound = read(event("messages.upsert", [first, second, third, "junk"]))
    assert [m.event_id for m in inbound.messages] == ["A", "B", "C"]
    assert inbound.messages[0].sent_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert inbound.messages[1].sent_at is None
    assert inbound.messages[1].sender_name is None
    assert inbound.messages[2].sent_at is None


def test_another_instance_s_events_are_ignored() -> None:
    request = event("messages.upsert", text_message("hi"), instance="agentsvc-other")
    assert read(request) == Inbound()
    (kept,) = read(event("messages.upsert", text_message("hi"), instance=None)).messages
    assert kept.text == "hi"


# CONNECTION_UPDATE and the rest


def test_connection_open_is_connected_with_our_number() -> None:
    data = {"instance": INSTANCE, "wuid": OWN_JID, "state": "open", "statusReason": 200}
    assert read(event("connection.update", data)) == Inbound(
        status=InboundStatus(status="connected", config={"jid": OWN_JID})
    )
    del data["wuid"]
    assert read(event("CONNECTION_UPDATE", data)).status == InboundStatus(status="connected")


@pytest.mark.parametrize(
    ("data", "status", "reason"),
    [
        ({"state": "connecting"}, "connecting", None),
        (
            {"state": "close", "statusReason": 401},
            "disconnected",
            "the WhatsApp session closed: logged out on the phone",
        ),
        (
            {"state": "close", "statusReason": 440},
            "disconnected",
            "the WhatsApp session closed: replaced by another WhatsApp Web session",
        ),
        (
            {"state": "close", "statusReason": 428},
            "disconnected",
            "the WhatsApp session closed (status 428)",
        ),
        ({"state": "close"}, "disconnected", "the WhatsApp session closed"),
    ],
)
def test_connection_changes(data: dict[str, Any], status: str, reason: str | None) -> None:
    assert read(event("connection.update", data)).status == InboundStatus(
        status=status,  # type: ignore[arg-type]
        reason=reason,
    )


def test_other_events_are_acknowledged_and_ignored() -> None:
    assert read(event("connection.update", {"state": "refused"})) == Inbound()
    assert read(event("connection.update", "open")) == Inbound()
    qr = {"qrcode": {"instance": INSTANCE, "code": "2@abc", "base64": "data:image/png;base64,"}}
    assert read(event("qrcode.updated", qr)) == Inbound()
    assert read(event("messages.update", {"keyId": "X", "status": "READ"})) == Inbound()


# settings


async def test_an_unset_sidecar_url_names_its_variable() -> None:
    adapter = WhatsAppWeb(OPEN, None, EVOLUTION_KEY, Clock())
    with pytest.raises(PlatformNotConfigured, match="AGENTSVC_WHATSAPP_WEB_URL"):
        await adapter.connect({}, {}, "http://127.0.0.1/api/channels/x/webhook")
    with pytest.raises(PlatformNotConfigured, match="AGENTSVC_WHATSAPP_WEB_URL"):
        await adapter.pairing(CREDS, CONFIG)
    with pytest.raises(PlatformNotConfigured, match="AGENTSVC_WHATSAPP_WEB_URL"):
        await adapter.send(CREDS, CONFIG, Outgoing(chat_id="1", text="x"))
    await adapter.disconnect(CREDS, CONFIG)  # nothing to undo, nothing raised
    await adapter.aclose()


async def test_an_unset_api_key_names_its_variable() -> None:
    adapter = WhatsAppWeb(OPEN, "http://127.0.0.1:9", None, Clock())
    with pytest.raises(PlatformNotConfigured, match="AGENTSVC_WHATSAPP_WEB_API_KEY"):
        await adapter.connect({}, {}, "http://127.0.0.1/api/channels/x/webhook")
    await adapter.disconnect(CREDS, CONFIG)
    await adapter.aclose()


def test_the_instance_is_named_after_the_channel() -> None:
    assert instance_name(f"https://a.example/api/channels/{CHANNEL}/webhook") == INSTANCE
    assert instance_name(f"https://a.example/api/channels/{CHANNEL}/webhook/") == INSTANCE
    other = instance_name("https://a.example/hooks/7")
    assert other.startswith("agentsvc-")
    assert len(other) == len("agentsvc-") + 32
    assert other != instance_name("https://a.example/hooks/8")


def test_the_type_asks_the_user_for_nothing() -> None:
    adapter = WhatsAppWeb(OPEN, None, None, Clock())
    assert adapter.type == "whatsapp_web"
    assert adapter.credential_fields == ()
    assert adapter.config_fields == ()


# connect, pair, send, disconnect against the fake sidecar


async def connected(web: WhatsAppWeb, inbox_url: str, creds: Any = None) -> Any:
    url = f"{inbox_url}/api/channels/{CHANNEL}/webhook"
    return await web.connect(creds or {}, {}, url)


async def test_connect_creates_the_instance_with_its_webhook_and_secret(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    result = await connected(web, inbox[1])
    assert result.status == "connecting"
    assert result.reason == "scan the QR code with WhatsApp on the phone"
    secret = result.credentials["webhook_secret"]
    assert len(secret) >= 40
    url = f"{inbox[1]}/api/channels/{CHANNEL}/webhook"
    assert result.config == {"instance": INSTANCE, "webhook_url": url}
    webhook = sidecar[0].instances[INSTANCE]["webhook"]
    assert webhook == {
        "url": url,
        "byEvents": False,
        "base64": False,
        "headers": {SECRET_HEADER: secret},
        "events": ["MESSAGES_UPSERT", "CONNECTION_UPDATE", "QRCODE_UPDATED"],
    }
    assert result.credentials != (await connected(web, inbox[1])).credentials  # a new one


async def test_connecting_again_keeps_the_secret_and_sets_the_webhook(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    await connected(web, inbox[1], CREDS)
    sidecar[0].instances[INSTANCE]["webhook"]["headers"] = {}
    again = await connected(web, inbox[1], CREDS)
    assert again.status == "connecting"
    assert again.credentials == CREDS
    assert sidecar[0].instances[INSTANCE]["webhook"]["headers"] == {SECRET_HEADER: SECRET}
    assert sidecar[0].instances[INSTANCE]["webhook"]["enabled"] is True
    assert sidecar[0].requests[-1] == ("POST", f"/webhook/set/{INSTANCE}")


async def test_connect_with_a_wrong_key_is_an_error(
    sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    adapter = WhatsAppWeb(OPEN, sidecar[1], "wrong-key", Clock())
    try:
        result = await connected(adapter, inbox[1])
    finally:
        await adapter.aclose()
    assert result.status == "error"
    assert result.reason == "the sidecar refused AGENTSVC_WHATSAPP_WEB_API_KEY"
    assert result.credentials == {}


async def test_connect_with_an_odd_answer_is_an_error(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str]
) -> None:
    # an inbound URL of another shape: the instance is named after its hash
    result = await web.connect({}, {}, "https://a.example/hooks/7")
    assert result.status == "connecting"
    assert result.config["instance"] == instance_name("https://a.example/hooks/7")
    sidecar[0].instances.clear()
    original = sidecar[0]._create
    sidecar[0]._create = lambda body: (400, {"status": 400})  # type: ignore[method-assign]
    try:
        failed = await web.connect({}, {}, "https://a.example/api/channels/x/webhook")
    finally:
        sidecar[0]._create = original  # type: ignore[method-assign]
    assert failed.status == "error"
    assert failed.reason == "the sidecar answered HTTP 400 to creating the instance"


async def test_connect_to_an_unreachable_sidecar_is_an_error() -> None:
    adapter = WhatsAppWeb(OPEN, "http://127.0.0.1:9", EVOLUTION_KEY, Clock())
    try:
        result = await adapter.connect({}, {}, "https://a.example/api/channels/x/webhook")
        pairing = await adapter.pairing(CREDS, CONFIG)
        with pytest.raises(DeliveryFailed) as caught:
            await adapter.send(CREDS, CONFIG, Outgoing(chat_id="1", text="x"))
        await adapter.disconnect(CREDS, CONFIG)  # best effort: nothing raised
    finally:
        await adapter.aclose()
    assert result.status == "error"
    assert result.reason == "the sidecar: could not reach 127.0.0.1"
    assert pairing.status == "error"
    assert pairing.reason == "the sidecar: could not reach 127.0.0.1"
    assert caught.value.permanent is False


async def test_the_qr_goes_from_connecting_to_connected_after_a_scan(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    fake, _ = sidecar
    result = await connected(web, inbox[1])
    creds, config = result.credentials, result.config
    first = await web.pairing(creds, config)
    assert first.status == "connecting"
    assert first.qr_png is not None
    width, height = png_size(first.qr_png)
    assert width == height
    assert width >= 200
    # creating the instance drew the first QR (60 s); this one is a next one (20 s)
    assert first.qr_expires_at == NOW + timedelta(seconds=20)
    assert first.pairing_code is None
    # an expired QR is no failure: the next call has a fresh one, for 20 s
    second = await web.pairing(creds, config)
    assert second.status == "connecting"
    assert second.qr_png is not None
    assert second.qr_png != first.qr_png
    assert second.qr_expires_at == NOW + timedelta(seconds=20)
    # the phone scans: the sidecar posts CONNECTION_UPDATE with the channel's secret
    before = len(inbox[0].requests)
    assert (await fake.scan(INSTANCE)).status_code == 200
    (posted,) = inbox[0].requests[before:]
    inbound = web.read_inbound(posted, creds, config, NOW)
    assert inbound == Inbound(status=InboundStatus(status="connected", config={"jid": OWN_JID}))
    done = await web.pairing(creds, config)
    assert done.status == "connected"
    assert done.qr_png is None
    assert done.qr_expires_at is None


async def test_a_message_through_the_sidecar_reaches_the_adapter(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    fake, _ = sidecar
    result = await connected(web, inbox[1])
    await web.pairing(result.credentials, result.config)
    await fake.scan(INSTANCE)
    before = len(inbox[0].requests)
    await fake.deliver(INSTANCE, text_message("Bom dia!", key_id="3EB0AA"))
    (posted,) = inbox[0].requests[before:]
    inbound = web.read_inbound(posted, result.credentials, result.config, NOW)
    assert isinstance(inbound, Inbound)
    assert [(m.event_id, m.text) for m in inbound.messages] == [("3EB0AA", "Bom dia!")]
    # the same request with another channel's secret is refused
    refused = web.read_inbound(posted, CREDS, result.config, NOW)
    assert isinstance(refused, InboundRefused)
    await fake.close(INSTANCE, 401)
    closing = web.read_inbound(inbox[0].requests[-1], result.credentials, result.config, NOW)
    assert isinstance(closing, Inbound)
    assert closing.status is not None
    assert closing.status.status == "disconnected"


async def test_pairing_when_the_sidecar_has_no_qr_yet(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    result = await connected(web, inbox[1])
    sidecar[0].qr_ready = False
    state = await web.pairing(result.credentials, result.config)
    assert state.status == "connecting"
    assert state.qr_png is None


async def test_pairing_makes_the_instance_again_when_the_sidecar_lost_it(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    result = await connected(web, inbox[1])
    sidecar[0].instances.clear()  # a sidecar started afresh
    state = await web.pairing(result.credentials, result.config)
    assert state.status == "connecting"
    assert state.qr_png is not None
    headers = sidecar[0].instances[INSTANCE]["webhook"]["headers"]
    assert headers == {SECRET_HEADER: result.credentials["webhook_secret"]}


async def test_pairing_without_an_instance_or_its_webhook_is_an_error(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str]
) -> None:
    assert (await web.pairing(CREDS, {})).reason == "the channel has no sidecar instance"
    lost = await web.pairing(CREDS, CONFIG)  # no webhook_url to make it again with
    assert lost.status == "error"
    assert lost.reason == "the sidecar answered HTTP 404 to connectionState"


async def test_pairing_with_a_wrong_key_is_an_error(
    sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    adapter = WhatsAppWeb(OPEN, sidecar[1], "wrong", Clock())
    config = {**CONFIG, "webhook_url": inbox[1] + "/x"}
    try:
        state = await adapter.pairing(CREDS, config)
    finally:
        await adapter.aclose()
    assert state.status == "error"
    assert state.reason == "the sidecar answered HTTP 401 to connectionState"


async def test_pairing_when_connect_fails_is_an_error(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    result = await connected(web, inbox[1])
    original = sidecar[0]._connect
    sidecar[0]._connect = lambda name, instance: (500, {})  # type: ignore[method-assign]
    try:
        state = await web.pairing(result.credentials, result.config)
    finally:
        sidecar[0]._connect = original  # type: ignore[method-assign]
    assert state.status == "error"
    assert state.reason == "the sidecar answered HTTP 500 to connect"


async def test_pairing_code_and_later_qr_counts(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    result = await connected(web, inbox[1])
    original = sidecar[0]._connect
    answers = iter(
        [
            (200, {"code": "2@w", "count": 2}),
            (200, {"code": "2@v", "count": "1"}),
            (200, {"pairingCode": "WZYEH1YY", "code": "2@x", "count": 1}),
            (200, {"pairingCode": 7, "code": "2@y", "count": 0}),
            (200, {"code": "", "count": 3}),
        ]
    )
    sidecar[0]._connect = lambda name, instance: next(answers)  # type: ignore[method-assign]
    try:
        later = await web.pairing(result.credentials, result.config)
        text = await web.pairing(result.credentials, result.config)
        coded = await web.pairing(result.credentials, result.config)
        odd = await web.pairing(result.credentials, result.config)
        empty = await web.pairing(result.credentials, result.config)
    finally:
        sidecar[0]._connect = original  # type: ignore[method-assign]
    assert later.qr_expires_at == NOW + timedelta(seconds=20)
    assert text.qr_expires_at == NOW + timedelta(seconds=60)
    assert coded.pairing_code == "WZYEH1YY"
    assert coded.qr_expires_at == NOW + timedelta(seconds=60)
    assert odd.pairing_code is None
    assert odd.qr_expires_at == NOW + timedelta(seconds=60)
    assert empty.qr_png is None


async def test_send_text_to_an_open_session(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    fake, _ = sidecar
    result = await connected(web, inbox[1])
    await web.pairing(result.credentials, result.config)
    await fake.scan(INSTANCE)
    sent = await web.send(
        result.credentials, result.config, Outgoing(chat_id=GROUP, text="*Sencha*, 80 °C")
    )
    assert sent.message_id is not None
    assert sent.message_id.startswith("3EB0")
    assert fake.sent[-1] == {
        "instance": INSTANCE,
        "number": GROUP,
        "text": "*Sencha*, 80 °C",
        "id": sent.message_id,
    }


@pytest.mark.parametrize(
    ("status", "permanent"), [(401, True), (404, True), (400, True), (500, False), (502, False)]
)
async def test_send_refusals(
    web: WhatsAppWeb,
    sidecar: tuple[FakeEvolution, str],
    inbox: tuple[WebhookInbox, str],
    status: int,
    permanent: bool,
) -> None:
    await connected(web, inbox[1])
    sidecar[0].fail_next.append(status)
    with pytest.raises(DeliveryFailed) as caught:
        await web.send(CREDS, CONFIG, Outgoing(chat_id="5511912345678", text="hi"))
    assert caught.value.permanent is permanent
    assert str(caught.value) == f"the sidecar answered HTTP {status} to sendText"


async def test_send_429_is_busy(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    await connected(web, inbox[1])
    sidecar[0].fail_next.append(429)
    with pytest.raises(PlatformBusy) as caught:
        await web.send(CREDS, CONFIG, Outgoing(chat_id="5511912345678", text="hi"))
    assert caught.value.retry_after_s == 5.0


async def test_send_to_a_closed_session_may_pass_later_and_no_instance_never(
    web: WhatsAppWeb, inbox: tuple[WebhookInbox, str]
) -> None:
    await connected(web, inbox[1])
    with pytest.raises(DeliveryFailed) as closed:
        await web.send(CREDS, CONFIG, Outgoing(chat_id="5511912345678", text="hi"))
    assert closed.value.permanent is False
    with pytest.raises(DeliveryFailed) as missing:
        await web.send(CREDS, {"instance": "nope"}, Outgoing(chat_id="1", text="hi"))
    assert missing.value.permanent is True


async def test_disconnect_logs_out_and_deletes_the_instance(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], inbox: tuple[WebhookInbox, str]
) -> None:
    fake, _ = sidecar
    result = await connected(web, inbox[1])
    await web.pairing(result.credentials, result.config)
    await fake.scan(INSTANCE)
    await web.disconnect(result.credentials, result.config)
    assert INSTANCE not in fake.instances
    assert fake.requests[-2:] == [
        ("DELETE", f"/instance/logout/{INSTANCE}"),
        ("DELETE", f"/instance/delete/{INSTANCE}"),
    ]
    before = len(fake.requests)
    await web.disconnect(result.credentials, {})  # never connected: nothing to call
    assert len(fake.requests) == before


def test_the_qr_png_grows_with_the_code() -> None:
    small, large = png_size(qr_png("2@a")), png_size(qr_png("2@" + "x" * 200))
    assert small[0] < large[0]
    assert small[0] == (21 + 8) * 6  # version 1: 21 modules, a 4-module border, 6 px each


# the settings of both WhatsApp types


def test_the_whatsapp_settings_and_their_defaults() -> None:
    plain = Settings.from_env({"AGENTSVC_STORAGE": "memory"})
    assert plain.whatsapp_cloud_api_url == "https://graph.facebook.com"
    assert plain.whatsapp_cloud_api_version == "v21.0"
    assert plain.whatsapp_web_url is None
    assert plain.whatsapp_web_api_key is None
    set_ = Settings.from_env(
        {
            "AGENTSVC_STORAGE": "memory",
            "AGENTSVC_WHATSAPP_CLOUD_API_URL": "http://127.0.0.1:9001",
            "AGENTSVC_WHATSAPP_CLOUD_API_VERSION": "v22.0",
            "AGENTSVC_WHATSAPP_WEB_URL": "http://127.0.0.1:8080",
            "AGENTSVC_WHATSAPP_WEB_API_KEY": EVOLUTION_KEY,
        }
    )
    assert set_.whatsapp_cloud_api_url == "http://127.0.0.1:9001"
    assert set_.whatsapp_cloud_api_version == "v22.0"
    assert set_.whatsapp_web_url == "http://127.0.0.1:8080"
    assert set_.whatsapp_web_api_key == EVOLUTION_KEY
    assert EVOLUTION_KEY not in repr(set_)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AGENTSVC_WHATSAPP_CLOUD_API_URL", "graph.facebook.com"),
        ("AGENTSVC_WHATSAPP_WEB_URL", "ftp://sidecar"),
        ("AGENTSVC_WHATSAPP_CLOUD_API_VERSION", "21.0"),
        ("AGENTSVC_WHATSAPP_CLOUD_API_VERSION", "v21"),
    ],
)
def test_malformed_whatsapp_settings_stop_start_up(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({"AGENTSVC_STORAGE": "memory", name: value})
