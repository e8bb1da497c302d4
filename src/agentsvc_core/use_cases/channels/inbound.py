"""The public inbound endpoint of a channel, ``/api/channels/{channelId}/webhook``:
what one request means, answered at once, before any model is called.

The channel's platform reads the request (``read_inbound``): a refusal (a wrong
proof, a malformed body) and a handshake are answered as they are; a connection
change updates the channel; each message is stored once per (channel, platform
event id) (``ChannelStore.record_event``, a unique key: a redelivery stores
nothing) and queued as a job (``ANSWER_JOB``) that answers it later
(``answer.ChannelAnswers``). The job's key is the event's, so a redelivery that
arrives while the first is queued or running adds nothing either."""

from __future__ import annotations

from uuid import UUID

import msgspec

from agentsvc_core.entities.channel import Channel, ChannelEvent
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import Clock, SecretBox
from agentsvc_core.ports.channel_platforms import (
    ChannelPlatforms,
    Inbound,
    InboundAnswer,
    InboundMessage,
    InboundRefused,
    InboundRequest,
)
from agentsvc_core.ports.channels import ChannelStore
from agentsvc_core.ports.event_webhooks import EventPublisher, NoEvents
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.use_cases.channels.manage import open_credentials
from agentsvc_core.use_cases.channels.transitions import with_status
from agentsvc_core.use_cases.event_webhooks.payloads import status_changed

__all__ = ["ANSWER_JOB", "AnswerJob", "ChannelInbound", "job_key"]

ANSWER_JOB = "channel.answer"
MAX_ID = 256  # platform ids kept (event, chat, sender): longer ones are cut
MAX_TEXT = 100_000


class AnswerJob(msgspec.Struct, frozen=True):
    """The job's payload: ids only (the message is in the stored event)."""

    org_id: str
    channel_id: UUID
    event_id: str


def job_key(channel_id: UUID, event_id: str) -> str:
    return f"channel:{channel_id}:{event_id}"


def _clean(text: str, limit: int) -> str:
    """What storage can keep: no NUL character, at most ``limit`` characters."""
    return text.replace("\x00", "")[:limit]


def _clean_or_none(text: str | None, limit: int) -> str | None:
    return None if text is None else _clean(text, limit)


class ChannelInbound:
    def __init__(
        self,
        store: ChannelStore,
        platforms: ChannelPlatforms,
        box: SecretBox,
        jobs: JobQueue,
        clock: Clock,
        events: EventPublisher | None = None,
    ) -> None:
        """``events``: told when a channel's status changes (event webhooks)."""
        self._events = events or NoEvents()
        self._store = store
        self._platforms = platforms
        self._box = box
        self._jobs = jobs
        self._clock = clock

    async def channel(self, channel_id: UUID) -> Channel:
        """The channel of a public request (``NotFound`` for an unknown id, or a
        type this deployment has no adapter for)."""
        channel = await self._store.find(channel_id)
        if channel is None or channel.type not in self._platforms:
            raise NotFound("channel not found")
        return channel

    async def receive(
        self, channel: Channel, request: InboundRequest
    ) -> Inbound | InboundAnswer | InboundRefused:
        """What the request meant, once its messages are stored and queued; the
        web layer answers it as it is (a refusal with its status)."""
        platform = self._platforms[channel.type]
        now = self._clock.now()
        read = platform.read_inbound(
            request, open_credentials(self._box, channel), channel.config, now
        )
        if not isinstance(read, Inbound):
            return read
        if read.status is not None:
            status = read.status
            changed = await self._store.modify(
                channel.org_id, channel.id, lambda c: with_status(c, status, now)
            )
            await status_changed(self._events, channel, changed)
        for message in read.messages:
            await self._queue(channel, message)
        return read

    async def _queue(self, channel: Channel, message: InboundMessage) -> None:
        now = self._clock.now()
        event = ChannelEvent(
            org_id=channel.org_id,
            channel_id=channel.id,
            event_id=_clean(message.event_id, MAX_ID),
            chat_id=_clean(message.chat_id, MAX_ID),
            sender_id=_clean(message.sender_id, MAX_ID),
            sender_name=_clean_or_none(message.sender_name, MAX_ID),
            sender_username=_clean_or_none(message.sender_username, MAX_ID),
            text=_clean(message.text, MAX_TEXT),
            is_group=message.is_group,
            mentioned=message.mentioned,
            reply_to=_clean_or_none(message.reply_to, MAX_ID),
            created_at=now,
            updated_at=now,
        )
        fresh = await self._store.record_event(event)
        if not fresh:
            stored = await self._store.event(channel.org_id, channel.id, event.event_id)
            # a redelivery queues nothing, unless the first one's job was never
            # queued (the queue failed after the event was stored): the key makes
            # this a no-op while that job waits or runs
            if stored is None or stored.state != "received":
                return
        payload = msgspec.json.encode(AnswerJob(channel.org_id, channel.id, event.event_id))
        await self._jobs.enqueue(ANSWER_JOB, payload, key=job_key(channel.id, event.event_id))
