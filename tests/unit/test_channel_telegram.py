"""The Telegram channel adapter (agentsvc_adapters/channels/telegram.py) against a
loopback fake of the Bot API (tests/fakes/telegram.py), and its HTML renderer."""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.channels.markdown import pack, parse
from agentsvc_adapters.channels.telegram import (
    TelegramPlatform,
    _Answer,
    _sent,
    plain,
    telegram_html,
    webhook_secret,
)
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.channel_platforms import (
    DeliveryFailed,
    Inbound,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    Outgoing,
    PlatformBusy,
)
from tests.fakes.telegram import BOT, TOKEN, EntityError, FakeTelegram, utf16_len, visible_text
from tests.fakes.web import FakeSite
from tests.web.live import serve

OPEN = OutboundGuard(allow_private_network=True)  # the fake is on loopback
NOW = datetime(2026, 11, 27, 22, 0, tzinfo=UTC)
CREDS = {"bot_token": TOKEN}
CONFIG: dict[str, str | int | bool] = {"bot_id": BOT["id"], "bot_username": BOT["username"]}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeTelegram, str]]:
    fake = FakeTelegram()
    with serve(fake) as url:
        yield fake, url


@pytest.fixture
async def platform(served: tuple[FakeTelegram, str]) -> Any:
    made = TelegramPlatform(OPEN, served[1] + "/")
    yield made
    await made.aclose()


def _request(
    update: dict[str, Any], secret: str | None = None, method: str = "POST"
) -> InboundRequest:
    headers = {"content-type": "application/json"}
    headers["x-telegram-bot-api-secret-token"] = webhook_secret(TOKEN) if secret is None else secret
    return InboundRequest(
        method=method,  # type: ignore[arg-type]
        headers=headers,
        query={},
        body=json.dumps(update).encode(),
    )


def _read(update: dict[str, Any], config: dict[str, Any] | None = None) -> Any:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    return platform.read_inbound(_request(update), CREDS, CONFIG if config is None else config, NOW)


# --- the secret token -------------------------------------------------------------------


def test_the_secret_token_is_derived_from_the_bot_token_in_telegram_s_charset() -> None:
    secret = webhook_secret(TOKEN)
    assert secret == webhook_secret(TOKEN)
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", secret)
    assert secret == "J6QW6l54aCY7_ZmcismvPo9Aq7IuMecbJR46K64mt7A"  # HMAC-SHA256, base64url
    assert secret != webhook_secret(TOKEN + "x")
    assert utf16_len("🍵a") == 3
    assert type(utf16_len("a")) is int
    assert TOKEN not in secret


# --- inbound ----------------------------------------------------------------------------


def test_a_private_message_is_read_with_its_sender() -> None:
    fake = FakeTelegram()
    update = fake.update("Which tea for the morning?", update_id=700000123)
    update["message"]["from"]["last_name"] = "Lovelace"
    found = _read(update)
    assert found == Inbound(
        messages=(
            InboundMessage(
                event_id="700000123",
                chat_id="5550001",
                sender_id="5550001",
                sender_name="Ada Lovelace",
                sender_username="ada_l",
                text="Which tea for the morning?",
                is_group=False,
                mentioned=False,
                reply_to=None,
                sent_at=datetime(2024, 11, 27, 22, 0, tzinfo=UTC),
            ),
        )
    )


@pytest.mark.parametrize(
    ("secret", "why"),
    [("wrong-secret", "wrong"), ("", "missing"), (webhook_secret(TOKEN)[:-1], "shorter")],
)
def test_a_wrong_or_missing_secret_token_is_refused(secret: str, why: str) -> None:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    found = platform.read_inbound(_request(FakeTelegram().update("hi"), secret), CREDS, CONFIG, NOW)
    assert found == InboundRefused(status=401, detail="wrong or missing secret token")


def test_a_request_without_the_header_is_refused() -> None:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    body = json.dumps(FakeTelegram().update("hi")).encode()
    request = InboundRequest(method="POST", headers={}, query={}, body=body)
    assert platform.read_inbound(request, CREDS, CONFIG, NOW) == InboundRefused(
        status=401, detail="wrong or missing secret token"
    )


