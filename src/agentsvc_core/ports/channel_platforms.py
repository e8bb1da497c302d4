"""Messaging platforms: what the channels use case (``use_cases/channels``) needs of
each platform a channel can be on. One adapter per channel type
(``agentsvc_adapters/channels``), each configured by environment variables (its
base URL included, so tests point it at a loopback fake) and calling out only
through the outbound guard.

An adapter knows the platform's wire format and nothing of storage, threads or
models: the use case hands it a channel's opened credentials (a mapping of
strings) and public ``config``, and it answers plain values.

- ``read_inbound`` turns one HTTP request that reached
  ``/api/channels/{channelId}/webhook`` into what it means: refused (a wrong or
  missing proof: signature, secret token, timestamp too old, a malformed body), an
  answer the platform expects at once (Slack's ``url_verification`` challenge,
  WhatsApp's ``hub.challenge``), a connection change (the WhatsApp Web sidecar's
  ``CONNECTION_UPDATE``), or the messages it carries. It is pure and fast: the
  endpoint acknowledges before any model is called.
- ``connect`` is called when a channel is created or its credentials change:
  check the credentials with the platform (Telegram ``getMe``) and register the
  inbound URL where the platform allows it (Telegram ``setWebhook`` with a secret
  token); ``disconnect`` when it is deleted (``deleteWebhook``).
- ``render`` turns a reply's Markdown into the platform's format, split into the
  parts the platform accepts (each under its length limit);
  ``send`` delivers one part.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal, Protocol

import msgspec

from agentsvc_core.entities.channel import ChannelStatus, ChannelType
from agentsvc_core.errors import DomainError

__all__ = [
    "ChannelPlatform",
    "ChannelPlatforms",
    "Connected",
    "DeliveryFailed",
    "Inbound",
    "InboundAnswer",
    "InboundMessage",
    "InboundRefused",
    "InboundRequest",
    "InboundStatus",
    "Outgoing",
    "PairingPlatform",
    "PairingState",
    "PlatformBusy",
    "PlatformNotConfigured",
    "Sent",
]


class InboundRequest(msgspec.Struct, frozen=True, kw_only=True):
    """An HTTP request to a channel's inbound endpoint, as it came."""

    method: Literal["GET", "POST"]
    headers: Mapping[str, str]  # names lowercased
    query: Mapping[str, str]
    body: bytes  # the raw body: signatures are over these bytes


class InboundRefused(msgspec.Struct, frozen=True, kw_only=True):
    """The request is not the platform's (bad or missing proof) or cannot be read."""

    status: int  # 401 for a bad proof, 400 for a malformed body, 403 for a wrong verify token
    detail: str  # never a secret, never the expected value


class InboundAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """A handshake the platform expects answered at once, with this body."""

    status: int
    body: bytes
    content_type: str


class InboundMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message someone sent through the platform."""

    event_id: str  # the platform's id of this delivery's event: the de-duplication key
    chat_id: str  # the external chat (a DM or a group): one thread per (channel, chat)
    sender_id: str
    sender_name: str | None = None
    sender_username: str | None = None
    text: str
    is_group: bool = False
    mentioned: bool = False  # a group message that names the bot
    # where a reply goes within the chat (Slack's thread_ts); None: the chat itself
    reply_to: str | None = None
    sent_at: datetime | None = None


class InboundStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The platform (a paired session's sidecar) says the connection changed."""

    status: ChannelStatus
    reason: str | None = None
    config: Mapping[str, str | int | bool] = {}  # what it told us (the phone number)


class Inbound(msgspec.Struct, frozen=True, kw_only=True):
    """What one accepted request carried. ``ack`` is the body to answer at once
    (200); ``messages`` may be empty (an event the channel does not act on, such as
    a delivery receipt or the bot's own message)."""

    messages: tuple[InboundMessage, ...] = ()
    status: InboundStatus | None = None
    ack: bytes = b""
    ack_content_type: str = "text/plain"


class Connected(msgspec.Struct, frozen=True, kw_only=True):
    """What connecting a channel came to: its status and what the platform told us
    to keep in ``config`` (the bot's username, the Slack team). ``credentials``
    are secrets the adapter made for the channel (the WhatsApp Web sidecar's
    webhook secret), to be sealed with the channel's other credentials and handed
    back on every later call."""

    status: ChannelStatus
    reason: str | None = None
    config: Mapping[str, str | int | bool] = {}
    credentials: Mapping[str, str] = {}


class Outgoing(msgspec.Struct, frozen=True, kw_only=True):
    chat_id: str
    text: str  # one part, already rendered by ``render``
    reply_to: str | None = None


class Sent(msgspec.Struct, frozen=True, kw_only=True):
    message_id: str | None  # the platform's id of the sent message, where it gives one


class PlatformNotConfigured(DomainError):
    """The deployment lacks a setting the platform needs; ``detail`` names the
    environment variable (answered as 422)."""


class PlatformBusy(DomainError):
    """The platform asked us to slow down (HTTP 429, Telegram's ``retry_after``,
    Slack's ``Retry-After``): try the same part again after ``retry_after_s``."""

    def __init__(self, detail: str, retry_after_s: float) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class DeliveryFailed(DomainError):
    """The platform refused the part or could not be reached. ``permanent`` when
    trying again cannot help (a bad token, a chat that does not exist, a refusal
    of the outbound guard); else a later try may."""

    def __init__(self, detail: str, *, permanent: bool) -> None:
        super().__init__(detail)
        self.permanent = permanent


class ChannelPlatform(Protocol):
    type: ChannelType
    # the credential fields this type needs (write-only; e.g. ("bot_token",)) and the
    # public ``config`` fields it takes from the user (e.g. ("phone_number_id",))
    credential_fields: tuple[str, ...]
    config_fields: tuple[str, ...]

    def read_inbound(
        self,
        request: InboundRequest,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        now: datetime,
    ) -> Inbound | InboundAnswer | InboundRefused: ...

    async def connect(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        inbound_url: str,
    ) -> Connected:
        """Raises ``PlatformNotConfigured``; a refusal of the credentials is
        ``Connected(status="error", reason=...)``, not an exception."""
        ...

    async def disconnect(
        self, credentials: Mapping[str, str], config: Mapping[str, str | int | bool]
    ) -> None:
        """Best effort: the channel goes whatever the platform answers."""
        ...

    def render(self, markdown: str) -> tuple[str, ...]:
        """The reply in the platform's format, in parts each within its limit."""
        ...

    async def send(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        message: Outgoing,
    ) -> Sent:
        """Raises ``PlatformBusy`` or ``DeliveryFailed``."""
        ...


class PairingState(msgspec.Struct, frozen=True, kw_only=True):
    """A paired session's state (WhatsApp Web through its sidecar)."""

    status: ChannelStatus  # connecting while a QR waits to be scanned
    qr_png: bytes | None = None  # the QR code to scan, as a PNG image
    qr_expires_at: datetime | None = None
    pairing_code: str | None = None
    reason: str | None = None


class PairingPlatform(ChannelPlatform, Protocol):
    """A platform paired by scanning a QR code rather than by a token."""

    async def pairing(
        self, credentials: Mapping[str, str], config: Mapping[str, str | int | bool]
    ) -> PairingState: ...


ChannelPlatforms = Mapping[ChannelType, ChannelPlatform]
