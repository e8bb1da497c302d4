"""WhatsApp Business Cloud API (Meta's Graph API), channel type ``whatsapp_cloud``.

Credentials: ``access_token`` (a system user's permanent token), ``app_secret``
(the Meta app's, for the webhook signatures) and ``verify_token`` (any string the
user makes up and pastes in Meta's console too); config: ``phone_number_id``.

- Inbound: Meta verifies the webhook once with ``GET ?hub.mode=subscribe&
  hub.verify_token=...&hub.challenge=...``, answered with the challenge as
  ``text/plain`` when the token matches (compared in constant time; 403
  otherwise). Every ``POST`` carries ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256
  of the raw body keyed with the app secret>`` (401 when missing or wrong). Its
  ``entry[].changes[].value`` holds ``messages`` (text ones are read: ``id`` the
  wamid, the event id; ``from`` the sender and the chat; the display name from
  ``contacts[].profile.name``), and ``statuses`` (delivery receipts, ignored).
  A change for another ``phone_number_id`` than the channel's is ignored (one app
  may serve several numbers). The Cloud API has no group chats here.
- Status: ``connect`` checks the token and the number with ``GET
  /{version}/{phone_number_id}?fields=display_phone_number,verified_name`` and
  keeps both in config; the channel stays ``pending`` (the URL and verify token
  are pasted in Meta's console by hand) until the first verified ``POST``, which
  says ``connected`` once (``config.webhook_verified``).
- Send: ``POST /{version}/{phone_number_id}/messages`` with a text message and
  the Bearer token. HTTP 429 and Meta's rate-limit codes (4, 80007, 130429,
  131056) are ``PlatformBusy``; a refused token (401, code 190), an undeliverable
  message (131026), a chat outside the 24-hour customer service window (131047)
  and other refusals of the request are permanent; a 5xx or an unreachable
  server may pass later.

Every call goes through the outbound guard's client; the token is sent only in
the ``Authorization`` header, never logged nor put in an error.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

from agentsvc_adapters.channels.whatsapp_format import render as render_parts
from agentsvc_adapters.outbound import OutboundGuard, failure
from agentsvc_core.ports.channel_platforms import (
    ChannelPlatform,
    Connected,
    DeliveryFailed,
    Inbound,
    InboundAnswer,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    InboundStatus,
    Outgoing,
    PlatformBusy,
    Sent,
)

__all__ = [
    "GRAPH_URL",
    "GRAPH_VERSION",
    "WhatsAppCloud",
    "whatsapp_cloud",
    "whatsapp_cloud_from_env",
]

log = logging.getLogger("agentsvc.channels")
GRAPH_URL = "https://graph.facebook.com"
GRAPH_VERSION = "v21.0"
_TIMEOUT_S = 15.0
_MAX_CHALLENGE = 256
# Meta's throttling codes: API calls (4), the phone number's throughput (80007,
# 130429), messages to one user (131056, about one every 6 s)
_BUSY_CODES = frozenset({4, 80007, 130429, 131056})
_PERMANENT_CODES = frozenset({190, 131026, 131047})
_PAIR_RETRY_S = 6.0
_BUSY_RETRY_S = 60.0

Config = Mapping[str, str | int | bool]


class _Profile(msgspec.Struct):
    name: str | None = None


class _Contact(msgspec.Struct):
    wa_id: str | None = None
    profile: _Profile | None = None


class _Text(msgspec.Struct):
    body: str


class _Message(msgspec.Struct):
    id: str
    type: str
    timestamp: str | None = None
    text: _Text | None = None
    # "from" is a Python keyword
    sender: str = msgspec.field(name="from", default="")


class _Metadata(msgspec.Struct):
    phone_number_id: str | None = None


class _Value(msgspec.Struct):
    metadata: _Metadata | None = None
    contacts: list[_Contact] = []
    messages: list[_Message] = []


class _Change(msgspec.Struct):
    value: _Value | None = None
    field: str | None = None


class _Entry(msgspec.Struct):
    changes: list[_Change] = []


class _Notification(msgspec.Struct):
    object: str
    entry: list[_Entry] = []


_decoder = msgspec.json.Decoder(_Notification)


def signature_ok(body: bytes, header: str | None, app_secret: str) -> bool:
    """``X-Hub-Signature-256`` is ``sha256=`` and the hex HMAC-SHA256 of the raw
    body keyed with the app secret (compared in constant time)."""
    if not header or not app_secret or not header.startswith("sha256="):
        return False
    expected = hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(header[len("sha256=") :].lower(), expected)


def _sent_at(timestamp: str | None) -> datetime | None:
    if timestamp is None or not timestamp.isdigit():
        return None
    return datetime.fromtimestamp(int(timestamp), UTC)


def _messages(notification: _Notification, phone_number_id: str) -> list[InboundMessage]:
    found: list[InboundMessage] = []
    for entry in notification.entry:
        for change in entry.changes:
            value = change.value
            if value is None or value.metadata is None:
                continue
            if value.metadata.phone_number_id != phone_number_id:
                continue  # another number of the same app
            names = {c.wa_id: c.profile.name for c in value.contacts if c.wa_id and c.profile}
            for message in value.messages:
                if message.type != "text" or message.text is None or not message.sender:
                    continue  # media, reactions, ...: not read here
                found.append(
                    InboundMessage(
                        event_id=message.id,
                        chat_id=message.sender,
                        sender_id=message.sender,
                        sender_name=names.get(message.sender),
                        text=message.text.body,
                        sent_at=_sent_at(message.timestamp),
                    )
                )
    return found


def _error(answer: Any) -> tuple[int | None, str]:
    """Meta's ``{"error": {"code", "message"}}``, as far as it is there."""
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return None, ""
    code = error.get("code")
    message = error.get("message")
    return (
        code if isinstance(code, int) else None,
        message[:200] if isinstance(message, str) else "",
    )