def test_a_caption_s_entities_and_odd_entities() -> None:
    update = FakeTelegram().update("x", chat_type="group", chat_id=-9)
    message = update["message"]
    del message["text"]
    message["caption"] = "🍵 @tea_helper_bot look"
    message["caption_entities"] = [{"type": "mention", "offset": 3, "length": 15}]
    assert _read(update).messages[0].mentioned
    # an entity cutting an emoji in two, or without offsets, names nobody
    message["caption"] = "🍵@tea_helper_bot"
    message["caption_entities"] = [
        {"type": "mention", "offset": 1, "length": 16},
        {"type": "mention", "length": 16},
        {"type": "mention", "offset": "x", "length": 16},
    ]
    assert not _read(update).messages[0].mentioned


def test_a_channel_without_a_token_refuses_everything() -> None:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    request = _request(FakeTelegram().update("hi"))
    assert isinstance(platform.read_inbound(request, {}, CONFIG, NOW), InboundRefused)
    assert platform.read_inbound(request, {}, CONFIG, NOW).status == 401


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"{not json", "the body is not JSON"),
        (b"[1, 2]", "not a Telegram Update"),
        (b'{"message": {}}', "not a Telegram Update"),
        (b'{"update_id": "12"}', "not a Telegram Update"),
    ],
)
def test_a_malformed_body_is_400(body: bytes, detail: str) -> None:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    headers = {"x-telegram-bot-api-secret-token": webhook_secret(TOKEN)}
    request = InboundRequest(method="POST", headers=headers, query={}, body=body)
    assert platform.read_inbound(request, CREDS, CONFIG, NOW) == InboundRefused(
        status=400, detail=detail
    )


def test_a_get_with_the_right_secret_is_400() -> None:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    request = _request(FakeTelegram().update("hi"), method="GET")
    assert platform.read_inbound(request, CREDS, CONFIG, NOW) == InboundRefused(
        status=400, detail="Telegram sends updates by POST"
    )


@pytest.mark.parametrize("kind", ["edited_message", "channel_post", "edited_channel_post"])
def test_other_kinds_of_update_are_acknowledged_and_dropped(kind: str) -> None:
    assert _read(FakeTelegram().update("edited", kind=kind)) == Inbound()


def test_an_update_without_a_message_object_is_acknowledged() -> None:
    assert _read({"update_id": 5, "message": "text"}) == Inbound()
    assert _read({"update_id": 5, "my_chat_member": {}}) == Inbound()


def test_a_photo_without_caption_is_dropped_and_a_caption_is_read() -> None:
    update = FakeTelegram().update("x")
    del update["message"]["text"]
    assert _read(update) == Inbound()
    update["message"]["caption"] = "my teapot"
    assert _read(update).messages[0].text == "my teapot"


def test_messages_of_bots_and_of_channels_are_dropped() -> None:
    update = FakeTelegram().update("beep")
    update["message"]["from"]["is_bot"] = True
    assert _read(update) == Inbound()
    update = FakeTelegram().update("news", chat_type="channel")
    assert _read(update) == Inbound()
    update = FakeTelegram().update("x")
    del update["message"]["from"]
    assert _read(update) == Inbound()
    update = FakeTelegram().update("x")
    del update["message"]["chat"]["id"]
    assert _read(update) == Inbound()


def test_a_sender_without_names_or_date() -> None:
    update = FakeTelegram().update("hi", username=None)
    del update["message"]["from"]["first_name"]
    del update["message"]["date"]
    found = _read(update).messages[0]
    assert (found.sender_name, found.sender_username, found.sent_at) == (None, None, None)


def _group(text: str, entities: list[dict[str, Any]] | None = None, **kw: Any) -> InboundMessage:
    update = FakeTelegram().update(
        text, chat_id=-1001234567890, chat_type="supergroup", entities=entities, **kw
    )
    found = _read(update)
    assert len(found.messages) == 1
    message: InboundMessage = found.messages[0]
    return message


