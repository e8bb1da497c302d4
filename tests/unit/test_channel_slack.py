"""The Slack channel adapter (agentsvc_adapters/channels/slack.py) against a loopback
fake of Slack's Web API and Events sender (tests/fakes/slack.py), and its mrkdwn
renderer."""

from __future__ import annotations

import json
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
from agentsvc_adapters.channels.slack import SlackPlatform, _retry_after, slack_mrkdwn
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.channel_platforms import (
    DeliveryFailed,
    Inbound,
    InboundAnswer,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    Outgoing,
    PlatformBusy,
)
from agentsvc_web.settings import Settings, SettingsError
from tests.fakes.slack import (
    BOT_ID,
    BOT_TOKEN,
    BOT_USER,
    SIGNING_SECRET,
    TEAM,
    EventSender,
    FakeSlack,
    app_mention_event,
    message_event,
)
from tests.fakes.web import FakeSite
from tests.web.live import serve

OPEN = OutboundGuard(allow_private_network=True)  # the fake is on loopback
NOW = datetime(2024, 11, 27, 22, 0, tzinfo=UTC)
STAMP = int(NOW.timestamp())
CREDS = {"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET}
CONFIG: dict[str, str | int | bool] = {"team_id": TEAM["team_id"], "bot_user_id": BOT_USER}
READER = SlackPlatform.__new__(SlackPlatform)  # read_inbound and render make no call


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeSlack, str]]:
    fake = FakeSlack()
    with serve(fake) as url:
        yield fake, url + "/api"


@pytest.fixture
async def platform(served: tuple[FakeSlack, str]) -> Any:
    made = SlackPlatform(OPEN, served[1] + "/")
    yield made
    await made.aclose()


def _request(
    payload: dict[str, Any], *, at: int = STAMP, retry: int = 0, secret: str = SIGNING_SECRET
) -> InboundRequest:
    headers, body = EventSender(secret).signed(payload, timestamp=at, retry=retry)
    return InboundRequest(method="POST", headers=headers, query={}, body=body)


def _read(payload: dict[str, Any], config: dict[str, Any] | None = None, **kw: Any) -> Any:
    return READER.read_inbound(
        _request(payload, **kw), CREDS, CONFIG if config is None else config, NOW
    )


EVENTS = EventSender()


# --- signatures -------------------------------------------------------------------------


def test_a_signed_event_is_read() -> None:
    found = _read(EVENTS.callback(message_event("Which tea, <@U0BOTUSER1>? A &amp; B")))
    assert found == Inbound(
        messages=(
            InboundMessage(
                event_id="C0GENERAL1:1732744800.000100",
                chat_id="C0GENERAL1",
                sender_id="U0ADA00001",
                text="Which tea, <@U0BOTUSER1>? A & B",
                is_group=True,
                mentioned=True,
                reply_to="1732744800.000100",
                sent_at=datetime(2024, 11, 27, 22, 0, 0, 100, tzinfo=UTC),
            ),
        )
    )


@pytest.mark.parametrize(
    "request_of",
    [
        lambda p: _request(p, secret="another-signing-secret"),
        lambda p: _request(p, at=STAMP - 301),  # more than 5 minutes old
        lambda p: _request(p, at=STAMP + 301),  # or ahead
        lambda p: InboundRequest(method="POST", headers={}, query={}, body=json.dumps(p).encode()),
        lambda p: InboundRequest(
            method="POST",
            headers={"x-slack-request-timestamp": "soon", "x-slack-signature": "v0=00"},
            query={},
            body=json.dumps(p).encode(),
        ),
        lambda p: InboundRequest(
            method="POST",
            headers=_request(p).headers,
            query={},
            body=json.dumps(p).encode() + b" ",  # the body is not the signed one
        ),
    ],
    ids=["wrong-secret", "stale", "future", "unsigned", "bad-timestamp", "altered-body"],
)
def test_a_wrong_missing_or_stale_signature_is_refused(request_of: Any) -> None:
    request = request_of(EVENTS.callback(message_event("hi")))
    assert READER.read_inbound(request, CREDS, CONFIG, NOW) == InboundRefused(
        status=401, detail="wrong, missing or stale Slack signature"
    )


