"""The generic webhook channel's adapter (agentsvc_adapters/channels/webhook.py):
inbound requests signed with ``X-Service-*`` under the channel's secret within five
minutes (either way), the body's shape, the split of long replies, and the
outbound call's outcomes against a receiver on loopback (2xx, 429 with
Retry-After, transient and permanent refusals, the outbound guard)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentsvc_adapters.channels.registry import channel_platforms
from agentsvc_adapters.channels.webhook import (
    MAX_SKEW_S,
    PART_LIMIT,
    WebhookPlatform,
    _retry_after,
    split_text,
)
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.signing import sign
from agentsvc_core.entities.channel import CHANNEL_TYPES
from agentsvc_core.ports.channel_platforms import (
    DeliveryFailed,
    Inbound,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    Outgoing,
    PlatformBusy,
)
from tests.e2e.receivers import read_request
from tests.web.live import serve

SECRET = "chs_test_secret"
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CREDS = {"signing_secret": SECRET}


def request(
    body: bytes,
    *,
    secret: str = SECRET,
    at: datetime = NOW,
    method: str = "POST",
    drop: str | None = None,
    signature: str | None = None,
) -> InboundRequest:
    ts, nonce = str(int(at.timestamp())), str(uuid.uuid4())
    headers = {
        "x-service-timestamp": ts,
        "x-service-nonce": nonce,
        "x-service-signature": signature or sign(secret, ts, nonce, body),
    }
    if drop:
        del headers[drop]
    return InboundRequest(method=method, headers=headers, query={}, body=body)  # type: ignore[arg-type]


def body(**over: Any) -> bytes:
    return json.dumps(
        {"eventId": "e1", "chatId": "c1", "senderId": "u1", "text": "hi", **over}
    ).encode()


@pytest.fixture
def platform() -> WebhookPlatform:
    return WebhookPlatform(OutboundGuard(allow_private_network=True))


def test_a_signed_message_is_read(platform: WebhookPlatform) -> None:
    raw = body(senderName="Ann", senderUsername="ann", isGroup=True, mentioned=True, replyTo="r")
    read = platform.read_inbound(request(raw), CREDS, {}, NOW)
    assert read == Inbound(
        messages=(
            InboundMessage(
                event_id="e1",
                chat_id="c1",
                sender_id="u1",
                sender_name="Ann",
                sender_username="ann",
                text="hi",
                is_group=True,
                mentioned=True,
                reply_to="r",
            ),
        ),
        ack=b'{"ok":true}',
        ack_content_type="application/json",
    )


def test_defaults_of_the_optional_fields(platform: WebhookPlatform) -> None:
    read = platform.read_inbound(request(body()), CREDS, {}, NOW)
    assert isinstance(read, Inbound)
    (m,) = read.messages
    assert (m.is_group, m.mentioned, m.reply_to, m.sender_name) == (False, False, None, None)


@pytest.mark.parametrize("skew", [MAX_SKEW_S, -MAX_SKEW_S])
def test_the_timestamp_may_be_five_minutes_off(platform: WebhookPlatform, skew: int) -> None:
    at = NOW + timedelta(seconds=skew)
    assert isinstance(platform.read_inbound(request(body(), at=at), CREDS, {}, NOW), Inbound)


@pytest.mark.parametrize("skew", [MAX_SKEW_S + 1, -MAX_SKEW_S - 1])
def test_a_timestamp_further_off_is_refused(platform: WebhookPlatform, skew: int) -> None:
    at = NOW + timedelta(seconds=skew)
    read = platform.read_inbound(request(body(), at=at), CREDS, {}, NOW)
    assert read == InboundRefused(
        status=401, detail="X-Service-Timestamp is more than five minutes from now"
    )


@pytest.mark.parametrize(
    ("kw", "detail"),
    [
        ({"secret": "chs_other"}, "the signature does not match"),
        (
            {"drop": "x-service-signature"},
            "missing X-Service-Timestamp, X-Service-Nonce or X-Service-Signature",
        ),
        (
            {"drop": "x-service-nonce"},
            "missing X-Service-Timestamp, X-Service-Nonce or X-Service-Signature",
        ),
        (
            {"drop": "x-service-timestamp"},
            "missing X-Service-Timestamp, X-Service-Nonce or X-Service-Signature",
        ),
    ],
)
def test_a_wrong_or_missing_proof_is_401(
    platform: WebhookPlatform, kw: dict[str, Any], detail: str
) -> None:
    read = platform.read_inbound(request(body(), **kw), CREDS, {}, NOW)
    assert read == InboundRefused(status=401, detail=detail)


def test_a_timestamp_that_is_not_seconds_is_refused(platform: WebhookPlatform) -> None:
    req = request(body())
    headers = {**req.headers, "x-service-timestamp": "soon"}
    read = platform.read_inbound(
        InboundRequest(method="POST", headers=headers, query={}, body=req.body), CREDS, {}, NOW
    )
    assert read == InboundRefused(status=401, detail="X-Service-Timestamp is not Unix seconds")


def test_any_of_several_signatures_may_match(platform: WebhookPlatform) -> None:
    raw = body()
    good = request(raw)
    both = f"{'0' * 64} {good.headers['x-service-signature']}"
    headers = {**good.headers, "x-service-signature": both}
    read = platform.read_inbound(
        InboundRequest(method="POST", headers=headers, query={}, body=raw), CREDS, {}, NOW
    )
    assert isinstance(read, Inbound)


def test_without_a_secret_nothing_is_accepted(platform: WebhookPlatform) -> None:
    read = platform.read_inbound(request(body(), secret=""), {}, {}, NOW)
    assert read == InboundRefused(status=401, detail="the channel has no signing secret")


def test_get_is_405(platform: WebhookPlatform) -> None:
    read = platform.read_inbound(request(b"", method="GET"), CREDS, {}, NOW)
    assert isinstance(read, InboundRefused)
    assert read.status == 405


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"eventId": "e1"}',
        body(eventId=""),
        body(chatId=""),
        body(senderId=""),
    ],
)
def test_a_body_that_is_not_a_message_is_400(platform: WebhookPlatform, raw: bytes) -> None:
    read = platform.read_inbound(request(raw), CREDS, {}, NOW)
    assert isinstance(read, InboundRefused)
    assert read.status == 400


def test_split_text() -> None:
    assert split_text("") == ("",)
    assert split_text("a" * PART_LIMIT) == ("a" * PART_LIMIT,)
    assert split_text("a" * (PART_LIMIT + 1)) == ("a" * PART_LIMIT, "a")
    words = "word " * 10
    assert split_text(words.strip(), 12) == (
        "word word",
        "word word",
        "word word",
        "word word",
        "word word",
    )
    assert split_text("para one\n\npara two", 12) == ("para one", "para two")
    # no break in the part's second half: cut at the limit
    assert split_text("a " + "b" * 20, 10) == ("a bbbbbbbb", "bbbbbbbbbb", "bb")
    assert split_text("**bold** _it_", 100) == ("**bold** _it_",)  # Markdown as it is


def test_retry_after() -> None:
    assert _retry_after(None, NOW) == 1.0
    assert _retry_after("", NOW) == 1.0
    assert _retry_after("7", NOW) == 7.0
    assert _retry_after("-3", NOW) == 0.0
    assert _retry_after("Sun, 01 Nov 2026 12:00:30 GMT", NOW) == 30.0
    assert _retry_after("whenever", NOW) == 1.0


async def test_connect_checks_the_target(platform: WebhookPlatform) -> None:
    inbound = "https://svc.example/api/channels/abc-123/webhook"
    ok = await platform.connect({}, {"target_url": "https://hooks.example.com/in"}, inbound)
    assert (ok.status, ok.reason, dict(ok.config)) == ("connected", None, {"channel_id": "abc-123"})
    bad = await platform.connect({}, {"target_url": "ftp://x.example"}, inbound)
    assert (bad.status, bad.reason) == ("error", "target_url must be an http(s) URL")
    strict = WebhookPlatform(OutboundGuard(allow_private_network=False))
    refused = await strict.connect({}, {"target_url": "http://127.0.0.1:9/in"}, inbound)
    assert refused.status == "error"
    assert (refused.reason or "").startswith("target_url is refused:")
    await platform.disconnect({}, {})  # nothing to undo
    await strict.aclose()


def test_the_registry_has_every_channel_type() -> None:
    made = channel_platforms(OutboundGuard(allow_private_network=False), env={})
    assert set(made.by_type) == set(CHANNEL_TYPES)
    assert made.by_type["webhook"].config_fields == ("target_url",)


class Target:
    """The receiver of replies: answers each call with the next of ``answers``."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, str], bytes]] = []
        self.answers: list[tuple[int, dict[str, str]]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw, headers = await read_request(scope, receive)
        self.calls.append((headers, raw))
        status, extra = self.answers.pop(0) if self.answers else (200, {})
        head = [(k.encode(), v.encode()) for k, v in extra.items()]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture
def target() -> Iterator[tuple[Target, str]]:
    t = Target()
    with serve(t) as url:
        yield t, url


async def test_a_reply_is_a_signed_post(
    platform: WebhookPlatform, target: tuple[Target, str]
) -> None:
    t, url = target
    t.answers = [(200, {"x-message-id": "m-7"})]
    config = {"target_url": f"{url}/replies", "channel_id": "ch-1"}
    sent = await platform.send(CREDS, config, Outgoing(chat_id="c1", text="hello", reply_to="r1"))
    assert sent.message_id == "m-7"
    ((headers, raw),) = t.calls
    assert json.loads(raw) == {
        "channelId": "ch-1",
        "chatId": "c1",
        "text": "hello",
        "replyTo": "r1",
    }
    expected = sign(SECRET, headers["x-service-timestamp"], headers["x-service-nonce"], raw)
    assert headers["x-service-signature"] == expected
    assert headers["content-type"] == "application/json"
    await platform.aclose()


@pytest.mark.parametrize(
    ("status", "permanent"),
    [(400, True), (401, True), (404, True), (408, False), (500, False), (503, False)],
)
async def test_a_refusal_is_a_failed_delivery(
    platform: WebhookPlatform, target: tuple[Target, str], status: int, permanent: bool
) -> None:
    t, url = target
    t.answers = [(status, {})]
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send(CREDS, {"target_url": url}, Outgoing(chat_id="c", text="x"))
    assert caught.value.permanent is permanent
    assert caught.value.detail == f"the receiver answered {status}"
    await platform.aclose()


async def test_429_is_busy_with_its_wait(
    platform: WebhookPlatform, target: tuple[Target, str]
) -> None:
    t, url = target
    t.answers = [(429, {"retry-after": "12"})]
    with pytest.raises(PlatformBusy) as caught:
        await platform.send(CREDS, {"target_url": url}, Outgoing(chat_id="c", text="x"))
    assert caught.value.retry_after_s == 12.0
    await platform.aclose()


async def test_an_unreachable_or_refused_target() -> None:
    loose = WebhookPlatform(OutboundGuard(allow_private_network=True))
    with pytest.raises(DeliveryFailed) as caught:
        await loose.send(
            CREDS, {"target_url": "http://127.0.0.1:9/x"}, Outgoing(chat_id="c", text="x")
        )
    assert not caught.value.permanent
    strict = WebhookPlatform(OutboundGuard(allow_private_network=False))
    with pytest.raises(DeliveryFailed) as refused:
        await strict.send(
            CREDS, {"target_url": "http://127.0.0.1:9/x"}, Outgoing(chat_id="c", text="x")
        )
    assert refused.value.permanent
    await loose.aclose()
    await strict.aclose()


# --- at the edges ---------------------------------------------------------------------


def test_split_text_at_its_edges() -> None:
    # exactly the limit, spaces and all: one part
    assert split_text("aaaa bbbb", 9) == ("aaaa bbbb",)
    # the last break wins, whichever kind
    assert split_text("aa\nbb\ncc dd", 9) == ("aa\nbb\ncc", "dd")
    assert split_text("aa bb\ncc dd", 9) == ("aa bb\ncc", "dd")
    # a break at exactly half the limit still counts; just before it does not
    assert split_text("aaaaa bbbbbbbbbb", 10) == ("aaaaa", "bbbbbbbbbb")
    assert split_text("aaaaa bbbbbbbbbb", 11) == ("aaaaa", "bbbbbbbbbb")
    assert split_text("aaaa bbbbbbbbbb", 10) == ("aaaa bbbbb", "bbbbb")


def test_retry_after_in_the_past_is_now() -> None:
    assert _retry_after("Sun, 01 Nov 2026 11:00:00 GMT", NOW) == 0.0


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b"not json", "the body is not JSON"),
        (body(eventId=""), "eventId, chatId and senderId must be set"),
    ],
)
def test_the_refusals_say_why(platform: WebhookPlatform, raw: bytes, detail: str) -> None:
    assert platform.read_inbound(request(raw), CREDS, {}, NOW) == InboundRefused(
        status=400, detail=detail
    )