def test_a_group_message_is_a_group_s_and_its_reply_quotes_it() -> None:
    found = _group("morning all")
    assert found.is_group
    assert not found.mentioned
    assert found.chat_id == "-1001234567890"
    assert found.reply_to == "40"
    update = FakeTelegram().update("hi", chat_id=-4001, chat_type="group")
    assert _read(update).messages[0].is_group


def test_a_mention_entity_of_the_bot_is_a_mention_at_utf16_offsets() -> None:
    text = "🍵🍵 @Tea_Helper_Bot which tea?"
    entity = {"type": "mention", "offset": 5, "length": 15}  # two emoji: 4 code units + space
    assert _group(text, [entity]).mentioned


def test_a_mention_of_someone_else_is_not() -> None:
    text = "@other_bot which tea?"
    assert not _group(text, [{"type": "mention", "offset": 0, "length": 10}]).mentioned
    # the bot named in the text without an entity (Telegram always sends one): not read
    assert not _group("@tea_helper_bot hi").mentioned


def test_a_text_mention_a_command_and_a_reply_to_the_bot_are_mentions() -> None:
    text_mention = {"type": "text_mention", "offset": 0, "length": 3, "user": {"id": BOT["id"]}}
    assert _group("Tea please", [text_mention]).mentioned
    other = {"type": "text_mention", "offset": 0, "length": 3, "user": {"id": 42}}
    assert not _group("Tea please", [other]).mentioned
    command = {"type": "bot_command", "offset": 0, "length": 20}
    assert _group("/brew@tea_helper_bot green", [command]).mentioned
    assert not _group("/brew green", [{"type": "bot_command", "offset": 0, "length": 5}]).mentioned
    assert _group("that one?", reply_to_bot=True).mentioned


def test_without_the_bot_s_identity_nothing_is_a_mention() -> None:
    update = FakeTelegram().update(
        "@tea_helper_bot hi",
        chat_type="group",
        chat_id=-5,
        entities=[{"type": "mention", "offset": 0, "length": 15}],
        reply_to_bot=True,
    )
    assert not _read(update, {}).messages[0].mentioned
    assert _read(update, {"bot_username": "tea_helper_bot"}).messages[0].mentioned
    assert _read(update, {"bot_id": BOT["id"]}).messages[0].mentioned


def test_a_private_message_is_never_a_mention() -> None:
    update = FakeTelegram().update(
        "@tea_helper_bot hi", entities=[{"type": "mention", "offset": 0, "length": 15}]
    )
    assert not _read(update).messages[0].mentioned


# --- connect, disconnect ----------------------------------------------------------------


async def test_connect_checks_the_token_and_sets_the_webhook(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform
) -> None:
    fake, _ = served
    inbound = "http://127.0.0.1:9/api/channels/0b7c/webhook"
    connected = await platform.connect(CREDS, {}, inbound)
    assert connected.status == "connected"
    assert connected.reason is None
    assert connected.config == {"bot_id": BOT["id"], "bot_username": BOT["username"]}
    assert fake.webhook == {
        "url": inbound,
        "secret_token": webhook_secret(TOKEN),
        "allowed_updates": ["message"],
    }
    # what Telegram then posts is accepted by read_inbound
    headers, body = fake.webhook_request(fake.update("hello"))
    request = InboundRequest(method="POST", headers=headers, query={}, body=body)
    assert platform.read_inbound(request, CREDS, connected.config, NOW).messages  # type: ignore[union-attr]


async def test_a_bad_token_is_an_error_status(platform: TelegramPlatform) -> None:
    connected = await platform.connect({"bot_token": "1:wrong"}, {}, "http://127.0.0.1:9/x")
    assert connected.status == "error"
    assert connected.reason == "Telegram refused the bot token: Unauthorized"
    missing = await platform.connect({}, {}, "http://127.0.0.1:9/x")
    assert (missing.status, missing.reason) == ("error", "the bot token is missing")


