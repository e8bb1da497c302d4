"""The WhatsApp Cloud channel adapter against a loopback fake of Meta's Graph API
(tests/fakes/whatsapp_cloud.py), and WhatsApp's formatting shared with WhatsApp Web."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentsvc_adapters.channels.whatsapp_cloud import WhatsAppCloud, signature_ok, whatsapp_cloud
from agentsvc_adapters.channels.whatsapp_format import (
    WHATSAPP_MAX_CHARS,
    render,
    render_whatsapp,
    split_text,
)
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.channel_platforms import (
    DeliveryFailed,
    Inbound,
    InboundAnswer,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    InboundStatus,
    Outgoing,
    PlatformBusy,
)
from tests.fakes.whatsapp_cloud import (
    APP_SECRET,
    PHONE_NUMBER_ID,
    TOKEN,
    VERIFY_TOKEN,
    FakeGraph,
    MetaWebhooks,
    status_notification,
    text_notification,
)
from tests.web.live import serve

OPEN = OutboundGuard(allow_private_network=True)  # the fake is on loopback
CREDS = {"access_token": TOKEN, "app_secret": APP_SECRET, "verify_token": VERIFY_TOKEN}
CONFIG: dict[str, str | int | bool] = {
    "phone_number_id": PHONE_NUMBER_ID,
    "webhook_verified": True,
}
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
META = MetaWebhooks()
URL = "https://agents.example/api/channels/0b7f6c1e-0000-4000-8000-000000000001/webhook"


@pytest.fixture(scope="module")
def graph() -> Iterator[tuple[FakeGraph, str]]:
    fake = FakeGraph()
    with serve(fake) as url:
        yield fake, url


@pytest.fixture
async def cloud(graph: tuple[FakeGraph, str]) -> AsyncIterator[WhatsAppCloud]:
    fake, url = graph
    fake.fail_next.clear()
    fake.outside_window.clear()
    adapter = whatsapp_cloud(OPEN, url + "/", "v21.0")
    yield adapter
    await adapter.aclose()


def read(request: InboundRequest, config: Any = None) -> Any:
    adapter = WhatsAppCloud(OPEN)
    return adapter.read_inbound(request, CREDS, CONFIG if config is None else config, NOW)


def get(query: dict[str, str]) -> InboundRequest:
    return InboundRequest(method="GET", headers={}, query=query, body=b"")


# the verification handshake


def test_the_handshake_answers_the_challenge_as_plain_text() -> None:
    answer = read(get(META.verification("1158201444")))
    assert answer == InboundAnswer(status=200, body=b"1158201444", content_type="text/plain")


@pytest.mark.parametrize(
    "query",
    [
        {"hub.mode": "subscribe", "hub.challenge": "1", "hub.verify_token": "wrong"},
        {"hub.mode": "subscribe", "hub.challenge": "1", "hub.verify_token": VERIFY_TOKEN + "x"},
        {"hub.mode": "subscribe", "hub.challenge": "1"},
        {"hub.mode": "unsubscribe", "hub.challenge": "1", "hub.verify_token": VERIFY_TOKEN},
        {"hub.challenge": "1", "hub.verify_token": VERIFY_TOKEN},
    ],
)
def test_the_handshake_with_a_wrong_token_or_mode_is_403(query: dict[str, str]) -> None:
    answer = read(get(query))
    assert isinstance(answer, InboundRefused)
    assert answer.status == 403
    assert VERIFY_TOKEN not in answer.detail


def test_no_verify_token_on_the_channel_refuses_every_handshake() -> None:
    adapter = WhatsAppCloud(OPEN)
    query = {"hub.mode": "subscribe", "hub.challenge": "1", "hub.verify_token": ""}
    answer = adapter.read_inbound(get(query), {**CREDS, "verify_token": ""}, CONFIG, NOW)
    assert isinstance(answer, InboundRefused)
    assert answer.status == 403


@pytest.mark.parametrize(("challenge", "status"), [("", 400), ("x" * 257, 400), ("x" * 256, 200)])
def test_the_challenge_is_present_and_short(challenge: str, status: int) -> None:
    answer = read(get(META.verification(challenge)))
    assert answer.status == status


# signatures


def test_a_signed_text_message_is_read() -> None:
    inbound = read(META.request(text_notification("Hi, is the shop open?", wamid="wamid.A1")))
    assert inbound == Inbound(
        messages=(
            InboundMessage(
                event_id="wamid.A1",
                chat_id="16315551181",
                sender_id="16315551181",
                sender_name="Kerry Fisher",
                text="Hi, is the shop open?",
                sent_at=datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
            ),
        )
    )


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "sha1=abc",
        "sha256=",
        "sha256=" + "0" * 64,
        MetaWebhooks(app_secret="another-secret").signature(b"x"),
    ],
)
def test_a_missing_or_wrong_signature_is_401(header: str | None) -> None:
    request = META.request(text_notification("hi"))
    headers = dict(request.headers)
    headers.pop("x-hub-signature-256")
    if header is not None:
        headers["x-hub-signature-256"] = header
    answer = read(InboundRequest(method="POST", headers=headers, query={}, body=request.body))
    assert isinstance(answer, InboundRefused)
    assert answer.status == 401
    assert APP_SECRET not in answer.detail


def test_a_signature_of_another_body_is_401() -> None:
    request = META.request(text_notification("hi"))
    tampered = request.body.replace(b"hi", b"ho")
    answer = read(InboundRequest(method="POST", headers=request.headers, query={}, body=tampered))
    assert isinstance(answer, InboundRefused)
    assert answer.status == 401


def test_the_signature_is_over_the_raw_bytes_and_case_blind_in_hex() -> None:
    body = b'{"object":"whatsapp_business_account","entry":[]}'
    header = META.signature(body)
    assert signature_ok(body, header, APP_SECRET)
    assert signature_ok(body, "sha256=" + header[7:].upper(), APP_SECRET)
    assert not signature_ok(body, header, "")
    assert not signature_ok(body + b" ", header, APP_SECRET)


def test_no_app_secret_on_the_channel_refuses_every_post() -> None:
    adapter = WhatsAppCloud(OPEN)
    request = MetaWebhooks(app_secret="").request(text_notification("hi"))
    answer = adapter.read_inbound(request, {**CREDS, "app_secret": ""}, CONFIG, NOW)
    assert isinstance(answer, InboundRefused)
    assert answer.status == 401


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"entry": []}', b'{"object": 1}'])
def test_a_signed_body_that_is_not_a_notification_is_400(body: bytes) -> None:
    request = InboundRequest(
        method="POST", headers={"x-hub-signature-256": META.signature(body)}, query={}, body=body
    )
    answer = read(request)
    assert isinstance(answer, InboundRefused)
    assert answer.status == 400


# what a notification carries


def test_statuses_are_acknowledged_and_ignored() -> None:
    assert read(META.request(status_notification())) == Inbound()


def test_another_phone_number_s_messages_are_ignored() -> None:
    payload = text_notification("hi", phone_number_id="999999999999999")
    assert read(META.request(payload)) == Inbound()


def test_media_and_other_kinds_are_ignored_and_text_kept() -> None:
    payload = text_notification("second", wamid="wamid.T")
    value = payload["entry"][0]["changes"][0]["value"]
    value["messages"].insert(
        0,
        {
            "from": "16315551181",
            "id": "wamid.IMG",
            "timestamp": "1700000000",
            "type": "image",
            "image": {"mime_type": "image/jpeg", "sha256": "abc", "id": "1"},
        },
    )
    value["messages"].append({"from": "", "id": "wamid.X", "type": "text", "text": {"body": "x"}})
    value["messages"].append({"from": "1", "id": "wamid.Y", "type": "text"})
    inbound = read(META.request(payload))
    assert [m.event_id for m in inbound.messages] == ["wamid.T"]


def test_a_sender_without_a_profile_has_no_name_and_odd_timestamps_no_time() -> None:
    payload = text_notification("hi", timestamp="soon")
    value = payload["entry"][0]["changes"][0]["value"]
    value["contacts"] = [{"wa_id": "16315551181"}]
    (message,) = read(META.request(payload)).messages
    assert message.sender_name is None
    assert message.sent_at is None
    assert message.is_group is False


def test_changes_without_a_value_or_metadata_are_skipped() -> None:
    payload = text_notification("hi", wamid="wamid.K")
    changes = payload["entry"][0]["changes"]
    changes.insert(0, {"field": "account_update"})
    changes.insert(0, {"field": "messages", "value": {"messages": []}})
    assert [m.event_id for m in read(META.request(payload)).messages] == ["wamid.K"]


def test_the_first_verified_post_says_connected_once() -> None:
    pending = {"phone_number_id": PHONE_NUMBER_ID, "webhook_verified": False}
    first = read(META.request(status_notification()), pending)
    assert first.status == InboundStatus(status="connected", config={"webhook_verified": True})
    assert read(META.request(status_notification())).status is None


# connect


async def test_connect_checks_the_number_and_keeps_what_meta_says(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str]
) -> None:
    connected = await cloud.connect(CREDS, {"phone_number_id": PHONE_NUMBER_ID}, URL)
    assert connected.status == "pending"
    assert "verify token" in (connected.reason or "")
    assert connected.config == {
        "display_phone_number": "+1 555-010-4421",
        "verified_name": "Tea Garden",
        "webhook_verified": False,
    }
    assert graph[0].requests[-1] == ("GET", f"/v21.0/{PHONE_NUMBER_ID}")


async def test_connect_with_a_wrong_token_is_an_error(cloud: WhatsAppCloud) -> None:
    connected = await cloud.connect(
        {**CREDS, "access_token": "EAAJwrong"}, {"phone_number_id": PHONE_NUMBER_ID}, URL
    )
    assert connected.status == "error"
    assert connected.reason == "Meta refused the access token"


async def test_connect_with_an_unknown_number_is_an_error(cloud: WhatsAppCloud) -> None:
    connected = await cloud.connect(CREDS, {"phone_number_id": "123"}, URL)
    assert connected.status == "error"
    assert (connected.reason or "").startswith("Meta did not find phone number 123: ")
    assert "does not exist" in (connected.reason or "")


async def test_connect_with_missing_fields_names_them(cloud: WhatsAppCloud) -> None:
    connected = await cloud.connect({"access_token": TOKEN}, {}, URL)
    assert connected.status == "error"
    assert connected.reason == "missing: app_secret, verify_token, phone_number_id"


async def test_connect_to_an_unreachable_api_is_an_error() -> None:
    adapter = WhatsAppCloud(OPEN, "http://127.0.0.1:9", "v21.0")
    try:
        connected = await adapter.connect(CREDS, {"phone_number_id": PHONE_NUMBER_ID}, URL)
    finally:
        await adapter.aclose()
    assert connected.status == "error"
    assert connected.reason == "the Graph API: could not reach 127.0.0.1"


async def test_connect_on_a_5xx_is_an_error(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str]
) -> None:
    graph[0].fail_next.append((500, 1))
    connected = await cloud.connect(CREDS, {"phone_number_id": PHONE_NUMBER_ID}, URL)
    assert connected.status == "error"
    assert "(#1) injected" in (connected.reason or "")


async def test_disconnect_calls_nothing(cloud: WhatsAppCloud, graph: tuple[FakeGraph, str]) -> None:
    before = len(graph[0].requests)
    await cloud.disconnect(CREDS, CONFIG)
    assert len(graph[0].requests) == before


# send


async def test_send_posts_a_text_message_as_meta_wants(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str]
) -> None:
    sent = await cloud.send(CREDS, CONFIG, Outgoing(chat_id="16315551181", text="*Hello*"))
    assert sent.message_id is not None
    assert sent.message_id.startswith("wamid.")
    assert graph[0].sent[-1] == {
        "phone_number_id": PHONE_NUMBER_ID,
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "16315551181",
        "type": "text",
        "text": {"body": "*Hello*", "preview_url": False},
        "id": sent.message_id,
    }


async def test_every_rendered_part_is_accepted(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str]
) -> None:
    parts = cloud.render(("word " * 1000 + "\n\n") * 2)
    assert len(parts) > 1
    for part in parts:
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="16315551181", text=part))
    assert "".join(m["text"]["body"] for m in graph[0].sent[-len(parts) :]) == "".join(parts)


async def test_a_body_over_4096_is_refused_permanently(cloud: WhatsAppCloud) -> None:
    with pytest.raises(DeliveryFailed) as caught:
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="16315551181", text="x" * 4097))
    assert caught.value.permanent
    assert "code 100" in str(caught.value)


@pytest.mark.parametrize(
    ("status", "code", "wait"),
    [(429, 130429, 60.0), (400, 131056, 6.0), (400, 80007, 60.0), (403, 4, 60.0)],
)
async def test_rate_limits_are_platform_busy(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str], status: int, code: int, wait: float
) -> None:
    graph[0].fail_next.append((status, code))
    with pytest.raises(PlatformBusy) as caught:
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="16315551181", text="hi"))
    assert caught.value.retry_after_s == wait
    assert f"HTTP {status} (code {code})" in str(caught.value)


async def test_a_plain_429_is_busy_too(cloud: WhatsAppCloud, graph: tuple[FakeGraph, str]) -> None:
    graph[0].fail_next.append((429, 1))
    with pytest.raises(PlatformBusy):
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="16315551181", text="hi"))


async def test_a_wrong_token_is_permanent(cloud: WhatsAppCloud) -> None:
    with pytest.raises(DeliveryFailed) as caught:
        await cloud.send(
            {**CREDS, "access_token": "nope"}, CONFIG, Outgoing(chat_id="1", text="hi")
        )
    assert caught.value.permanent
    assert "nope" not in str(caught.value)
    assert "HTTP 401 (code 190)" in str(caught.value)


async def test_outside_the_24_hour_window_is_permanent(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str]
) -> None:
    graph[0].outside_window.add("16315551181")
    with pytest.raises(DeliveryFailed) as caught:
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="16315551181", text="hi"))
    assert caught.value.permanent
    assert "131047" in str(caught.value)


@pytest.mark.parametrize(
    ("status", "code", "permanent"),
    [(400, 131026, True), (500, 131000, False), (503, 2, False), (408, 1, False)],
)
async def test_undeliverable_is_permanent_and_a_5xx_is_not(
    cloud: WhatsAppCloud, graph: tuple[FakeGraph, str], status: int, code: int, permanent: bool
) -> None:
    graph[0].fail_next.append((status, code))
    with pytest.raises(DeliveryFailed) as caught:
        await cloud.send(CREDS, CONFIG, Outgoing(chat_id="16315551181", text="hi"))
    assert caught.value.permanent is permanent
    assert str(caught.value).endswith(f"(#{code}) injected by the test")


async def test_an_unreachable_api_may_pass_later() -> None:
    adapter = WhatsAppCloud(OPEN, "http://127.0.0.1:9")
    try:
        with pytest.raises(DeliveryFailed) as caught:
            await adapter.send(CREDS, CONFIG, Outgoing(chat_id="1", text="hi"))
    finally:
        await adapter.aclose()
    assert caught.value.permanent is False
    assert str(caught.value) == "the Graph API: could not reach 127.0.0.1"


async def test_the_outbound_guard_refusal_is_permanent() -> None:
    adapter = WhatsAppCloud(OutboundGuard(allow_private_network=False), "https://127.0.0.1")
    try:
        with pytest.raises(DeliveryFailed) as caught:
            await adapter.send(CREDS, CONFIG, Outgoing(chat_id="1", text="hi"))
    finally:
        await adapter.aclose()
    assert caught.value.permanent is True
    assert "outbound guard" in str(caught.value)


# the whole exchange over HTTP: Meta posting to a receiver


async def test_meta_s_handshake_and_post_over_http() -> None:
    adapter = WhatsAppCloud(OPEN)
    seen: list[Any] = []

    async def endpoint(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        event = await receive()
        request = InboundRequest(
            method=scope["method"],
            headers={k.decode().lower(): v.decode() for k, v in scope["headers"]},
            query=dict(parse_qsl(scope["query_string"].decode())),
            body=event.get("body", b""),
        )
        answer = adapter.read_inbound(request, CREDS, CONFIG, NOW)
        seen.append(answer)
        status = answer.status if not isinstance(answer, Inbound) else 200
        body = answer.body if isinstance(answer, InboundAnswer) else b""
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})

    with serve(endpoint) as url:
        assert await META.verify(url + "/webhook")
        assert not await MetaWebhooks(verify_token="other").verify(url + "/webhook")
        resp = await META.deliver(url + "/webhook", text_notification("hello", wamid="wamid.H"))
        assert resp.status_code == 200
        bad = await MetaWebhooks(app_secret="x").deliver(url + "/webhook", text_notification("x"))
        assert bad.status_code == 401
    assert seen[2].messages[0].event_id == "wamid.H"


# WhatsApp's formatting (shared with WhatsApp Web)


@pytest.mark.parametrize(
    ("markdown", "whatsapp"),
    [
        ("**bold** and __bold__", "*bold* and *bold*"),
        ("*italic* and _italic_", "_italic_ and _italic_"),
        ("~~gone~~", "~gone~"),
        ("# Title", "*Title*"),
        ("## **Already bold** title ##", "*Already bold title*"),
        ("see [the menu](https://tea.example/menu)", "see the menu (https://tea.example/menu)"),
        ("[https://tea.example](https://tea.example)", "https://tea.example"),
        ("* one\n+ two\n  * three", "- one\n- two\n  - three"),
        ("use `pip install` now", "use ```pip install``` now"),
        ("```python\nx = **1**\n```", "```x = **1**```"),
        ("```\n*keep*\n```\nafter *it*", "```*keep*```\nafter _it_"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("a ** b", "a ** b"),
        ("snake_case_name", "snake_case_name"),
        ("  \n\n ", ""),
        ("> quoted", "> quoted"),
        ("mixed ***both***", "mixed *_both_*"),
    ],
)
def test_markdown_becomes_whatsapp_formatting(markdown: str, whatsapp: str) -> None:
    assert render_whatsapp(markdown) == whatsapp


def test_a_nul_in_the_reply_cannot_forge_bold() -> None:
    assert render_whatsapp("a\x00b\x00") == "ab"


def test_a_blank_reply_has_no_parts() -> None:
    assert render("   ") == ()
    assert render("hi") == ("hi",)


def test_split_prefers_paragraphs_then_lines_then_spaces() -> None:
    assert split_text("aaaa\n\nbb\ncc dd", 7) == ("aaaa\n\n", "bb\n", "cc dd")
    assert split_text("aaa bbb\nccc", 9) == ("aaa bbb\n", "ccc")
    assert split_text("aaa bbb ccc", 9) == ("aaa bbb ", "ccc")
    assert split_text("abcdefghij", 4) == ("abcd", "efgh", "ij")
    assert split_text(" abcdefgh", 4) == (" abc", "defg", "h")
    assert split_text("abcd", 4) == ("abcd",)
    assert WHATSAPP_MAX_CHARS == 4096


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from([*"ab *_~`#[]()\n", "\U0001f375", "é"]),
        max_size=400,
    ),
    st.integers(min_value=1, max_value=50),
)
def test_split_parts_fit_and_lose_nothing(text: str, limit: int) -> None:
    parts = split_text(text, limit)
    assert "".join(parts) == text
    assert all(0 < len(p) <= limit for p in parts)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=3000), st.integers(min_value=1, max_value=4))
def test_rendered_parts_fit_whatsapp_and_lose_nothing(text: str, copies: int) -> None:
    markdown = "\n\n".join([text] * copies) * 3
    parts = render(markdown)
    assert all(0 < len(p) <= WHATSAPP_MAX_CHARS for p in parts)
    assert "".join(parts) == render_whatsapp(markdown)