def test_a_signature_within_five_minutes_is_accepted() -> None:
    assert _read(EVENTS.callback(message_event("hi")), at=STAMP - 300).messages
    assert _read(EVENTS.callback(message_event("hi")), at=STAMP + 299).messages


def test_a_channel_without_a_signing_secret_refuses_everything() -> None:
    request = _request(EVENTS.callback(message_event("hi")))
    for creds in ({"bot_token": BOT_TOKEN}, {**CREDS, "signing_secret": "  "}):
        assert READER.read_inbound(request, creds, CONFIG, NOW) == InboundRefused(
            status=401, detail="wrong, missing or stale Slack signature"
        )


def test_url_verification_is_answered_with_its_challenge() -> None:
    found = _read(
        EventSender.url_verification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
    )
    assert found == InboundAnswer(
        status=200,
        body=b'{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}',
        content_type="application/json",
    )
    # unsigned, it is refused like anything else
    request = InboundRequest(
        method="POST", headers={}, query={}, body=b'{"type":"url_verification"}'
    )
    assert isinstance(READER.read_inbound(request, CREDS, CONFIG, NOW), InboundRefused)


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        (b"not json", "the body is not JSON"),
        (b'["event"]', "not a Slack event"),
        (b'{"type": "url_verification"}', "url_verification without a challenge"),
    ],
)
def test_a_malformed_body_is_400(payload: bytes, detail: str) -> None:
    headers, body = EVENTS.signed({}, timestamp=STAMP, body=payload)
    request = InboundRequest(method="POST", headers=headers, query={}, body=body)
    assert READER.read_inbound(request, CREDS, CONFIG, NOW) == InboundRefused(
        status=400, detail=detail
    )


# --- events -----------------------------------------------------------------------------


def test_retries_and_the_mention_twin_share_the_event_id() -> None:
    first = _read(EVENTS.callback(message_event("<@U0BOTUSER1> hi")))
    retried = _read(EVENTS.callback(message_event("<@U0BOTUSER1> hi")), retry=1)
    mention = _read(EVENTS.callback(app_mention_event("<@U0BOTUSER1> hi")), retry=2)
    assert first.messages == retried.messages == mention.messages
    assert first.messages[0].event_id == "C0GENERAL1:1732744800.000100"


def test_a_direct_message_is_answered_in_the_chat_and_a_thread_in_its_thread() -> None:
    direct = _read(EVENTS.callback(message_event("hi", channel="D0DIRECT01", channel_type="im")))
    (message,) = direct.messages
    assert (message.is_group, message.mentioned, message.reply_to) == (False, False, None)
    threaded = _read(
        EVENTS.callback(
            message_event(
                "and?", channel="D0DIRECT01", channel_type="im", thread_ts="1732744700.000001"
            )
        )
    )
    assert threaded.messages[0].reply_to == "1732744700.000001"
    group = _read(EVENTS.callback(message_event("and?", thread_ts="1732744700.000001")))
    assert group.messages[0].reply_to == "1732744700.000001"


@pytest.mark.parametrize("channel_type", ["channel", "group", "mpim"])
def test_channels_groups_and_multi_person_dms_are_groups(channel_type: str) -> None:
    found = _read(EVENTS.callback(message_event("morning", channel_type=channel_type)))
    (message,) = found.messages
    assert message.is_group
    assert not message.mentioned
    assert message.reply_to == "1732744800.000100"


def test_an_app_mention_is_a_mention_in_a_group() -> None:
    (message,) = _read(EVENTS.callback(app_mention_event("hey <@U0OTHER01>"))).messages
    assert (message.is_group, message.mentioned) == (True, True)
    # without the bot's id, only app_mention names it
    (plain,) = _read(EVENTS.callback(message_event("<@U0BOTUSER1> hi")), {}).messages
    assert not plain.mentioned


