"""Channels: the owner's use case, the public inbound endpoint's, and the job
that answers each inbound message (``ANSWER_JOB``), over the platform adapters
``agentsvc_adapters.channels.registry`` builds (docs/channels.md)."""

from __future__ import annotations

from typing import NamedTuple

from agentsvc_adapters.channels.registry import Platforms, channel_platforms
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports import Clock, SecretBox, Storage
from agentsvc_core.ports.channel_platforms import ChannelPlatforms
from agentsvc_core.ports.event_webhooks import EventPublisher
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.use_cases import Threads
from agentsvc_core.use_cases.channels import ChannelAnswers, ChannelInbound, Channels
from agentsvc_core.use_cases.turn.conversation import Conversation
from agentsvc_web.settings import Settings

__all__ = ["ChannelArea", "own_platforms", "wire_channels"]


class ChannelArea(NamedTuple):
    channels: Channels
    channel_inbound: ChannelInbound
    channel_answers: ChannelAnswers


def own_platforms(settings: Settings, urls: UrlPolicy) -> Platforms:
    """The platform adapters, over the outbound guard the host was given (or a
    guard of their own for a host that passes another URL policy: a test)."""
    guard = (
        urls
        if isinstance(urls, OutboundGuard)
        else OutboundGuard(allow_private_network=settings.allow_private_network)
    )
    return channel_platforms(guard)


def wire_channels(
    settings: Settings,
    storage: Storage,
    box: SecretBox,
    clock: Clock,
    platforms: ChannelPlatforms,
    *,
    jobs: JobQueue,
    threads: Threads,
    conversation: Conversation,
    events: EventPublisher,
) -> ChannelArea:
    store = storage.channels
    return ChannelArea(
        channels=Channels(store, storage.agents, platforms, box, clock, settings.base_url, events),
        channel_inbound=ChannelInbound(store, platforms, box, jobs, clock, events),
        channel_answers=ChannelAnswers(
            store, platforms, box, threads, conversation, storage.conversations, clock, events
        ),
    )