async def test_a_refused_webhook_is_an_error_status(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform
) -> None:
    connected = await platform.connect(CREDS, {}, "http://tea.example/hook")
    assert connected.status == "error"
    assert connected.reason == (
        "Telegram refused the webhook: Bad Request: bad webhook: "
        "An HTTPS URL must be provided for webhook"
    )


def _closed_port() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


async def test_an_unreachable_api_is_an_error_status_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    platform = TelegramPlatform(OPEN, _closed_port())
    try:
        connected = await platform.connect(CREDS, {}, "http://127.0.0.1:9/x")
        assert connected.status == "error"
        assert connected.reason == "could not reach 127.0.0.1"
        with caplog.at_level(logging.INFO, logger="agentsvc.channels"):
            await platform.disconnect(CREDS, {})  # best effort: no exception
    finally:
        await platform.aclose()
    assert caplog.messages == ["telegram: deleteWebhook failed: could not reach 127.0.0.1"]
    assert TOKEN not in caplog.text


async def test_every_call_goes_through_the_outbound_guard(served: tuple[FakeTelegram, str]) -> None:
    fake, url = served
    before = len(fake.calls)
    platform = TelegramPlatform(OutboundGuard(allow_private_network=False), url)
    try:
        connected = await platform.connect(CREDS, {}, "https://tea.example/x")
        assert connected.status == "error"
        assert "refused by the outbound guard" in (connected.reason or "")
        with pytest.raises(DeliveryFailed, match="refused by the outbound guard") as caught:
            await platform.send(CREDS, CONFIG, Outgoing(chat_id="5550001", text="hi"))
        assert TOKEN not in str(caught.value)
    finally:
        await platform.aclose()
    assert len(fake.calls) == before


async def test_disconnect_deletes_the_webhook(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform
) -> None:
    fake, _ = served
    await platform.connect(CREDS, {}, "http://127.0.0.1:9/x")
    assert fake.webhook
    await platform.disconnect(CREDS, CONFIG)
    assert fake.webhook == {}
    assert fake.calls[-1] == ("deleteWebhook", {})
    calls = len(fake.calls)
    await platform.disconnect({}, CONFIG)  # no token: nothing to call
    assert len(fake.calls) == calls


# --- send -------------------------------------------------------------------------------


async def test_send_posts_html_to_the_chat(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform
) -> None:
    fake, _ = served
    fake.add_chat(5550001)
    (part,) = platform.render("Try **sencha** & `gyokuro`")
    sent = await platform.send(CREDS, CONFIG, Outgoing(chat_id="5550001", text=part))
    last = fake.sent[-1]
    assert sent.message_id == str(last["message_id"])
    assert last["text"] == "Try <b>sencha</b> &amp; <code>gyokuro</code>"
    assert last["parse_mode"] == "HTML"
    assert last["reply_parameters"] is None


async def test_a_group_reply_quotes_the_message(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform
) -> None:
    fake, _ = served
    fake.add_chat(-1009)
    await platform.send(CREDS, CONFIG, Outgoing(chat_id="-1009", text="yes", reply_to="77"))
    assert fake.sent[-1]["reply_parameters"] == {
        "message_id": 77,
        "allow_sending_without_reply": True,
    }
    await platform.send(CREDS, CONFIG, Outgoing(chat_id="-1009", text="yes", reply_to="ts.1"))
    assert fake.sent[-1]["reply_parameters"] is None


async def test_a_429_is_platform_busy_with_telegram_s_delay(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform
) -> None:
    fake, _ = served
    fake.add_chat(5550001)
    fake.throttle(7)
    with pytest.raises(PlatformBusy) as caught:
        await platform.send(CREDS, CONFIG, Outgoing(chat_id="5550001", text="hi"))
    assert caught.value.retry_after_s == 7.0
    assert str(caught.value) == "Telegram answered 429: Too Many Requests: retry after 7"
    # the next try goes through
    assert (await platform.send(CREDS, CONFIG, Outgoing(chat_id="5550001", text="hi"))).message_id