def test_the_shape_refusal_says_what_is_wrong(platform: WebhookPlatform) -> None:
    read = platform.read_inbound(request(b'{"eventId": "e1"}'), CREDS, {}, NOW)
    assert isinstance(read, InboundRefused)
    assert read.detail.startswith("the body is not a message: ")
    get = platform.read_inbound(request(b"", method="GET"), CREDS, {}, NOW)
    assert get == InboundRefused(status=405, detail="the generic channel takes POST only")


def test_render_is_the_split(platform: WebhookPlatform) -> None:
    assert platform.render("a" * (PART_LIMIT + 2)) == ("a" * PART_LIMIT, "aa")


async def test_a_channel_without_a_secret_sends_nothing(platform: WebhookPlatform) -> None:
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send(
            {}, {"target_url": "http://127.0.0.1:9/x"}, Outgoing(chat_id="c", text="x")
        )
    assert (caught.value.detail, caught.value.permanent) == (
        "the channel has no signing secret",
        True,
    )
    await platform.aclose()


async def test_300_is_a_refusal(platform: WebhookPlatform, target: tuple[Target, str]) -> None:
    t, url = target
    t.answers = [(300, {})]
    with pytest.raises(DeliveryFailed) as caught:
        await platform.send(CREDS, {"target_url": url}, Outgoing(chat_id="c", text="x"))
    assert caught.value.permanent
    await platform.aclose()