def test_a_sender_profile_gives_the_names() -> None:
    profile = {"real_name": "Ada Lovelace", "display_name": "ada", "name": "ada.l"}
    (message,) = _read(EVENTS.callback(message_event("hi", user_profile=profile))).messages
    assert (message.sender_name, message.sender_username) == ("Ada Lovelace", "ada.l")
    (shown,) = _read(
        EVENTS.callback(message_event("hi", user_profile={"display_name": "ada"}))
    ).messages
    assert (shown.sender_name, shown.sender_username) == ("ada", None)


@pytest.mark.parametrize(
    "event",
    [
        message_event("from a bot", bot_id="B0OTHER001"),
        message_event("edited", subtype="message_changed"),
        message_event("joined", subtype="channel_join"),
        message_event("mine", user=BOT_USER),
        message_event("   "),
        message_event("no user", user=None),
        message_event("no ts", ts=None),
        message_event("no channel", channel=None),
        {**message_event("x"), "text": None},
        {"type": "reaction_added", "user": "U0ADA00001", "reaction": "tea"},
    ],
    ids=[
        "bot",
        "changed",
        "join",
        "own",
        "blank",
        "no-user",
        "no-ts",
        "no-channel",
        "no-text",
        "reaction",
    ],
)
def test_events_the_channel_does_not_act_on_are_acknowledged(event: dict[str, Any]) -> None:
    assert _read(EVENTS.callback(event)) == Inbound()


def test_file_shares_and_thread_broadcasts_are_messages() -> None:
    for subtype in ("file_share", "thread_broadcast"):
        assert _read(EVENTS.callback(message_event("look", subtype=subtype))).messages


def test_other_envelopes_are_acknowledged() -> None:
    assert (
        _read({"type": "app_rate_limited", "team_id": "T0TEAM0001", "minute_rate_limited": 1})
        == Inbound()
    )
    assert _read({"type": "event_callback", "event": "text"}) == Inbound()


def test_a_ts_that_is_not_a_time_has_no_sent_at() -> None:
    (message,) = _read(EVENTS.callback(message_event("hi", ts="later"))).messages
    assert message.sent_at is None
    assert message.event_id == "C0GENERAL1:later"


async def test_the_sender_delivers_signed_retries_as_slack_does() -> None:
    seen: list[InboundRequest] = []

    async def receiver(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = (await receive())["body"]
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        seen.append(InboundRequest(method="POST", headers=headers, query={}, body=body))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    payload = EVENTS.callback(message_event("hi"))
    with serve(receiver) as url:
        answers = await EVENTS.deliver(url + "/hook", payload, retries=2)
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [r.headers.get("x-slack-retry-num") for r in seen] == [None, "1", "2"]
    assert [r.headers.get("x-slack-retry-reason") for r in seen] == [
        None,
        "http_timeout",
        "http_timeout",
    ]
    now = datetime.fromtimestamp(int(seen[0].headers["x-slack-request-timestamp"]), UTC)
    found = [READER.read_inbound(r, CREDS, CONFIG, now) for r in seen]
    assert all(f == found[0] for f in found)
    assert found[0].messages  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="loopback"):
        await EVENTS.deliver("https://hooks.example/x", payload)


# --- connect ----------------------------------------------------------------------------


async def test_connect_reads_the_team_and_the_bot_user(platform: SlackPlatform) -> None:
    connected = await platform.connect(CREDS, {}, "https://agents.example/api/channels/1/webhook")
    assert connected.status == "connected"
    assert connected.config == {
        "team": TEAM["team"],
        "team_id": TEAM["team_id"],
        "bot_user_id": BOT_USER,
        "bot_id": BOT_ID,
    }