async def test_a_429_without_a_delay_waits_a_second(platform: TelegramPlatform) -> None:
    with pytest.raises(PlatformBusy) as caught:
        _sent(429, _Answer(ok=False, description="Too Many Requests"))
    assert caught.value.retry_after_s == 1.0
    with pytest.raises(PlatformBusy) as caught:
        _sent(429, _Answer(ok=False, parameters={"retry_after": 0}))
    assert caught.value.retry_after_s == 1.0
    with pytest.raises(PlatformBusy) as caught:
        _sent(429, _Answer(ok=False, parameters={"retry_after": 2.5}))
    assert caught.value.retry_after_s == 2.5
    with pytest.raises(PlatformBusy) as caught:
        _sent(429, _Answer(ok=False, parameters={"retry_after": 0.5}))
    assert caught.value.retry_after_s == 0.5
    assert _sent(200, _Answer(ok=True, result=True)).message_id is None
    with pytest.raises(DeliveryFailed, match="Telegram answered 400: no description"):
        _sent(400, _Answer(ok=False))


@pytest.mark.parametrize(
    ("chat", "token", "message"),
    [
        ("404404", TOKEN, "Telegram answered 400: Bad Request: chat not found"),
        ("not-a-number", TOKEN, "Telegram answered 400: Bad Request: chat not found"),
        ("5550001", "1:wrong", "Telegram answered 401: Unauthorized"),
        ("-777", TOKEN, "Telegram answered 403: Forbidden: bot was blocked by the user"),
    ],
)
async def test_refusals_that_cannot_change_are_permanent(
    served: tuple[FakeTelegram, str],
    platform: TelegramPlatform,
    chat: str,
    token: str,
    message: str,
) -> None:
    fake, _ = served
    fake.add_chat(5550001)
    fake.add_chat(-777).blocked = True
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send({"bot_token": token}, CONFIG, Outgoing(chat_id=chat, text="hi"))
    assert caught.value.permanent
    assert str(caught.value) == message


async def test_too_long_a_text_is_refused_for_good(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform
) -> None:
    served[0].add_chat(5550001)
    with pytest.raises(DeliveryFailed, match="message is too long") as caught:
        await platform.send(CREDS, CONFIG, Outgoing(chat_id="5550001", text="x" * 4097))
    assert caught.value.permanent


async def test_a_server_error_or_no_network_may_pass_later(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform
) -> None:
    fake, _ = served
    fake.add_chat(5550001)
    fake.fail_next(502)
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send(CREDS, CONFIG, Outgoing(chat_id="5550001", text="hi"))
    assert caught.value.permanent is False
    assert str(caught.value) == "Telegram answered 502: Internal Server Error"
    down = TelegramPlatform(OPEN, _closed_port())
    try:
        with pytest.raises(DeliveryFailed) as caught:
            await down.send(CREDS, CONFIG, Outgoing(chat_id="5550001", text="hi"))
    finally:
        await down.aclose()
    assert caught.value.permanent is False
    assert str(caught.value) == "could not reach 127.0.0.1"


async def test_an_answer_that_is_not_json_may_pass_later() -> None:
    with serve(FakeSite()) as url:  # answers its 404 in plain text
        platform = TelegramPlatform(OPEN, url)
        try:
            with pytest.raises(DeliveryFailed) as caught:
                await platform.send(CREDS, CONFIG, Outgoing(chat_id="1", text="hi"))
        finally:
            await platform.aclose()
    assert caught.value.permanent is False
    assert str(caught.value) == "Telegram answered 404 without a JSON body"


async def test_no_token_is_a_permanent_failure(platform: TelegramPlatform) -> None:
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send({}, CONFIG, Outgoing(chat_id="1", text="hi"))
    assert caught.value.permanent
    assert str(caught.value) == "the channel has no bot token"