async def test_429_with_a_date_and_its_wording(
    platform: WebhookPlatform, target: tuple[Target, str]
) -> None:
    t, url = target
    later = datetime.now(UTC) + timedelta(hours=2)
    t.answers = [(429, {"retry-after": later.strftime("%a, %d %b %Y %H:%M:%S GMT")})]
    with pytest.raises(PlatformBusy) as caught:
        await platform.send(CREDS, {"target_url": url}, Outgoing(chat_id="c", text="x"))
    assert 7000 < caught.value.retry_after_s <= 7200
    assert caught.value.detail == "the receiver asked to slow down (429)"
    await platform.aclose()


async def test_the_failures_say_why() -> None:
    loose = WebhookPlatform(OutboundGuard(allow_private_network=True))
    with pytest.raises(DeliveryFailed) as caught:
        await loose.send(
            CREDS, {"target_url": "http://127.0.0.1:9/x"}, Outgoing(chat_id="c", text="x")
        )
    assert isinstance(caught.value.detail, str)
    assert caught.value.detail
    assert caught.value.permanent is False
    strict = WebhookPlatform(OutboundGuard(allow_private_network=False))
    with pytest.raises(DeliveryFailed) as refused:
        await strict.send(
            CREDS, {"target_url": "http://127.0.0.1:9/x"}, Outgoing(chat_id="c", text="x")
        )
    assert refused.value.detail.startswith("target_url is refused: ")
    assert refused.value.permanent is True
    await loose.aclose()
    await strict.aclose()
