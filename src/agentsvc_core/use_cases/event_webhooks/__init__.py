"""Event webhooks (docs/webhooks.md): organizations subscribe HTTPS endpoints to
events (a message stored, a reply finished, a run ended or paused, a document
indexed, a code session ended, a channel's status changed) and the service
delivers each event, signed as Standard Webhooks says, with retries for about a
day.

- ``endpoints``: the endpoints (``/api/webhooks``), their secret, deliveries and
  resends.
- ``publishing``: ``EventWebhookPublisher``, what the areas call; free when
  nobody listens.
- ``delivery``: the delivery job, one attempt at a time.
- ``signing`` and ``schedule``: the pure parts (the signature, the backoff).
"""

from agentsvc_core.use_cases.event_webhooks.delivery import (
    DELIVER_JOB,
    DeliverySettings,
    EventDeliveries,
)
from agentsvc_core.use_cases.event_webhooks.endpoints import (
    EndpointChanges,
    EndpointDraft,
    EventWebhooks,
)
from agentsvc_core.use_cases.event_webhooks.publishing import EventWebhookPublisher

__all__ = [
    "DELIVER_JOB",
    "DeliverySettings",
    "EndpointChanges",
    "EndpointDraft",
    "EventDeliveries",
    "EventWebhookPublisher",
    "EventWebhooks",
]
