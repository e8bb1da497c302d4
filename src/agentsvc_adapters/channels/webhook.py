"""The generic ``webhook`` channel: any system that can sign an HTTP request talks
to an agent through it (docs/channels.md#the-generic-webhook-channel).

Inbound: ``POST /api/channels/{channelId}/webhook`` with a JSON body
``{eventId, chatId, senderId, senderName?, senderUsername?, text, isGroup?,
mentioned?, replyTo?}``, signed with the ``X-Service-*`` headers exactly as the
service signs its own outbound calls (``agentsvc_adapters.signing``), keyed with
the channel's signing secret (made by the service, shown once when the channel is
created): ``X-Service-Signature`` is the hex HMAC-SHA256 of
``"{timestamp}.{nonce}.{raw body}"``; the timestamp (Unix seconds) must be within
five minutes of the service's clock. A wrong or missing signature, or a stale
timestamp, is 401; a body that is not such an object is 400.

Outbound: each part of a reply is a signed POST (same headers, same secret) of
``{channelId, chatId, text, replyTo}`` to the channel's
``config.target_url``, through the outbound guard. 2xx is delivered; 429 is
``PlatformBusy`` with its ``Retry-After``; 408 and 5xx, and a connection that
fails, may pass later (``DeliveryFailed``, not permanent); any other status, and a
refusal of the outbound guard, is permanent. Markdown passes through as it is;
a reply longer than ``PART_LIMIT`` characters is split, at a line break or a
space where one is in the part's second half.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import httpx
import msgspec

from agentsvc_adapters.outbound import OutboundGuard, failure, refusal_of
from agentsvc_adapters.signing import sign, signed_headers
from agentsvc_core.entities.channel import ChannelType
from agentsvc_core.ports.channel_platforms import (
    ChannelPlatform,
    Connected,
    DeliveryFailed,
    Inbound,
    InboundAnswer,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    Outgoing,
    PlatformBusy,
    Sent,
)

__all__ = ["MAX_SKEW_S", "PART_LIMIT", "WebhookPlatform", "split_text"]

log = logging.getLogger("agentsvc.channels")

PART_LIMIT = 4000  # characters per delivered part
MAX_SKEW_S = 300  # a signature's timestamp may be this far from now, either way
SECRET = "signing_secret"  # noqa: S105 - the credential's name, not a secret
TIMEOUT_S = 10.0


class _Body(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    event_id: str
    chat_id: str
    sender_id: str
    text: str
    sender_name: str | None = None
    sender_username: str | None = None
    is_group: bool = False
    mentioned: bool = False
    reply_to: str | None = None


_body = msgspec.json.Decoder(_Body)


def split_text(text: str, limit: int = PART_LIMIT) -> tuple[str, ...]:
    """``text`` in parts of at most ``limit`` characters, cut at the last line
    break or space when it is in the part's second half (else at the limit)."""
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = max(window.rfind("\n"), window.rfind(" "))
        if cut < limit // 2:
            cut = limit
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest or not parts:
        parts.append(rest)
    return tuple(parts)


def _verified(request: InboundRequest, secret: str, now: datetime) -> str | None:
    """Why the request is not signed with ``secret`` (None: it is)."""
    timestamp = request.headers.get("x-service-timestamp")
    nonce = request.headers.get("x-service-nonce")
    given = request.headers.get("x-service-signature")
    if not (timestamp and nonce and given):
        return "missing X-Service-Timestamp, X-Service-Nonce or X-Service-Signature"
    try:
        at = int(timestamp)
    except ValueError:
        return "X-Service-Timestamp is not Unix seconds"
    if abs(now.timestamp() - at) > MAX_SKEW_S:
        return "X-Service-Timestamp is more than five minutes from now"
    expected = sign(secret, timestamp, nonce, request.body)
    if not any(hmac.compare_digest(expected, s) for s in given.split()):
        return "the signature does not match"
    return None


def _retry_after(value: str | None, now: datetime) -> float:
    if not value:
        return 1.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - now).total_seconds())
    except (TypeError, ValueError):
        return 1.0