async def test_html_telegram_cannot_parse_is_sent_again_as_plain_text(
    served: tuple[FakeTelegram, str], platform: TelegramPlatform, caplog: pytest.LogCaptureFixture
) -> None:
    fake, _ = served
    fake.add_chat(5550001)
    with caplog.at_level(logging.INFO, logger="agentsvc.channels"):
        sent = await platform.send(
            CREDS, CONFIG, Outgoing(chat_id="5550001", text="<b>strong &amp; <span>tea</b>")
        )
    assert caplog.messages == [
        "telegram: HTML refused (Bad Request: can't parse entities: Can't parse entities: "
        'unsupported start tag "span" at byte offset 16); sent as plain text'
    ]
    assert fake.sent[-1]["text"] == "strong & tea"
    assert fake.sent[-1]["parse_mode"] is None
    assert sent.message_id == str(fake.sent[-1]["message_id"])


# --- render -----------------------------------------------------------------------------


def test_render_writes_telegram_html() -> None:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    markdown = (
        '# Green tea\n\nUse **70-80 °C** "soft" water, *not* boiling: ~~100~~ is too hot & '
        'bitter <really>.\n\n- Sencha: see [the guide](https://tea.example/a?b=1&c="2")\n'
        "1. Warm the pot\n\n> Patience is a tea.\n> Truly.\n\n"
        "```python\nif t < 80:\n    brew()\n```"
    )
    (part,) = platform.render(markdown)
    assert part == (
        '<b>Green tea</b>\n\nUse <b>70-80 °C</b> "soft" water, <i>not</i> boiling: '
        "<s>100</s> is too hot &amp; bitter &lt;really&gt;.\n\n• Sencha: see "
        '<a href="https://tea.example/a?b=1&amp;c=&quot;2&quot;">the guide</a>\n'
        "1. Warm the pot\n\n<blockquote>Patience is a tea.\nTruly.</blockquote>\n\n"
        '<pre><code class="language-python">if t &lt; 80:\n    brew()</code></pre>'
    )
    visible_text(part)


def test_unsupported_links_and_code_in_links_stay_text() -> None:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    assert platform.render("[run](javascript:alert(1)) and [`x`](https://e.x)") == (
        'run (javascript:alert(1)) and <a href="https://e.x">x</a>',
    )
    assert platform.render("```\nplain\n```") == ("<pre><code>plain</code></pre>",)


def test_a_long_reply_is_split_at_paragraphs_with_tags_reopened() -> None:
    paragraph = "**" + "word " * 500 + "end**"
    parts = TelegramPlatform.__new__(TelegramPlatform).render(paragraph + "\n\n" + paragraph)
    assert len(parts) >= 2
    for part in parts:
        assert utf16_len(part) <= 4096
        assert part.startswith("<b>")
        assert part.endswith("</b>")
        visible_text(part)


def test_plain_removes_tags_and_reads_entities() -> None:
    assert plain('<a href="x">a &lt;b&gt; &amp; c</a>') == "a <b> & c"


TOKENS = st.sampled_from(
    [
        "tea",
        "green",
        "🍵",
        "&",
        "<",
        ">",
        '"',
        " ",
        " ",
        " ",
        "\n",
        "\n\n",
        "**",
        "*",
        "_",
        "`",
        "~~",
        "# ",
        "- ",
        "> ",
        "1. ",
        "```\n",
        "[a link](https://tea.example/x?a=1&b=2)",
        "<https://tea.example>",
        "\\*",
        "snake_case",
    ]
)
MARKDOWN = st.lists(TOKENS, max_size=120).map("".join)


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


@given(MARKDOWN, st.integers(min_value=40, max_value=200))
def test_every_part_is_valid_html_within_the_limit_and_no_text_is_lost(
    markdown: str, limit: int
) -> None:
    runs = parse(markdown)
    whole = pack(runs, telegram_html(100_000))
    parts = pack(runs, telegram_html(limit))
    assert all(utf16_len(p) <= limit for p in parts)
    shown = [visible_text(p) for p in parts]
    assert all(s.strip() for s in shown)
    assert _squeezed("".join(shown)) == _squeezed("".join(visible_text(p) for p in whole))


