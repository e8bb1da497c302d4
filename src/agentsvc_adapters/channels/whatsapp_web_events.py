"""The WhatsApp Web sidecar's webhook events (Evolution API v2's shapes), read into
the channel port's values: ``MESSAGES_UPSERT`` into messages, ``CONNECTION_UPDATE``
into a connection status; every other event is acknowledged and ignored.

An event is ``{event, instance, data, sender, ...}``; ``event`` is written
``messages.upsert`` by Evolution API and ``MESSAGES_UPSERT`` by some versions and
proxies, read alike. ``sender`` is the session's own number (its JID).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from agentsvc_core.ports.channel_platforms import Inbound, InboundMessage, InboundStatus

__all__ = ["read_event"]

Config = Mapping[str, str | int | bool]
_GROUP = "@g.us"
_LATEST = 10**11  # seconds: the year 5138, well within what datetime holds
_BROADCAST = "status@broadcast"
# Baileys' DisconnectReason codes a person can act on
_CLOSED = {401: "logged out on the phone", 440: "replaced by another WhatsApp Web session"}


def _user(jid: str) -> str:
    """The number of a JID, without its device (``5511...:12@s.whatsapp.net``)."""
    return jid.split("@", 1)[0].split(":", 1)[0]


def _dict(value: dict[str, Any], key: str) -> dict[str, Any]:
    inner = value.get(key)
    return inner if isinstance(inner, dict) else {}


def _text(message: dict[str, Any]) -> str | None:
    plain = message.get("conversation")
    if isinstance(plain, str) and plain:
        return plain
    extended = _dict(message, "extendedTextMessage").get("text")
    return extended if isinstance(extended, str) and extended else None


def _mentions(data: dict[str, Any], message: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for context in (
        _dict(_dict(message, "extendedTextMessage"), "contextInfo"),
        _dict(data, "contextInfo"),
    ):
        jids = context.get("mentionedJid")
        if isinstance(jids, list):
            found.extend(j for j in jids if isinstance(j, str))
    return found


def _sent_at(raw: Any) -> datetime | None:
    if isinstance(raw, str) and raw.isdigit():
        raw = int(raw)
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 < raw < _LATEST:
        return datetime.fromtimestamp(raw, UTC)
    return None


def _message(data: dict[str, Any], own: str | None) -> InboundMessage | None:
    key = _dict(data, "key")
    chat, event_id = key.get("remoteJid"), key.get("id")
    if key.get("fromMe") is True or not isinstance(chat, str) or not isinstance(event_id, str):
        return None
    if chat == _BROADCAST:
        return None
    message = _dict(data, "message")
    text = _text(message)
    if text is None:
        return None  # media, reactions, protocol messages: not read here
    group = chat.endswith(_GROUP)
    participant = key.get("participant")
    sender = participant if group and isinstance(participant, str) and participant else chat
    name = data.get("pushName")
    mentioned = group and own is not None and _user(own) in map(_user, _mentions(data, message))
    return InboundMessage(
        event_id=event_id,
        chat_id=chat,
        sender_id=sender,
        sender_name=name if isinstance(name, str) and name else None,
        text=text,
        is_group=group,
        mentioned=mentioned,
        sent_at=_sent_at(data.get("messageTimestamp")),
    )


def _connection(data: dict[str, Any]) -> InboundStatus | None:
    state = data.get("state")
    if state == "open":
        own = data.get("wuid")
        return InboundStatus(
            status="connected", config={"jid": own} if isinstance(own, str) and own else {}
        )
    if state == "connecting":
        return InboundStatus(status="connecting")
    if state == "close":
        code = data.get("statusReason")
        why = _CLOSED.get(code) if isinstance(code, int) else None
        reason = "the WhatsApp session closed" + (
            f": {why}" if why else f" (status {code})" if isinstance(code, int) else ""
        )
        return InboundStatus(status="disconnected", reason=reason)
    return None


def read_event(payload: dict[str, Any], config: Config) -> Inbound:
    """What one sidecar event means for the channel whose config this is (an event
    of another instance than the channel's is ignored)."""
    instance = config.get("instance")
    if isinstance(instance, str) and payload.get("instance") not in (None, instance):
        return Inbound()
    event = str(payload["event"]).upper().replace(".", "_")
    data = payload.get("data")
    if event == "CONNECTION_UPDATE" and isinstance(data, dict):
        return Inbound(status=_connection(data))
    if event != "MESSAGES_UPSERT":
        return Inbound()
    sender = payload.get("sender")
    own = sender if isinstance(sender, str) and sender else config.get("jid")
    items = data if isinstance(data, list) else [data]
    messages = [
        m
        for item in items
        if isinstance(item, dict)
        and (m := _message(item, own if isinstance(own, str) else None)) is not None
    ]
    return Inbound(messages=tuple(messages))