class WebhookPlatform(ChannelPlatform):
    type: ChannelType = "webhook"
    credential_fields: tuple[str, ...] = ()  # its signing secret is the service's to make
    config_fields: tuple[str, ...] = ("target_url",)

    def __init__(self, guard: OutboundGuard) -> None:
        self._guard = guard
        self._http = guard.http_client(timeout=TIMEOUT_S)

    async def aclose(self) -> None:
        await self._http.aclose()

    def read_inbound(
        self,
        request: InboundRequest,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        now: datetime,
    ) -> Inbound | InboundAnswer | InboundRefused:
        if request.method != "POST":
            return InboundRefused(status=405, detail="the generic channel takes POST only")
        secret = credentials.get(SECRET)
        if not secret:
            return InboundRefused(status=401, detail="the channel has no signing secret")
        why = _verified(request, secret, now)
        if why is not None:
            return InboundRefused(status=401, detail=why)
        try:
            body = _body.decode(request.body)
        except msgspec.ValidationError as exc:
            return InboundRefused(status=400, detail=f"the body is not a message: {exc}")
        except msgspec.DecodeError:
            return InboundRefused(status=400, detail="the body is not JSON")
        if not (body.event_id and body.chat_id and body.sender_id):
            return InboundRefused(status=400, detail="eventId, chatId and senderId must be set")
        message = InboundMessage(
            event_id=body.event_id,
            chat_id=body.chat_id,
            sender_id=body.sender_id,
            sender_name=body.sender_name,
            sender_username=body.sender_username,
            text=body.text,
            is_group=body.is_group,
            mentioned=body.mentioned,
            reply_to=body.reply_to,
        )
        return Inbound(messages=(message,), ack=b'{"ok":true}', ack_content_type="application/json")

    async def connect(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        inbound_url: str,
    ) -> Connected:
        """Checks ``target_url`` with the outbound guard (nothing is called); keeps
        the channel's id (from its inbound URL) for the outbound body."""
        target = str(config.get("target_url"))
        channel_id = inbound_url.rsplit("/", 2)[-2]  # .../api/channels/{id}/webhook
        if urlsplit(target).scheme not in ("http", "https"):
            return Connected(status="error", reason="target_url must be an http(s) URL")
        why = self._guard.refusal(target)
        if why:
            return Connected(status="error", reason=f"target_url is refused: {why}")
        return Connected(status="connected", config={"channel_id": channel_id})

    async def disconnect(
        self, credentials: Mapping[str, str], config: Mapping[str, str | int | bool]
    ) -> None:
        """Nothing to undo: the receiver holds no registration."""

    def render(self, markdown: str) -> tuple[str, ...]:
        return split_text(markdown)

    async def send(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        message: Outgoing,
    ) -> Sent:
        target = str(config.get("target_url"))
        secret = credentials.get(SECRET)
        if not secret:
            raise DeliveryFailed("the channel has no signing secret", permanent=True)
        # the guard's early word; it checks the address it connects to as well
        why = self._guard.refusal(target)
        if why:
            raise DeliveryFailed(f"target_url is refused: {why}", permanent=True)
        body = msgspec.json.encode(
            {
                "channelId": config.get("channel_id"),
                "chatId": message.chat_id,
                "text": message.text,
                "replyTo": message.reply_to,
            }
        )
        headers = {
            "Content-Type": "application/json",
            **signed_headers([secret], body),
        }
        try:
            resp = await self._http.post(target, content=body, headers=headers)
        except httpx.HTTPError as exc:
            refused = refusal_of(exc)
            if refused is not None:
                raise DeliveryFailed(f"target_url is refused: {refused}", permanent=True) from None
            raise DeliveryFailed(failure(exc, target), permanent=False) from None
        return self._outcome(resp)

    @staticmethod
    def _outcome(resp: httpx.Response) -> Sent:
        status = resp.status_code
        if 200 <= status < 300:
            return Sent(message_id=resp.headers.get("x-message-id"))
        if status == 429:
            wait = _retry_after(resp.headers.get("retry-after"), datetime.now(UTC))
            raise PlatformBusy("the receiver asked to slow down (429)", wait)
        transient = status == 408 or status >= 500
        raise DeliveryFailed(f"the receiver answered {status}", permanent=not transient)