async def test_connect_refusals_are_error_statuses(
    served: tuple[FakeSlack, str], platform: SlackPlatform
) -> None:
    wrong = await platform.connect({**CREDS, "bot_token": "xoxb-wrong"}, {}, "")
    assert (wrong.status, wrong.reason) == ("error", "Slack refused the bot token: invalid_auth")
    no_token = await platform.connect({"signing_secret": SIGNING_SECRET}, {}, "")
    assert (no_token.status, no_token.reason) == ("error", "the bot token is missing")
    no_secret = await platform.connect({"bot_token": BOT_TOKEN}, {}, "")
    assert (no_secret.status, no_secret.reason) == ("error", "the signing secret is missing")
    served[0].throttle(5)
    served[0]._throttle.clear()
    down = SlackPlatform(OPEN, _closed_port())
    try:
        unreachable = await down.connect(CREDS, {}, "")
    finally:
        await down.aclose()
    assert (unreachable.status, unreachable.reason) == ("error", "could not reach 127.0.0.1")


async def test_disconnect_calls_nothing(
    served: tuple[FakeSlack, str], platform: SlackPlatform
) -> None:
    calls = len(served[0].calls)
    await platform.disconnect(CREDS, CONFIG)
    assert len(served[0].calls) == calls


def _closed_port() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


# --- send -------------------------------------------------------------------------------


async def test_send_posts_json_with_the_bearer_token_in_the_thread(
    served: tuple[FakeSlack, str], platform: SlackPlatform
) -> None:
    fake, _ = served
    sent = await platform.send(
        CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="*Sencha*", reply_to="1732744800.000100")
    )
    assert fake.posted[-1]["text"] == "*Sencha*"
    assert fake.posted[-1]["thread_ts"] == "1732744800.000100"
    assert sent.message_id == fake.posted[-1]["ts"]
    assert fake.calls[-1] == (
        "chat.postMessage",
        {
            "channel": "C0GENERAL1",
            "text": "*Sencha*",
            "mrkdwn": True,
            "thread_ts": "1732744800.000100",
        },
    )
    await platform.send(CREDS, CONFIG, Outgoing(chat_id="D0DIRECT01", text="hi"))
    assert "thread_ts" not in fake.calls[-1][1]


async def test_a_429_is_platform_busy_after_retry_after(
    served: tuple[FakeSlack, str], platform: SlackPlatform
) -> None:
    served[0].throttle(30)
    with pytest.raises(PlatformBusy) as caught:
        await platform.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
    assert caught.value.retry_after_s == 30.0
    assert str(caught.value) == "Slack answered 429"
    served[0].fail_next("ratelimited")
    with pytest.raises(PlatformBusy) as caught:
        await platform.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
    assert caught.value.retry_after_s == 1.0
    assert str(caught.value) == "Slack answered ratelimited"


@pytest.mark.parametrize("raw", ["", "soon", "0", "-3"])
def test_a_retry_after_that_is_no_delay_is_a_second(raw: str) -> None:
    assert _retry_after(httpx.Response(429, headers={"retry-after": raw})) == 1.0
    assert _retry_after(httpx.Response(429, headers={"retry-after": "2.5"})) == 2.5
    assert _retry_after(httpx.Response(429, headers={"retry-after": "0.5"})) == 0.5
    assert _retry_after(httpx.Response(429)) == 1.0


@pytest.mark.parametrize(
    ("chat", "token", "error"),
    [
        ("C0MISSING1", BOT_TOKEN, "channel_not_found"),
        ("C0NOTJOIN1", BOT_TOKEN, "not_in_channel"),
        ("C0GENERAL1", "xoxb-wrong", "invalid_auth"),
    ],
)
async def test_refusals_that_cannot_change_are_permanent(
    platform: SlackPlatform, chat: str, token: str, error: str
) -> None:
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send({"bot_token": token}, CONFIG, Outgoing(chat_id=chat, text="hi"))
    assert caught.value.permanent
    assert str(caught.value) == f"Slack refused the message: {error}"


