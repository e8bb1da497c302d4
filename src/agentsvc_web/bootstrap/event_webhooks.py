"""Event webhooks: the endpoints' use case, the publisher every area is given
(``events=``), and the delivery job (``DELIVER_JOB``) over the sender, which goes
through the outbound guard (docs/webhooks.md)."""

from __future__ import annotations

from typing import NamedTuple

from agentsvc_adapters.event_webhooks import HttpEventWebhookSender
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports import Clock, SecretBox, Storage
from agentsvc_core.ports.event_webhooks import EventWebhookSender
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.use_cases.event_webhooks import (
    DeliverySettings,
    EventDeliveries,
    EventWebhookPublisher,
    EventWebhooks,
)
from agentsvc_web.settings import Settings

__all__ = ["EventWebhookArea", "own_sender", "wire_event_webhooks"]


class EventWebhookArea(NamedTuple):
    event_webhooks: EventWebhooks
    event_deliveries: EventDeliveries
    event_publisher: EventWebhookPublisher


def own_sender(settings: Settings, urls: UrlPolicy) -> HttpEventWebhookSender:
    """The sender, over the outbound guard the host was given (or one of its own
    for a host that passes another URL policy: a test)."""
    guard = (
        urls
        if isinstance(urls, OutboundGuard)
        else OutboundGuard(allow_private_network=settings.allow_private_network)
    )
    return HttpEventWebhookSender(guard)


def wire_event_webhooks(
    settings: Settings,
    storage: Storage,
    box: SecretBox,
    urls: UrlPolicy,
    clock: Clock,
    jobs: JobQueue,
    sender: EventWebhookSender,
) -> EventWebhookArea:
    store = storage.event_webhooks
    publisher = EventWebhookPublisher(
        store, jobs, clock, ttl_s=settings.webhook_subscriptions_ttl_s
    )
    return EventWebhookArea(
        event_webhooks=EventWebhooks(store, box, urls, jobs, clock, publisher.invalidate),
        event_deliveries=EventDeliveries(
            store,
            sender,
            box,
            jobs,
            clock,
            DeliverySettings(retry_scale=1 / settings.webhook_retry_speedup),
            changed=publisher.invalidate,
        ),
        event_publisher=publisher,
    )