@given(MARKDOWN)
def test_render_at_telegram_s_limit(markdown: str) -> None:
    platform = TelegramPlatform.__new__(TelegramPlatform)
    parts = platform.render(markdown * 40)
    assert all(utf16_len(p) <= 4096 for p in parts)
    for part in parts:
        visible_text(part)


def test_the_fake_refuses_html_as_telegram_does() -> None:
    for bad in (
        "<b>open",
        "a < b",
        "a & b",
        "<b><i>x</b></i>",
        "<span>x</span>",
        "<code><b>x</b></code>",
        '<a href="x"><a href="y">x</a></a>',
        "</b>",
        "a > b",
        "<a>x</a>",
        '<a href="x"><code>y</code></a>',
        "<blockquote><blockquote>x</blockquote></blockquote>",
    ):
        with pytest.raises(EntityError):
            visible_text(bad)
    assert visible_text('<pre><code class="language-py">x &lt; 1</code></pre>') == "x < 1"
    assert visible_text("<b>a &#38; &#x26; &quot;</b>") == 'a & & "'


async def test_the_fake_bot_api_is_as_strict_as_telegram(served: tuple[FakeTelegram, str]) -> None:
    fake, url = served
    base = f"{url}/bot{TOKEN}"
    fake.add_chat(5550001)
    async with httpx.AsyncClient(trust_env=False) as client:

        async def call(method: str, **body: Any) -> dict[str, Any]:
            answer: dict[str, Any] = (await client.post(f"{base}/{method}", json=body)).json()
            return answer

        assert (await call("setWebhook"))[
            "description"
        ] == 'Bad Request: parameter "url" is required'
        port = await call("setWebhook", url="https://tea.example:8080/hook")
        assert port["description"].endswith("only on ports 80, 88, 443 or 8443")
        secret = await call("setWebhook", url="https://tea.example/hook", secret_token="no spaces")
        assert secret["description"] == "Bad Request: secret token contains unallowed characters"
        kinds = await call("setWebhook", url="https://tea.example/hook", allowed_updates=["nope"])
        assert kinds["description"] == "Bad Request: can't parse allowed updates"
        assert (await call("setWebhook", url="https://tea.example:8443/hook"))["ok"]
        info = await call("getWebhookInfo")
        assert info["result"]["url"] == "https://tea.example:8443/hook"
        assert (await call("setWebhook", url=""))["description"] == "Webhook was deleted"
        reply = await call(
            "sendMessage", chat_id=5550001, text="hi", reply_parameters={"message_id": 9}
        )
        assert reply["description"] == "Bad Request: message to be replied not found"
        empty = await call("sendMessage", chat_id=5550001, text="<b> </b>", parse_mode="HTML")
        assert empty["description"] == "Bad Request: message text is empty"
        form = await client.post(f"{base}/sendMessage", data={"chat_id": "5550001", "text": "hi"})
        assert form.json()["ok"]
        unknown = await client.post(f"{base}/sendPhoto", json={})
        assert unknown.json() == {"ok": False, "error_code": 404, "description": "Not Found"}
        wrong = await client.post(f"{url}/bot1:x/getMe")
        assert (wrong.status_code, wrong.json()["description"]) == (401, "Unauthorized")


def test_lengths_are_telegram_s_utf16_code_units() -> None:
    assert utf16_len("🍵a") == 3
    assert type(utf16_len("a")) is int
    parts = TelegramPlatform.__new__(TelegramPlatform).render("🍵" * 3000)
    assert [utf16_len(p) for p in parts] == [4096, 1904]


def test_without_a_username_no_mention_names_the_bot() -> None:
    for named in ("@none", "@xxxx"):
        update = FakeTelegram().update(
            f"{named} hi",
            chat_type="group",
            chat_id=-6,
            entities=[{"type": "mention", "offset": 0, "length": 5}],
        )
        assert not _read(update, {"bot_id": BOT["id"]}).messages[0].mentioned


def test_the_dialect_measures_utf16() -> None:
    parts = pack(parse("🍵" * 3000), telegram_html())
    assert [utf16_len(p) for p in parts] == [4096, 1904]