async def test_too_long_a_message_is_refused_for_good(platform: SlackPlatform) -> None:
    with pytest.raises(DeliveryFailed, match="msg_too_long") as caught:
        await platform.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="x" * 40_001))
    assert caught.value.permanent


@pytest.mark.parametrize(
    "error", ["internal_error", "fatal_error", "service_unavailable", "request_timeout"]
)
async def test_slack_s_own_troubles_may_pass_later(
    served: tuple[FakeSlack, str], platform: SlackPlatform, error: str
) -> None:
    served[0].fail_next(error)
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
    assert caught.value.permanent is False


async def test_an_empty_error_code_is_permanent(
    served: tuple[FakeSlack, str], platform: SlackPlatform
) -> None:
    served[0].fail_next("")
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
    assert caught.value.permanent
    assert str(caught.value) == "Slack refused the message: no error code"


async def test_no_network_or_a_non_json_answer() -> None:
    down = SlackPlatform(OPEN, _closed_port())
    try:
        with pytest.raises(DeliveryFailed) as caught:
            await down.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
    finally:
        await down.aclose()
    assert caught.value.permanent is False
    assert str(caught.value) == "could not reach 127.0.0.1"
    with serve(FakeSite()) as url:  # 404 in plain text
        odd = SlackPlatform(OPEN, url)
        try:
            with pytest.raises(DeliveryFailed) as caught:
                await odd.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
        finally:
            await odd.aclose()
    assert caught.value.permanent  # a 4xx: the URL is wrong
    assert str(caught.value) == "Slack answered 404"


@pytest.mark.parametrize(
    ("status", "body", "permanent"),
    [
        (200, b"<html>maintenance</html>", False),
        (503, b"{}", False),
        (500, b"{}", False),
        (400, b"{}", True),
        (499, b"{}", True),
    ],
)
async def test_an_answer_that_is_not_slack_s(status: int, body: bytes, permanent: bool) -> None:
    async def odd(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})

    with serve(odd) as url:
        platform = SlackPlatform(OPEN, url)
        try:
            with pytest.raises(DeliveryFailed) as caught:
                await platform.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
        finally:
            await platform.aclose()
    assert caught.value.permanent is permanent
    assert str(caught.value) == f"Slack answered {status}"


