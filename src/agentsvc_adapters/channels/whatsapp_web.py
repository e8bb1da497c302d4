"""WhatsApp Web paired by QR code, channel type ``whatsapp_web``, through a sidecar
that holds the WhatsApp Web session and speaks the part of Evolution API v2's HTTP
interface used here (so a real Evolution API serves as the sidecar):

- ``POST /instance/create`` ``{instanceName, integration: "WHATSAPP-BAILEYS",
  qrcode: true, webhook: {url, byEvents: false, base64: false, headers, events}}``
  (``POST /webhook/set/{instance}`` when the instance already exists);
- ``GET /instance/connectionState/{instance}`` -> ``{instance: {state}}``,
  ``open``, ``connecting`` or ``close``;
- ``GET /instance/connect/{instance}`` -> ``{pairingCode, code, count}``: ``code``
  is the text of the QR code, encoded here as a PNG (segno);
- ``POST /message/sendText/{instance}`` ``{number, text}``;
- ``DELETE /instance/logout/{instance}`` and ``DELETE /instance/delete/{instance}``;

each with the sidecar's key in the ``apikey`` header. Settings:
``AGENTSVC_WHATSAPP_WEB_URL`` and ``AGENTSVC_WHATSAPP_WEB_API_KEY`` (unset: the
type is not configured, 422 naming the variable).

One sidecar instance per channel, ``agentsvc-<channel id>``, kept in config.
The sidecar posts its events to the channel's inbound URL with a per-channel
secret in the ``X-Agentsvc-Secret`` header, set in the instance's webhook
``headers`` when it is created: ``connect`` makes the secret (or keeps the one the
channel has) and hands it back in ``Connected.credentials``, to be sealed with
the channel's credentials; an event without it is refused (401), compared in
constant time.

Events: ``MESSAGES_UPSERT`` (a message; ``key.id`` the event id, ``key.remoteJid``
the chat, ``@g.us`` a group whose sender is ``key.participant``; our own messages
(``fromMe``) and status broadcasts ignored; the text from ``conversation`` or
``extendedTextMessage.text``; mentioned when ``contextInfo.mentionedJid`` holds the
session's own number, the payload's ``sender``) and ``CONNECTION_UPDATE`` (``open``
connected, ``connecting``, ``close`` disconnected with the reason).

Pairing: ``pairing`` reads the connection state; when it is not open it asks the
sidecar for a QR code, answered as a PNG with its expiry. Baileys shows a first
QR for 60 s and each next one for 20 s (``count`` says which); an expired QR is
not a failure: the next call gets a fresh one.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import logging
import re
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgspec
import segno

from agentsvc_adapters.channels.whatsapp_format import render as render_parts
from agentsvc_adapters.channels.whatsapp_web_events import read_event
from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.outbound import OutboundGuard, failure
from agentsvc_core.ports.channel_platforms import (
    Connected,
    DeliveryFailed,
    Inbound,
    InboundAnswer,
    InboundRefused,
    InboundRequest,
    Outgoing,
    PairingPlatform,
    PairingState,
    PlatformBusy,
    PlatformNotConfigured,
    Sent,
)
from agentsvc_core.ports.clock import Clock

__all__ = [
    "SECRET_HEADER",
    "WhatsAppWeb",
    "instance_name",
    "qr_png",
    "whatsapp_web",
    "whatsapp_web_from_env",
]

log = logging.getLogger("agentsvc.channels")
SECRET_HEADER = "x-agentsvc-secret"  # noqa: S105 (a header name, not a secret)
EVENTS = ("MESSAGES_UPSERT", "CONNECTION_UPDATE", "QRCODE_UPDATED")
_TIMEOUT_S = 15.0
FIRST_QR_S = 60  # Baileys' first QR code lives this long,
NEXT_QR_S = 20  # each one after it this long
_BUSY_RETRY_S = 5.0
_CHANNEL = re.compile(r"/channels/([A-Za-z0-9-]{1,64})/webhook/?$")

Config = Mapping[str, str | int | bool]


def instance_name(inbound_url: str) -> str:
    """The sidecar instance of the channel whose inbound URL this is."""
    found = _CHANNEL.search(inbound_url)
    if found:
        return f"agentsvc-{found.group(1)}"
    return "agentsvc-" + hashlib.sha256(inbound_url.encode()).hexdigest()[:32]


def qr_png(code: str) -> bytes:
    """The QR code of ``code`` as a PNG, large enough to scan from a screen."""
    out = io.BytesIO()
    segno.make(code, error="l", micro=False).save(out, kind="png", scale=6, border=4)
    return out.getvalue()


class WhatsAppWeb(PairingPlatform):
    type = "whatsapp_web"
    credential_fields = ()  # nothing from the user; the webhook secret is made here
    config_fields = ()

    def __init__(
        self,
        guard: OutboundGuard,
        base_url: str | None,
        api_key: str | None,
        clock: Clock | None = None,
    ) -> None:
        self._base = base_url.rstrip("/") if base_url else None
        self._key = api_key
        self._clock = clock or SystemClock()
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
        expected = credentials.get("webhook_secret", "")
        given = request.headers.get(SECRET_HEADER, "")
        if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            return InboundRefused(status=401, detail=f"the {SECRET_HEADER} header is wrong")
        if request.method != "POST":
            return InboundRefused(status=400, detail="the sidecar's events are POSTed")
        try:
            payload = msgspec.json.decode(request.body)
        except msgspec.DecodeError:
            return InboundRefused(status=400, detail="the body is not JSON")
        if not isinstance(payload, dict) or not isinstance(payload.get("event"), str):
            return InboundRefused(status=400, detail="the body is not a sidecar event")
        return read_event(payload, config)

    # connection

    def _configured(self) -> tuple[str, str]:
        if self._base is None:
            raise PlatformNotConfigured(
                "whatsapp_web needs a sidecar: set AGENTSVC_WHATSAPP_WEB_URL"
            )
        if self._key is None:
            raise PlatformNotConfigured(
                "whatsapp_web needs the sidecar's key: set AGENTSVC_WHATSAPP_WEB_API_KEY"
            )
        return self._base, self._key

    async def connect(
        self, credentials: Mapping[str, str], config: Config, inbound_url: str
    ) -> Connected:
        base, _ = self._configured()
        secret = credentials.get("webhook_secret") or secrets.token_urlsafe(32)
        instance = instance_name(inbound_url)
        try:
            reason = await self._create(instance, inbound_url, secret)
        except (TimeoutError, httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = f"the sidecar: {failure(exc, base)}"
        if reason is not None:
            return Connected(status="error", reason=reason)
        return Connected(
            status="connecting",
            reason="scan the QR code with WhatsApp on the phone",
            config={"instance": instance, "webhook_url": inbound_url},
            credentials={"webhook_secret": secret},
        )

    async def _create(self, instance: str, url: str, secret: str) -> str | None:
        """Create the instance with its webhook (or set the webhook of the one that
        exists); the reason it failed, or None."""
        webhook = {
            "url": url,
            "byEvents": False,
            "base64": False,
            "headers": {SECRET_HEADER: secret},
            "events": list(EVENTS),
        }
        body = {
            "instanceName": instance,
            "integration": "WHATSAPP-BAILEYS",
            "qrcode": True,
            "webhook": webhook,
        }
        status, _ = await self._call("POST", "/instance/create", body)
        if status in (403, 409):  # "This name ... is already in use."
            status, _ = await self._call(
                "POST", f"/webhook/set/{instance}", {"webhook": {"enabled": True, **webhook}}
            )
        if status in (200, 201):
            return None
        if status == 401:
            return "the sidecar refused AGENTSVC_WHATSAPP_WEB_API_KEY"
        return f"the sidecar answered HTTP {status} to creating the instance"

    async def disconnect(self, credentials: Mapping[str, str], config: Config) -> None:
        instance = config.get("instance")
        if self._base is None or self._key is None or not isinstance(instance, str):
            return
        for path in (f"/instance/logout/{instance}", f"/instance/delete/{instance}"):
            try:
                await self._call("DELETE", path)
            except (TimeoutError, httpx.HTTPError, httpx.InvalidURL) as exc:
                log.info("whatsapp web disconnect: %s", failure(exc, self._base))

    async def pairing(self, credentials: Mapping[str, str], config: Config) -> PairingState:
        base, _ = self._configured()
        instance = config.get("instance")
        if not isinstance(instance, str):
            return PairingState(status="error", reason="the channel has no sidecar instance")
        try:
            return await self._pairing(instance, credentials, config)
        except (TimeoutError, httpx.HTTPError, httpx.InvalidURL) as exc:
            return PairingState(status="error", reason=f"the sidecar: {failure(exc, base)}")

    async def _pairing(
        self, instance: str, credentials: Mapping[str, str], config: Config
    ) -> PairingState:
        status, answer = await self._call("GET", f"/instance/connectionState/{instance}")
        if status == 404 and isinstance(config.get("webhook_url"), str):
            # the sidecar lost the instance (a fresh sidecar): make it again
            failed = await self._create(
                instance, str(config["webhook_url"]), credentials.get("webhook_secret", "")
            )
            if failed is not None:
                return PairingState(status="error", reason=failed)
            status, answer = await self._call("GET", f"/instance/connectionState/{instance}")
        if status != 200:
            return PairingState(
                status="error", reason=f"the sidecar answered HTTP {status} to connectionState"
            )
        if _state(answer) == "open":
            return PairingState(status="connected")
        status, answer = await self._call("GET", f"/instance/connect/{instance}")
        if status != 200 or not isinstance(answer, dict):
            return PairingState(
                status="error", reason=f"the sidecar answered HTTP {status} to connect"
            )
        code = answer.get("code")
        pairing_code = answer.get("pairingCode")
        if not isinstance(code, str) or not code:
            # no QR yet (the session is starting): the next call will have one
            return PairingState(status="connecting")
        count = answer.get("count")
        lives = FIRST_QR_S if not isinstance(count, int) or count <= 1 else NEXT_QR_S
        return PairingState(
            status="connecting",
            qr_png=qr_png(code),
            qr_expires_at=self._clock.now().astimezone(UTC) + timedelta(seconds=lives),
            pairing_code=pairing_code if isinstance(pairing_code, str) else None,
        )

    # outbound

    def render(self, markdown: str) -> tuple[str, ...]:
        return render_parts(markdown)

    async def send(self, credentials: Mapping[str, str], config: Config, message: Outgoing) -> Sent:
        base, _ = self._configured()
        instance = config.get("instance")
        path = f"/message/sendText/{instance}"
        try:
            status, answer = await self._call(
                "POST", path, {"number": message.chat_id, "text": message.text}
            )
        except (TimeoutError, httpx.HTTPError, httpx.InvalidURL) as exc:
            why = failure(exc, base)
            raise DeliveryFailed(
                f"the sidecar: {why}", permanent=why.startswith("refused")
            ) from None
        if status in (200, 201):
            key = answer.get("key") if isinstance(answer, dict) else None
            sent_id = key.get("id") if isinstance(key, dict) else None
            return Sent(message_id=sent_id if isinstance(sent_id, str) else None)
        detail = f"the sidecar answered HTTP {status} to sendText"
        log.warning("whatsapp web send: %s", detail)
        if status == 429:
            raise PlatformBusy(detail, retry_after_s=_BUSY_RETRY_S)
        # 401 (the key), 404 (no such instance), 400 (no such number): permanent;
        # a 5xx (the session is reconnecting) may pass later
        raise DeliveryFailed(detail, permanent=status < 500)

    async def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        base, key = self._configured()
        async with asyncio.timeout(_TIMEOUT_S):
            resp = await self._http.request(method, base + path, json=body, headers={"apikey": key})
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        return resp.status_code, answer


def _state(answer: Any) -> str | None:
    inner = answer.get("instance") if isinstance(answer, dict) else None
    state = inner.get("state") if isinstance(inner, dict) else None
    return state if isinstance(state, str) else None


def whatsapp_web(
    guard: OutboundGuard, base_url: str | None, api_key: str | None, clock: Clock | None = None
) -> WhatsAppWeb:
    """The adapter for ``whatsapp_web`` (``AGENTSVC_WHATSAPP_WEB_URL`` and
    ``AGENTSVC_WHATSAPP_WEB_API_KEY``; unset, it raises ``PlatformNotConfigured``
    when used)."""
    return WhatsAppWeb(guard, base_url, api_key, clock)


def whatsapp_web_from_env(
    guard: OutboundGuard, env: Mapping[str, str], clock: Clock | None = None
) -> WhatsAppWeb:
    """The adapter as the environment configures it (unset variables: the type
    answers ``PlatformNotConfigured`` naming them when a channel uses it)."""
    return WhatsAppWeb(
        guard,
        env.get("AGENTSVC_WHATSAPP_WEB_URL", "").strip() or None,
        env.get("AGENTSVC_WHATSAPP_WEB_API_KEY", "").strip() or None,
        clock,
    )
