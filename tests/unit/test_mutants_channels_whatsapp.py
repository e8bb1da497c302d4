"""The edges of the WhatsApp channel adapters that mutation testing found untested:
exact refusal texts, defaults for a missing credential or setting, odd answers
from the platform, the boundaries of the splitter and of timestamps."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentsvc_adapters.channels.whatsapp_cloud import (
    WhatsAppCloud,
    _error,
    whatsapp_cloud,
    whatsapp_cloud_from_env,
)
from agentsvc_adapters.channels.whatsapp_format import render_whatsapp, split_text
from agentsvc_adapters.channels.whatsapp_web import (
    SECRET_HEADER,
    WhatsAppWeb,
    whatsapp_web_from_env,
)
from agentsvc_adapters.channels.whatsapp_web_events import _sent_at, _user, read_event
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.channel_platforms import (
    DeliveryFailed,
    Inbound,
    InboundRefused,
    InboundRequest,
    Outgoing,
    PlatformBusy,
    PlatformNotConfigured,
    Sent,
)
from tests.fakes.evolution import EVOLUTION_KEY, FakeEvolution
from tests.fakes.whatsapp_cloud import (
    APP_SECRET,
    PHONE_NUMBER_ID,
    TOKEN,
    VERIFY_TOKEN,
    FakeGraph,
    MetaWebhooks,
    text_notification,
)
from tests.web.live import serve

OPEN = OutboundGuard(allow_private_network=True)
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
CREDS = {"access_token": TOKEN, "app_secret": APP_SECRET, "verify_token": VERIFY_TOKEN}
CONFIG: dict[str, str | int | bool] = {"phone_number_id": PHONE_NUMBER_ID, "webhook_verified": True}
URL = "https://a.example/api/channels/c1/webhook"


class Clock:
    def now(self) -> datetime:
        return NOW


@pytest.fixture(scope="module")
def graph() -> Iterator[tuple[FakeGraph, str]]:
    fake = FakeGraph()
    with serve(fake) as url:
        yield fake, url


@pytest.fixture
async def cloud(graph: tuple[FakeGraph, str]) -> AsyncIterator[WhatsAppCloud]:
    graph[0].fail_next.clear()
    graph[0].answer_next.clear()
    adapter = WhatsAppCloud(OPEN, graph[1])
    yield adapter
    await adapter.aclose()


@pytest.fixture(scope="module")
def sidecar() -> Iterator[tuple[FakeEvolution, str]]:
    fake = FakeEvolution()
    with serve(fake) as url:
        yield fake, url


@pytest.fixture
async def web(sidecar: tuple[FakeEvolution, str]) -> AsyncIterator[WhatsAppWeb]:
    sidecar[0].answer_next.clear()
    adapter = WhatsAppWeb(OPEN, sidecar[1], EVOLUTION_KEY, Clock())
    yield adapter
    await adapter.aclose()


def refused(answer: Any) -> tuple[int, str]:
    assert isinstance(answer, InboundRefused)
    return answer.status, answer.detail


# WhatsApp Cloud: inbound


def test_cloud_refusal_texts() -> None:
    adapter = WhatsAppCloud(OPEN)
    meta = MetaWebhooks()
    get = InboundRequest(method="GET", headers={}, query={"hub.mode": "subscribe"}, body=b"")
    assert refused(adapter.read_inbound(get, CREDS, CONFIG, NOW)) == (
        403,
        "the verify token does not match",
    )
    query = {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN}
    no_challenge = InboundRequest(method="GET", headers={}, query=query, body=b"")
    assert refused(adapter.read_inbound(no_challenge, CREDS, CONFIG, NOW)) == (
        400,
        "hub.challenge is missing or too long",
    )
    post = InboundRequest(method="POST", headers={}, query={}, body=b"{}")
    assert refused(adapter.read_inbound(post, CREDS, CONFIG, NOW)) == (
        401,
        "the X-Hub-Signature-256 signature is wrong",
    )
    body = b"[1]"
    signed = InboundRequest(
        method="POST", headers={"x-hub-signature-256": meta.signature(body)}, query={}, body=body
    )
    assert refused(adapter.read_inbound(signed, CREDS, CONFIG, NOW)) == (
        400,
        "the body is not a webhook notification",
    )


def test_cloud_missing_credentials_match_no_guess() -> None:
    adapter = WhatsAppCloud(OPEN)
    query = {"hub.mode": "subscribe", "hub.verify_token": "XXXX", "hub.challenge": "1"}
    get = InboundRequest(method="GET", headers={}, query=query, body=b"")
    assert refused(adapter.read_inbound(get, {}, CONFIG, NOW))[0] == 403
    guess = MetaWebhooks(app_secret="XXXX").request(text_notification("hi"))
    assert refused(adapter.read_inbound(guess, {}, CONFIG, NOW))[0] == 401
    # a query without the token does not match a channel whose token is "XXXX"
    bare = InboundRequest(
        method="GET", headers={}, query={"hub.mode": "subscribe", "hub.challenge": "1"}, body=b""
    )
    assert refused(adapter.read_inbound(bare, {"verify_token": "XXXX"}, CONFIG, NOW))[0] == 403


def test_cloud_a_channel_without_a_number_reads_no_message() -> None:
    adapter = WhatsAppCloud(OPEN)
    for guess in ("XXXX", "None"):
        request = MetaWebhooks().request(text_notification("hi", phone_number_id=guess))
        inbound = adapter.read_inbound(request, CREDS, {"webhook_verified": True}, NOW)
        assert inbound == Inbound()


def test_cloud_messages_after_another_number_s_change_are_read() -> None:
    payload = text_notification("ours", wamid="wamid.OURS")
    other = text_notification("theirs", phone_number_id="1")["entry"][0]["changes"][0]
    payload["entry"][0]["changes"].insert(0, other)
    adapter = WhatsAppCloud(OPEN)
    inbound = adapter.read_inbound(MetaWebhooks().request(payload), CREDS, CONFIG, NOW)
    assert isinstance(inbound, Inbound)
    assert [m.event_id for m in inbound.messages] == ["wamid.OURS"]


def test_meta_s_error_body_read_defensively() -> None:
    assert _error(None) == (None, "")
    assert _error([1]) == (None, "")
    assert _error({"error": "boom"}) == (None, "")
    assert _error({"error": {"code": "190", "message": 5}}) == (None, "")
    assert _error({"error": {"code": 190, "message": "x" * 300}}) == (190, "x" * 200)


# WhatsApp Cloud: connect and send


@pytest.mark.parametrize(("status", "code"), [(400, 190), (401, 1)])
async def test_cloud_either_a_401_or_code_190_is_a_refused_token(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str], status: int, code: int
) -> None:
    graph[0].fail_next.append((status, code))
    connected = await cloud.connect(CREDS, CONFIG, URL)
    assert connected.reason == "Meta refused the access token"


async def test_cloud_connect_says_what_to_do_next(cloud: WhatsAppCloud) -> None:
    connected = await cloud.connect(CREDS, CONFIG, URL)
    assert connected.reason == (
        "waiting for Meta's first webhook: paste the inbound URL and the verify token in "
        "the app's WhatsApp configuration"
    )


async def test_cloud_the_version_is_the_one_set(graph: tuple[FakeGraph, str]) -> None:
    adapter = whatsapp_cloud(OPEN, graph[1], "v22.0")
    try:
        await adapter.connect(CREDS, CONFIG, URL)
    finally:
        await adapter.aclose()
    assert graph[0].requests[-1] == ("GET", f"/v22.0/{PHONE_NUMBER_ID}")


@pytest.mark.parametrize(
    "answer",
    [[], {"messages": []}, {"messages": ["x"]}, {"messages": [{"id": 5}]}, {"messages": "x"}],
)
async def test_cloud_an_odd_success_has_no_message_id(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str], answer: Any
) -> None:
    graph[0].answer_next.append((200, answer, {}))
    assert await cloud.send(CREDS, CONFIG, Outgoing(chat_id="1", text="hi")) == Sent(
        message_id=None
    )


async def test_cloud_refusal_without_a_code_and_with_retry_after(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str], caplog: pytest.LogCaptureFixture
) -> None:
    graph[0].answer_next.append((500, "oops", {}))
    with pytest.raises(DeliveryFailed) as failed:
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="1", text="hi"))
    assert str(failed.value) == "the Graph API answered HTTP 500"
    graph[0].answer_next.append((429, {"error": {"code": 130429}}, {"Retry-After": "7"}))
    with (
        caplog.at_level(logging.WARNING, logger="agentsvc.channels"),
        pytest.raises(PlatformBusy) as busy,
    ):
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="1", text="hi"))
    assert busy.value.retry_after_s == 7.0
    assert "whatsapp cloud send: the Graph API answered HTTP 429 (code 130429)" in caplog.messages
    graph[0].answer_next.append((429, {}, {"Retry-After": "soon"}))
    with pytest.raises(PlatformBusy) as vague:
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="1", text="hi"))
    assert vague.value.retry_after_s == 60.0


# formatting


def test_code_keeps_its_trailing_spaces_but_not_its_last_newline() -> None:
    assert render_whatsapp("```\nx = 1  \n```") == "```x = 1  ```"


def test_split_edges() -> None:
    assert split_text("aa bb", 5) == ("aa bb",)  # exactly the limit: one part
    assert split_text("aa\n\nbb\ncc dd", 10) == ("aa\n\n", "bb\ncc dd")
    assert split_text("a bcdef", 4) == ("a ", "bcde", "f")  # a break at index 1 counts


# WhatsApp Web: events


def test_a_jid_s_number() -> None:
    assert _user("5511:12:7@s.whatsapp.net") == "5511"
    assert _user("5511@lid@x") == "5511"


def test_timestamps_within_bounds() -> None:
    assert _sent_at(0) is None
    assert _sent_at(1) == datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert _sent_at(10**11 - 1) is not None
    assert _sent_at(10**11) is None
    assert _sent_at("12x") is None


def upsert(data: Any, **extra: Any) -> dict[str, Any]:
    return {"event": "messages.upsert", "instance": "i", "data": data, **extra}


def msg(**fields: Any) -> dict[str, Any]:
    key = {"remoteJid": "5511@s.whatsapp.net", "fromMe": False, "id": "K1"}
    return {"key": {**key, **fields.pop("key", {})}, "message": {"conversation": "hi"}, **fields}


def test_extended_text_must_be_text() -> None:
    for text in ("", 5, None):
        data = msg(message={"extendedTextMessage": {"text": text}})
        assert read_event(upsert(data), {}) == Inbound()


def test_the_participant_names_the_sender_only_in_groups() -> None:
    direct = read_event(upsert(msg(key={"participant": "999@s.whatsapp.net"})), {})
    assert direct.messages[0].sender_id == "5511@s.whatsapp.net"
    group = msg(key={"remoteJid": "1@g.us", "participant": ""})
    assert read_event(upsert(group), {}).messages[0].sender_id == "1@g.us"


def test_our_number_from_config_when_the_sender_is_blank_or_odd() -> None:
    mention = msg(
        key={"remoteJid": "1@g.us"},
        message={"extendedTextMessage": {"text": "@7", "contextInfo": {"mentionedJid": ["7@x"]}}},
    )
    assert read_event(upsert(mention, sender=""), {"jid": "7@x"}).messages[0].mentioned
    assert not read_event(upsert(mention, sender=None), {"jid": 7}).messages[0].mentioned


def test_an_open_connection_with_a_blank_number_keeps_none() -> None:
    data = {"state": "open", "wuid": ""}
    inbound = read_event({"event": "connection.update", "data": data}, {})
    assert inbound.status is not None
    assert inbound.status.config == {}


def test_web_refusal_texts() -> None:
    adapter = WhatsAppWeb(OPEN, None, None, Clock())
    creds = {"webhook_secret": "s"}

    def request(method: Any, body: bytes, secret: str | None = "s") -> InboundRequest:  # noqa: S107
        headers = {} if secret is None else {SECRET_HEADER: secret}
        return InboundRequest(method=method, headers=headers, query={}, body=body)

    assert refused(adapter.read_inbound(request("GET", b""), creds, {}, NOW)) == (
        400,
        "the sidecar's events are POSTed",
    )
    assert refused(adapter.read_inbound(request("POST", b"{"), creds, {}, NOW)) == (
        400,
        "the body is not JSON",
    )
    assert refused(adapter.read_inbound(request("POST", b"{}"), creds, {}, NOW)) == (
        400,
        "the body is not a sidecar event",
    )
    body = json.dumps({"event": "messages.upsert", "data": msg()}).encode()
    # no secret on the channel: a request with none, or with a guess, is refused
    assert refused(adapter.read_inbound(request("POST", body, None), {}, {}, NOW))[0] == 401
    assert refused(adapter.read_inbound(request("POST", body, "XXXX"), {}, {}, NOW))[0] == 401
    no_header = request("POST", body, None)
    assert refused(adapter.read_inbound(no_header, {"webhook_secret": "XXXX"}, {}, NOW))[0] == 401


# WhatsApp Web: send and disconnect


@pytest.mark.parametrize(
    "answer",
    [[], {"key": "x"}, {"key": {"id": 5}}, {"key": {}}],
)
async def test_web_an_odd_success_has_no_message_id(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], answer: Any
) -> None:
    sidecar[0].answer_next.append((201, answer))
    sent = await web.send({}, {"instance": "i"}, Outgoing(chat_id="1", text="hi"))
    assert sent == Sent(message_id=None)


async def test_web_a_200_is_a_success_too(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str]
) -> None:
    sidecar[0].answer_next.append((200, {"key": {"id": "3EB0X"}}))
    sent = await web.send({}, {"instance": "i"}, Outgoing(chat_id="1", text="hi"))
    assert sent == Sent(message_id="3EB0X")


async def test_web_send_refusals_are_said_and_logged(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], caplog: pytest.LogCaptureFixture
) -> None:
    sidecar[0].answer_next.append((429, {}))
    with (
        caplog.at_level(logging.WARNING, logger="agentsvc.channels"),
        pytest.raises(PlatformBusy) as busy,
    ):
        await web.send({}, {"instance": "i"}, Outgoing(chat_id="1", text="hi"))
    assert str(busy.value) == "the sidecar answered HTTP 429 to sendText"
    assert "whatsapp web send: the sidecar answered HTTP 429 to sendText" in caplog.messages


async def test_web_a_refusal_of_the_outbound_guard_is_permanent() -> None:
    adapter = WhatsAppWeb(
        OutboundGuard(allow_private_network=False), "https://127.0.0.1", "k", Clock()
    )
    try:
        with pytest.raises(DeliveryFailed) as caught:
            await adapter.send({}, {"instance": "i"}, Outgoing(chat_id="1", text="hi"))
    finally:
        await adapter.aclose()
    assert caught.value.permanent is True
    assert str(caught.value).startswith("the sidecar: refused by the outbound guard")


async def test_web_an_unreachable_sidecar_is_said_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = WhatsAppWeb(OPEN, "http://127.0.0.1:9", "k", Clock())
    try:
        with pytest.raises(DeliveryFailed) as caught:
            await adapter.send({}, {"instance": "i"}, Outgoing(chat_id="1", text="hi"))
        with caplog.at_level(logging.INFO, logger="agentsvc.channels"):
            await adapter.disconnect({}, {"instance": "i"})
    finally:
        await adapter.aclose()
    assert str(caught.value) == "the sidecar: could not reach 127.0.0.1"
    assert caplog.messages == ["whatsapp web disconnect: could not reach 127.0.0.1"] * 2


def test_a_close_with_an_odd_status_reason() -> None:
    data = {"state": "close", "statusReason": [401]}
    inbound = read_event({"event": "connection.update", "data": data}, {})
    assert inbound.status is not None
    assert inbound.status.reason == "the WhatsApp session closed"


async def test_cloud_connect_refused_by_the_outbound_guard_says_so() -> None:
    adapter = WhatsAppCloud(OutboundGuard(allow_private_network=False), "https://127.0.0.1")
    try:
        connected = await adapter.connect(CREDS, CONFIG, URL)
    finally:
        await adapter.aclose()
    assert (connected.reason or "").startswith("the Graph API: refused by the outbound guard")


async def test_web_disconnect_refused_by_the_outbound_guard_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = WhatsAppWeb(OutboundGuard(allow_private_network=False), "https://127.0.0.1", "k")
    try:
        with caplog.at_level(logging.INFO, logger="agentsvc.channels"):
            await adapter.disconnect({}, {"instance": "i"})
    finally:
        await adapter.aclose()
    ours = [m for m in caplog.messages if m.startswith("whatsapp web disconnect: ")]
    assert (
        ours
        == [
            "whatsapp web disconnect: refused by the outbound guard: 127.0.0.1 resolves to a "
            "loopback address"
        ]
        * 2
    )


async def test_the_adapters_from_the_environment(
    graph: tuple[FakeGraph, str], sidecar: tuple[FakeEvolution, str]
) -> None:
    cloud = whatsapp_cloud_from_env(
        OPEN,
        {
            "AGENTSVC_WHATSAPP_CLOUD_API_URL": f" {graph[1]} ",
            "AGENTSVC_WHATSAPP_CLOUD_API_VERSION": "v20.0",
        },
    )
    web = whatsapp_web_from_env(
        OPEN,
        {"AGENTSVC_WHATSAPP_WEB_URL": sidecar[1], "AGENTSVC_WHATSAPP_WEB_API_KEY": EVOLUTION_KEY},
    )
    try:
        await cloud.connect(CREDS, CONFIG, URL)
        state = await web.pairing({}, {"instance": "nowhere"})
    finally:
        await cloud.aclose()
        await web.aclose()
    assert graph[0].requests[-1] == ("GET", f"/v20.0/{PHONE_NUMBER_ID}")
    assert state.reason == "the sidecar answered HTTP 404 to connectionState"  # the key was good
    defaults = whatsapp_cloud_from_env(OPEN, {})
    unset = whatsapp_web_from_env(OPEN, {"AGENTSVC_WHATSAPP_WEB_URL": " "})
    try:
        assert defaults._base == "https://graph.facebook.com/v21.0"
        with pytest.raises(PlatformNotConfigured, match="AGENTSVC_WHATSAPP_WEB_URL"):
            await unset.pairing({}, {})
        keyless = whatsapp_web_from_env(OPEN, {"AGENTSVC_WHATSAPP_WEB_URL": "http://127.0.0.1:9"})
        with pytest.raises(PlatformNotConfigured, match="AGENTSVC_WHATSAPP_WEB_API_KEY"):
            await keyless.pairing({}, {})
        await keyless.aclose()
    finally:
        await defaults.aclose()
        await unset.aclose()


async def test_the_qr_expiry_reads_the_system_clock_by_default(
    sidecar: tuple[FakeEvolution, str],
) -> None:
    fake, url = sidecar
    fake.instances["clocked"] = {"state": "close", "webhook": None, "count": 0, "code": None}
    adapter = WhatsAppWeb(OPEN, url, EVOLUTION_KEY)
    try:
        before = datetime.now(UTC)
        state = await adapter.pairing({}, {"instance": "clocked"})
    finally:
        await adapter.aclose()
    assert state.qr_expires_at is not None
    assert before + timedelta(seconds=60) <= state.qr_expires_at
    assert state.qr_expires_at - before < timedelta(seconds=120)


@pytest.mark.parametrize("answer", [[], {"instance": "open"}, {"instance": {"state": 1}}])
async def test_an_odd_connection_state_is_not_open(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str], answer: Any
) -> None:
    fake, _ = sidecar
    fake.instances["odd"] = {"state": "close", "webhook": None, "count": 0, "code": None}
    fake.answer_next.append((200, answer))
    state = await web.pairing({}, {"instance": "odd"})
    assert state.status == "connecting"
    assert state.qr_png is not None


async def test_the_environment_s_adapter_keeps_the_clock_given(
    sidecar: tuple[FakeEvolution, str],
) -> None:
    fake, url = sidecar
    fake.instances["timed"] = {"state": "close", "webhook": None, "count": 0, "code": None}
    env = {"AGENTSVC_WHATSAPP_WEB_URL": url, "AGENTSVC_WHATSAPP_WEB_API_KEY": EVOLUTION_KEY}
    adapter = whatsapp_web_from_env(OPEN, env, Clock())
    empty = whatsapp_web_from_env(OPEN, {})
    try:
        state = await adapter.pairing({}, {"instance": "timed"})
        with pytest.raises(PlatformNotConfigured, match="AGENTSVC_WHATSAPP_WEB_URL"):
            await empty.pairing({}, {})
    finally:
        await adapter.aclose()
        await empty.aclose()
    assert state.qr_expires_at == NOW + timedelta(seconds=60)


async def test_making_a_lost_instance_again(
    web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str]
) -> None:
    fake, _ = sidecar
    fake.instances.pop("lost", None)
    config = {"instance": "lost", "webhook_url": "http://127.0.0.1:1/api/channels/c/webhook"}
    state = await web.pairing({}, config)
    assert state.status == "connecting"
    webhook = fake.instances["lost"]["webhook"]
    assert webhook["url"] == config["webhook_url"]
    assert webhook["headers"] == {SECRET_HEADER: ""}  # no secret: every event is refused
    fake.instances.pop("lost")
    fake.answer_next.extend([(404, {}), (500, {})])
    failed = await web.pairing({"webhook_secret": "s"}, config)
    assert failed.status == "error"
    assert failed.reason == "the sidecar answered HTTP 500 to creating the instance"


async def test_not_configured_says_exactly_what_to_set() -> None:
    no_url = WhatsAppWeb(OPEN, None, "k")
    no_key = WhatsAppWeb(OPEN, "http://127.0.0.1:9", None)
    try:
        with pytest.raises(PlatformNotConfigured) as url:
            await no_url.pairing({}, {})
        with pytest.raises(PlatformNotConfigured) as key:
            await no_key.pairing({}, {})
    finally:
        await no_url.aclose()
        await no_key.aclose()
    assert str(url.value) == "whatsapp_web needs a sidecar: set AGENTSVC_WHATSAPP_WEB_URL"
    assert str(key.value) == (
        "whatsapp_web needs the sidecar's key: set AGENTSVC_WHATSAPP_WEB_API_KEY"
    )


async def test_web_connect_edges(web: WhatsAppWeb, sidecar: tuple[FakeEvolution, str]) -> None:
    fake, _ = sidecar
    fake.instances.pop("agentsvc-c9", None)
    url = "https://a.example/api/channels/c9/webhook"
    made = await web.connect({}, {}, url)
    assert len(made.credentials["webhook_secret"]) == 43  # 32 random bytes
    fake.answer_next.append((409, {}))  # a name in use, said with 409
    again = await web.connect({"webhook_secret": "s2"}, {}, url)
    assert again.status == "connecting"
    assert fake.instances["agentsvc-c9"]["webhook"]["headers"] == {SECRET_HEADER: "s2"}
    fake.answer_next.append((200, {}))  # a sidecar answering 200 to create
    assert (await web.connect({}, {}, url)).status == "connecting"
    assert (await web.pairing({}, {})).status == "error"


async def test_web_refusals_of_the_outbound_guard_are_said() -> None:
    adapter = WhatsAppWeb(OutboundGuard(allow_private_network=False), "https://127.0.0.1", "k")
    try:
        connected = await adapter.connect({}, {}, URL)
        pairing = await adapter.pairing({}, {"instance": "i"})
    finally:
        await adapter.aclose()
    assert (connected.reason or "").startswith("the sidecar: refused by the outbound guard")
    assert (pairing.reason or "").startswith("the sidecar: refused by the outbound guard")


def test_web_renders_whatsapp_formatting_in_parts() -> None:
    adapter = WhatsAppWeb(OPEN, None, None)
    assert adapter.render("**Sencha** at _80 °C_") == ("*Sencha* at _80 °C_",)
    assert [len(p) for p in adapter.render("word " * 1000)] == [4095, 904]