async def test_no_token_is_a_permanent_failure(platform: SlackPlatform) -> None:
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send({}, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
    assert caught.value.permanent
    assert str(caught.value) == "the channel has no bot token"


async def test_every_call_goes_through_the_outbound_guard(served: tuple[FakeSlack, str]) -> None:
    fake, url = served
    calls = len(fake.calls)
    guarded = SlackPlatform(OutboundGuard(allow_private_network=False), url)
    try:
        connected = await guarded.connect(CREDS, {}, "")
        assert "refused by the outbound guard" in (connected.reason or "")
        with pytest.raises(DeliveryFailed, match="refused by the outbound guard") as caught:
            await guarded.send(CREDS, CONFIG, Outgoing(chat_id="C0GENERAL1", text="hi"))
        assert BOT_TOKEN not in str(caught.value)
    finally:
        await guarded.aclose()
    assert len(fake.calls) == calls


async def test_the_fake_is_as_strict_as_slack(served: tuple[FakeSlack, str]) -> None:
    _, url = served
    async with httpx.AsyncClient(trust_env=False) as client:
        json_token = await client.post(f"{url}/auth.test", json={"token": BOT_TOKEN})
        form = await client.post(
            f"{url}/chat.postMessage",
            data={"token": BOT_TOKEN, "channel": "C0GENERAL1", "text": "hi"},
        )
        unknown = await client.post(
            f"{url}/chat.delete", headers={"authorization": f"Bearer {BOT_TOKEN}"}
        )
        bad = await client.post(
            f"{url}/auth.test", content=b"{", headers={"content-type": "application/json"}
        )
        empty = await client.post(
            f"{url}/chat.postMessage",
            json={"channel": "C0GENERAL1"},
            headers={"authorization": f"Bearer {BOT_TOKEN}"},
        )
    assert json_token.json() == {"ok": False, "error": "not_authed"}  # JSON wants the header
    assert form.json()["ok"] is True
    assert unknown.json() == {"ok": False, "error": "unknown_method"}
    assert bad.json() == {"ok": False, "error": "invalid_arguments"}
    assert empty.json() == {"ok": False, "error": "no_text"}


# --- render -----------------------------------------------------------------------------


def test_render_writes_mrkdwn() -> None:
    markdown = (
        "# Green tea\n\nUse **70-80 °C** water, *not* boiling: ~~100~~ is too hot & bitter "
        "<really>.\n\n- See [the guide](https://tea.example/a?b=1&c=|2) or <https://tea.example>\n\n"
        "> Patience is a tea.\n> Truly.\n\n```python\nif t < 80:\n    brew()\n```"
    )
    assert READER.render(markdown) == (
        "*Green tea*\n\nUse *70-80 °C* water, _not_ boiling: ~100~ is too hot &amp; bitter "
        "&lt;really&gt;.\n\n• See <https://tea.example/a?b=1&amp;c=%7C2|the guide> or "
        "<https://tea.example|https://tea.example>\n\n> Patience is a tea.\n> Truly.\n\n"
        "```\nif t &lt; 80:\n    brew()\n```",
    )
    assert READER.render("use `a_b` and _it_") == ("use `a_b` and _it_",)


def test_a_long_reply_is_split_within_four_thousand_with_marks_reopened() -> None:
    parts = READER.render("**" + "word " * 1500 + "end**")
    assert len(parts) == 2
    assert all(len(p) <= 4000 for p in parts)
    assert all(p.startswith("*") and p.endswith("*") for p in parts)


TOKENS = st.sampled_from(
    [
        "tea",
        "green",
        "🍵",
        "&",
        "<",
        ">",
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
        "\\*",
        "snake_case",
    ]
)
MARKDOWN = st.lists(TOKENS, max_size=120).map("".join)


def _words(text: str) -> str:
    """The text of mrkdwn without its markers, escapes read, whitespace squeezed."""
    text = re.sub(r"[*_~`>\s]", "", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


@given(MARKDOWN, st.integers(min_value=30, max_value=200))
def test_every_part_is_within_the_limit_and_no_text_is_lost(markdown: str, limit: int) -> None:
    runs = parse(markdown)
    parts = pack(runs, slack_mrkdwn(limit))
    whole = pack(runs, slack_mrkdwn(1_000_000))
    assert all(len(p) <= limit for p in parts)
    assert all(p.strip() for p in parts)
    assert _words("".join(parts)) == _words("".join(whole))
    assert not any(re.search(r"&(?!amp;|lt;|gt;)|<(?!https)", p) for p in parts)


# --- settings ---------------------------------------------------------------------------


def test_the_platforms_base_urls_are_settings() -> None:
    defaults = Settings.from_env({"AGENTSVC_STORAGE": "memory"})
    assert (defaults.telegram_api_url, defaults.slack_api_url) == (
        "https://api.telegram.org",
        "https://slack.com/api",
    )
    local = Settings.from_env(
        {
            "AGENTSVC_STORAGE": "memory",
            "AGENTSVC_TELEGRAM_API_URL": "http://127.0.0.1:8081/",
            "AGENTSVC_SLACK_API_URL": "http://127.0.0.1:8082/api",
        }
    )
    assert (local.telegram_api_url, local.slack_api_url) == (
        "http://127.0.0.1:8081",
        "http://127.0.0.1:8082/api",
    )
    with pytest.raises(SettingsError, match="AGENTSVC_SLACK_API_URL must be an http"):
        Settings.from_env({"AGENTSVC_STORAGE": "memory", "AGENTSVC_SLACK_API_URL": "slack.com"})