class WhatsAppCloud(ChannelPlatform):
    type = "whatsapp_cloud"
    credential_fields = ("access_token", "app_secret", "verify_token")
    config_fields = ("phone_number_id",)

    def __init__(
        self, guard: OutboundGuard, base_url: str = GRAPH_URL, version: str = GRAPH_VERSION
    ) -> None:
        self._base = f"{base_url.rstrip('/')}/{version.strip('/')}"
        self._http = guard.http_client(timeout=_TIMEOUT_S)

    async def aclose(self) -> None:
        await self._http.aclose()

    # inbound

    def read_inbound(
        self,
        request: InboundRequest,
        credentials: Mapping[str, str],
        config: Config,
        now: datetime,
    ) -> Inbound | InboundAnswer | InboundRefused:
        if request.method == "GET":
            return self._verification(request.query, credentials.get("verify_token", ""))
        if not signature_ok(
            request.body,
            request.headers.get("x-hub-signature-256"),
            credentials.get("app_secret", ""),
        ):
            return InboundRefused(status=401, detail="the X-Hub-Signature-256 signature is wrong")
        try:
            notification = _decoder.decode(request.body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return InboundRefused(status=400, detail="the body is not a webhook notification")
        messages = _messages(notification, str(config.get("phone_number_id", "")))
        status = None
        if config.get("webhook_verified") is not True:
            status = InboundStatus(status="connected", config={"webhook_verified": True})
        return Inbound(messages=tuple(messages), status=status)

    @staticmethod
    def _verification(
        query: Mapping[str, str], verify_token: str
    ) -> InboundAnswer | InboundRefused:
        token = query.get("hub.verify_token", "")
        challenge = query.get("hub.challenge", "")
        if (
            query.get("hub.mode") != "subscribe"
            or not verify_token
            or not hmac.compare_digest(token.encode(), verify_token.encode())
        ):
            return InboundRefused(status=403, detail="the verify token does not match")
        if not challenge or len(challenge) > _MAX_CHALLENGE:
            return InboundRefused(status=400, detail="hub.challenge is missing or too long")
        return InboundAnswer(status=200, body=challenge.encode(), content_type="text/plain")

    # connection

    async def connect(
        self, credentials: Mapping[str, str], config: Config, inbound_url: str
    ) -> Connected:
        missing = [f for f in self.credential_fields if not credentials.get(f)]
        if not config.get("phone_number_id"):
            missing.append("phone_number_id")
        if missing:
            return Connected(status="error", reason=f"missing: {', '.join(missing)}")
        number = str(config["phone_number_id"])
        url = f"{self._base}/{number}"
        try:
            status, answer, _ = await self._call(
                "GET",
                url,
                credentials["access_token"],
                params={"fields": "display_phone_number,verified_name"},
            )
        except (TimeoutError, httpx.HTTPError, httpx.InvalidURL) as exc:
            return Connected(status="error", reason=f"the Graph API: {failure(exc, url)}")
        if status != 200 or not isinstance(answer, dict):
            code, message = _error(answer)
            if status == 401 or code == 190:
                reason = "Meta refused the access token"
            else:
                reason = f"Meta did not find phone number {number}: {message or status}"
            return Connected(status="error", reason=reason)
        found = {
            k: answer[k]
            for k in ("display_phone_number", "verified_name")
            if isinstance(answer.get(k), str)
        }
        return Connected(
            status="pending",
            reason="waiting for Meta's first webhook: paste the inbound URL and the "
            "verify token in the app's WhatsApp configuration",
            config={**found, "webhook_verified": False},
        )

    async def disconnect(self, credentials: Mapping[str, str], config: Config) -> None:
        """Nothing to undo: the webhook is removed in Meta's console."""

    # outbound

    def render(self, markdown: str) -> tuple[str, ...]:
        return render_parts(markdown)

    async def send(self, credentials: Mapping[str, str], config: Config, message: Outgoing) -> Sent:
        url = f"{self._base}/{config.get('phone_number_id', '')}/messages"
        body = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": message.chat_id,
            "type": "text",
            "text": {"body": message.text, "preview_url": False},
        }
        try:
            status, answer, headers = await self._call(
                "POST", url, credentials.get("access_token", ""), json=body
            )
        except (TimeoutError, httpx.HTTPError, httpx.InvalidURL) as exc:
            why = failure(exc, url)
            raise DeliveryFailed(
                f"the Graph API: {why}", permanent=why.startswith("refused")
            ) from None
        if status == 200:
            sent = answer.get("messages") if isinstance(answer, dict) else None
            first = sent[0] if isinstance(sent, list) and sent else {}
            wamid = first.get("id") if isinstance(first, dict) else None
            return Sent(message_id=wamid if isinstance(wamid, str) else None)
        raise self._refusal(status, answer, headers)

    @staticmethod
    def _refusal(status: int, answer: Any, headers: httpx.Headers) -> PlatformBusy | DeliveryFailed:
        code, message = _error(answer)
        detail = f"the Graph API answered HTTP {status}" + (f" (code {code})" if code else "")
        log.warning("whatsapp cloud send: %s", detail)
        if status == 429 or code in _BUSY_CODES:
            retry = headers.get("retry-after", "")
            default = _PAIR_RETRY_S if code == 131056 else _BUSY_RETRY_S
            wait = float(retry) if retry.isdigit() else default
            return PlatformBusy(detail, retry_after_s=wait)
        if message:
            detail = f"{detail}: {message}"
        if status >= 500 or status == 408:
            return DeliveryFailed(detail, permanent=False)
        # a refused token (401, 190), undeliverable (131026), outside the 24-hour
        # window (131047), a malformed request (100): sending again cannot help
        return DeliveryFailed(detail, permanent=True)

    async def _call(
        self,
        method: str,
        url: str,
        token: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
    ) -> tuple[int, Any, httpx.Headers]:
        async with asyncio.timeout(_TIMEOUT_S):
            resp = await self._http.request(
                method,
                url,
                params=params,
                json=json,
                headers={"Authorization": f"Bearer {token}"},
            )
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        return resp.status_code, answer, resp.headers


def whatsapp_cloud(
    guard: OutboundGuard, base_url: str = GRAPH_URL, version: str = GRAPH_VERSION
) -> WhatsAppCloud:
    """The adapter for ``whatsapp_cloud`` (``AGENTSVC_WHATSAPP_CLOUD_API_URL`` and
    ``AGENTSVC_WHATSAPP_CLOUD_API_VERSION``)."""
    return WhatsAppCloud(guard, base_url, version)


def whatsapp_cloud_from_env(guard: OutboundGuard, env: Mapping[str, str]) -> WhatsAppCloud:
    """The adapter as the environment configures it (``agentsvc_web.settings``
    checks these variables at start-up)."""
    return WhatsAppCloud(
        guard,
        env.get("AGENTSVC_WHATSAPP_CLOUD_API_URL", "").strip() or GRAPH_URL,
        env.get("AGENTSVC_WHATSAPP_CLOUD_API_VERSION", "").strip() or GRAPH_VERSION,
    )
