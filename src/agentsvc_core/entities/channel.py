"""A channel: one of an agent's doors onto a messaging platform (Telegram, Slack,
WhatsApp, or a generic signed webhook), and the contacts who write through it
(docs/channels.md).

A channel's public settings are ``config`` (the generic channel's ``target_url``,
WhatsApp Cloud's ``phone_number_id``, what the platform told us such as the
Telegram bot's username or the Slack team); its credentials (bot tokens, signing
secrets, app secrets, verify tokens) are one sealed JSON object
(``credentials_sealed``), never in an answer. One external chat is one thread:
``ChannelChat`` keeps which."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

__all__ = [
    "CHANNEL_STATUSES",
    "CHANNEL_TYPES",
    "CONTACT_STATUSES",
    "DM_POLICIES",
    "GROUP_POLICIES",
    "Channel",
    "ChannelEvent",
    "ChannelStatus",
    "ChannelType",
    "Contact",
    "ContactStatus",
    "DmPolicy",
    "EventState",
    "GroupPolicy",
]

ChannelType = Literal["webhook", "telegram", "slack", "whatsapp_cloud", "whatsapp_web"]
CHANNEL_TYPES: tuple[ChannelType, ...] = (
    "webhook",
    "telegram",
    "slack",
    "whatsapp_cloud",
    "whatsapp_web",
)
ChannelStatus = Literal["pending", "connecting", "connected", "disconnected", "error"]
CHANNEL_STATUSES: tuple[ChannelStatus, ...] = (
    "pending",
    "connecting",
    "connected",
    "disconnected",
    "error",
)
# Who is answered in a direct chat: everyone; only ``allow_from``; an unknown
# contact gets a one-time code its owner approves first; nobody (stored only).
DmPolicy = Literal["open", "allowlist", "pairing", "disabled"]
DM_POLICIES: tuple[DmPolicy, ...] = ("open", "allowlist", "pairing", "disabled")
# In a group chat: only when the agent is mentioned; every message; never.
GroupPolicy = Literal["mention", "all", "disabled"]
GROUP_POLICIES: tuple[GroupPolicy, ...] = ("mention", "all", "disabled")
ContactStatus = Literal["pending", "approved", "blocked"]
CONTACT_STATUSES: tuple[ContactStatus, ...] = ("pending", "approved", "blocked")


class Channel(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    agent_id: UUID
    type: ChannelType
    name: str
    status: ChannelStatus
    status_reason: str | None
    # public settings: strings, numbers and booleans only (no secret ever here)
    config: dict[str, str | int | bool]
    credentials_sealed: str | None  # SecretBox-sealed JSON object of strings
    dm_policy: DmPolicy
    allow_from: tuple[str, ...]  # external sender ids (or usernames) for ``allowlist``
    group_policy: GroupPolicy
    created_at: datetime
    updated_at: datetime


class Contact(msgspec.Struct, frozen=True, kw_only=True):
    """Someone who wrote to a channel, by the platform's id for them."""

    id: UUID
    org_id: str
    channel_id: UUID
    external_id: str
    display_name: str | None
    username: str | None
    thread_id: UUID | None  # their direct chat's thread, once there is one
    status: ContactStatus
    pairing_code: str | None  # the one-time code of a ``pairing`` contact, until approved
    first_seen_at: datetime
    last_message_at: datetime | None


# What became of one inbound message (``ChannelEvent.state``): just stored;
# to be answered (its contact and thread known, the policies passed);
# its turn started (``run_id``); its reply (or a pairing code) waits to be
# delivered, part by part; delivered; not to be answered (a policy, a blocked
# contact); the delivery failed for good.
EventState = Literal["received", "admitted", "answering", "replied", "done", "skipped", "failed"]


class ChannelEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One inbound message, stored once per (channel, platform event id): the
    unique key that makes a redelivered event a no-op. The job that answers it
    reads and writes it; what it carries is the platform's message."""

    org_id: str
    channel_id: UUID
    event_id: str
    chat_id: str
    sender_id: str
    sender_name: str | None = None
    sender_username: str | None = None
    text: str
    is_group: bool = False
    mentioned: bool = False
    reply_to: str | None = None
    state: EventState = "received"
    contact_id: UUID | None = None
    thread_id: UUID | None = None
    run_id: UUID | None = None  # the turn that answers it, once started
    reply_message_id: UUID | None = None
    reply_text: str | None = None  # the stored reply (or pairing message) to deliver
    parts_sent: int = 0  # how many rendered parts the platform took: never sent again
    attempts: int = 0  # delivery attempts that failed (busy or transient)
    error: str | None = None  # why the delivery failed for good
    created_at: datetime
    updated_at: datetime
