"""The pure rules of channels: who is answered (``decide``), what a failed
delivery attempt comes to (``after_failure``), what a platform's word about the
connection does to the channel (``with_status``). State in, state out; the use
cases apply them (docs/channels.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from agentsvc_core.entities.channel import Channel, ChannelEvent, Contact
from agentsvc_core.ports.channel_platforms import InboundStatus

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_BACKOFF_S",
    "Decision",
    "after_failure",
    "backoff_s",
    "decide",
    "delivery_failed",
    "with_status",
]

# A delivery is tried at most this many times (busy or transient failures
# included) before it is recorded as failed.
MAX_ATTEMPTS = 5
MAX_BACKOFF_S = 300.0

# answer: run the turn; pair: send the contact its one-time code; store: keep the
# message, answer nothing
Decision = Literal["answer", "pair", "store"]


def _direct(channel: Channel, contact: Contact, created: bool, event: ChannelEvent) -> Decision:
    policy = channel.dm_policy
    if policy == "open":
        return "answer"
    if policy == "allowlist":
        names = {event.sender_id, event.sender_username, contact.username} - {None}
        return "answer" if names & set(channel.allow_from) else "store"
    if policy == "pairing":
        if contact.status == "approved":
            return "answer"
        # the code goes once, to the contact's first message; later ones wait
        return "pair" if created and contact.pairing_code else "store"
    return "store"  # disabled


def decide(channel: Channel, contact: Contact, created: bool, event: ChannelEvent) -> Decision:
    """Whether a message is answered. A blocked contact never is. In a group: by
    ``group_policy`` (``mention``: only a message that names the bot). In a
    direct chat: by ``dm_policy``. ``created``: the message is the contact's first."""
    if contact.status == "blocked":
        return "store"
    if event.is_group:
        policy = channel.group_policy
        if policy == "all" or (policy == "mention" and event.mentioned):
            return "answer"
        return "store"
    return _direct(channel, contact, created, event)


def backoff_s(attempts: int) -> float:
    """The wait before the next try after ``attempts`` transient failures."""
    return min(MAX_BACKOFF_S, 2.0**attempts)


def delivery_failed(event: ChannelEvent, why: str, now: datetime) -> ChannelEvent:
    return msgspec.structs.replace(event, state="failed", error=why, updated_at=now)


def after_failure(
    event: ChannelEvent, why: str, retry_after_s: float | None, now: datetime
) -> tuple[ChannelEvent, float | None]:
    """A failed attempt that may be tried again (``retry_after_s``: the platform's
    wait, None: ours): the event counted one more attempt, and the wait before
    the next, or None when the attempts are spent (the event failed)."""
    attempts = event.attempts + 1
    counted = msgspec.structs.replace(event, attempts=attempts, updated_at=now)
    if attempts >= MAX_ATTEMPTS:
        return delivery_failed(counted, f"{why} (after {attempts} attempts)", now), None
    wait = backoff_s(attempts) if retry_after_s is None else max(1.0, retry_after_s)
    return counted, wait


def with_status(channel: Channel, status: InboundStatus, now: datetime) -> Channel:
    """The channel once the platform said its connection changed (and what it
    told us to keep in ``config``)."""
    return msgspec.structs.replace(
        channel,
        status=status.status,
        status_reason=status.reason,
        config={**channel.config, **status.config},
        updated_at=now,
    )
