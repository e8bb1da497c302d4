"""Event webhooks (``/api/webhooks``): the organization's endpoints, the event
types they may take, their deliveries and a resend (docs/webhooks.md). Admins
only, reads included: an endpoint sees the whole organization's events."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities.event_webhook import (
    EVENT_TYPES,
    DeliveryAttempt,
    EventDelivery,
    WebhookEndpoint,
)
from agentsvc_core.use_cases.event_webhooks import EndpointChanges, EndpointDraft, EventWebhooks
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.drafts import draft_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, copied, cursor_text, read_cursor

Req = Request[Any, Any, Any]
Url = Annotated[str, Meta(min_length=1, max_length=4096)]
EventType = Annotated[str, Meta(min_length=1, max_length=100)]
# (an empty list is the use case's 422, as an unknown type is)
Events = Annotated[list[EventType], Meta(max_length=len(EVENT_TYPES))]
Description = Annotated[str, Meta(max_length=10_000)]
Cursor = Annotated[str | None, QueryParameter(name="cursor", max_length=100)]
Limit = Annotated[int, QueryParameter(name="limit", ge=1, le=100)]


class WebhookEndpointBody(msgspec.Struct, rename="camel"):
    url: Url
    events: Events
    description: Description = ""
    enabled: bool = True


class WebhookEndpointPatchBody(msgspec.Struct, rename="camel"):
    url: Url | UnsetType = UNSET
    events: Events | UnsetType = UNSET
    description: Description | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET


class WebhookEndpointOut(msgspec.Struct):
    id: UUID
    org_id: str
    url: str
    description: str
    events: list[str]
    enabled: bool
    disabled_reason: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, e: WebhookEndpoint) -> WebhookEndpointOut:
        return copied(cls, e, events=list(e.events))


class WebhookEndpointCreatedOut(msgspec.Struct):
    """The endpoint and its signing secret: the only answer that shows it."""

    endpoint: WebhookEndpointOut
    secret: str


class WebhookEventTypeOut(msgspec.Struct):
    type: str
    description: str


class WebhookAttemptOut(msgspec.Struct):
    at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int

    @classmethod
    def of(cls, a: DeliveryAttempt) -> WebhookAttemptOut:
        return copied(cls, a)


class WebhookDeliveryOut(msgspec.Struct):
    id: UUID
    endpoint_id: UUID
    event_id: str  # the webhook-id header: the same for every delivery of the event
    event_type: str
    status: str
    attempts: list[WebhookAttemptOut]
    next_attempt_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, d: EventDelivery) -> WebhookDeliveryOut:
        return copied(cls, d, attempts=[WebhookAttemptOut.of(a) for a in d.attempts])


class WebhookDeliveryListOut(msgspec.Struct, rename="camel"):
    deliveries: list[WebhookDeliveryOut]
    next_cursor: str | None


class EventWebhooksController(Controller):
    path = "/api/webhooks"
    tags = ["webhooks"]

    @get(
        "/event-types",
        operation_id="listWebhookEventTypes",
        responses=errors(),
        opt=ADMIN,
        summary="The event types an endpoint may subscribe to",
    )
    async def event_types(self) -> list[WebhookEventTypeOut]:
        return [WebhookEventTypeOut(type=t, description=d) for t, d in EVENT_TYPES.items()]

    @get(
        "/",
        operation_id="listWebhookEndpoints",
        responses=errors(),
        opt=ADMIN,
        summary="The organization's webhook endpoints, oldest first",
    )
    async def list_endpoints(
        self, request: Req, event_webhooks: NamedDependency[EventWebhooks]
    ) -> list[WebhookEndpointOut]:
        endpoints = await event_webhooks.list_all(principal_of(request))
        return [WebhookEndpointOut.of(e) for e in endpoints]

    @post(
        "/",
        operation_id="createWebhookEndpoint",
        status_code=201,
        responses=errors(400, 413, 415, 422),
        summary="Subscribe an endpoint to events (its secret is answered once)",
    )
    async def create_endpoint(
        self,
        request: Req,
        event_webhooks: NamedDependency[EventWebhooks],
        data: JSONBody[WebhookEndpointBody],
    ) -> WebhookEndpointCreatedOut:
        draft = draft_of(data, EndpointDraft)
        endpoint, secret = await event_webhooks.create(principal_of(request), draft)
        return WebhookEndpointCreatedOut(endpoint=WebhookEndpointOut.of(endpoint), secret=secret)

    @get(
        "/{endpoint_id:uuid}",
        operation_id="getWebhookEndpoint",
        responses=errors(404),
        opt=ADMIN,
        summary="A webhook endpoint",
    )
    async def get_endpoint(
        self,
        request: Req,
        event_webhooks: NamedDependency[EventWebhooks],
        endpoint_id: FromPath[UUID],
    ) -> WebhookEndpointOut:
        return WebhookEndpointOut.of(await event_webhooks.get(principal_of(request), endpoint_id))

    @patch(
        "/{endpoint_id:uuid}",
        operation_id="updateWebhookEndpoint",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change a webhook endpoint (enabling it again clears why it was disabled)",
    )
    async def patch_endpoint(
        self,
        request: Req,
        event_webhooks: NamedDependency[EventWebhooks],
        endpoint_id: FromPath[UUID],
        data: JSONBody[WebhookEndpointPatchBody],
    ) -> WebhookEndpointOut:
        changes = draft_of(data, EndpointChanges)
        updated = await event_webhooks.update(principal_of(request), endpoint_id, changes)
        return WebhookEndpointOut.of(updated)

    @delete(
        "/{endpoint_id:uuid}",
        operation_id="deleteWebhookEndpoint",
        status_code=200,
        responses=errors(404),
        summary="Delete a webhook endpoint and its deliveries",
    )
    async def delete_endpoint(
        self,
        request: Req,
        event_webhooks: NamedDependency[EventWebhooks],
        endpoint_id: FromPath[UUID],
    ) -> OkBody:
        await event_webhooks.delete(principal_of(request), endpoint_id)
        return OkBody(ok=True)

    @post(
        "/{endpoint_id:uuid}/rotate-secret",
        operation_id="rotateWebhookSecret",
        status_code=200,
        responses=errors(404),
        summary="A new signing secret for the endpoint (answered once)",
    )
    async def rotate_secret(
        self,
        request: Req,
        event_webhooks: NamedDependency[EventWebhooks],
        endpoint_id: FromPath[UUID],
    ) -> WebhookEndpointCreatedOut:
        endpoint, secret = await event_webhooks.rotate_secret(principal_of(request), endpoint_id)
        return WebhookEndpointCreatedOut(endpoint=WebhookEndpointOut.of(endpoint), secret=secret)

    @get(
        "/{endpoint_id:uuid}/deliveries",
        operation_id="listWebhookDeliveries",
        responses=errors(404, 422),
        opt=ADMIN,
        summary="The endpoint's deliveries, newest first",
    )
    async def deliveries(
        self,
        request: Req,
        event_webhooks: NamedDependency[EventWebhooks],
        endpoint_id: FromPath[UUID],
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> WebhookDeliveryListOut:
        rows, more = await event_webhooks.deliveries(
            principal_of(request), endpoint_id, before=read_cursor(cursor), limit=limit
        )
        return WebhookDeliveryListOut(
            deliveries=[WebhookDeliveryOut.of(d) for d in rows],
            next_cursor=cursor_text(rows[-1].created_at, rows[-1].id) if more else None,
        )

    @post(
        "/{endpoint_id:uuid}/deliveries/{delivery_id:uuid}/resend",
        operation_id="resendWebhookDelivery",
        status_code=202,
        responses=errors(404, 422),
        summary="Send the delivery's event again (a new delivery, the same webhook-id)",
    )
    async def resend(
        self,
        request: Req,
        event_webhooks: NamedDependency[EventWebhooks],
        endpoint_id: FromPath[UUID],
        delivery_id: FromPath[UUID],
    ) -> WebhookDeliveryOut:
        delivery = await event_webhooks.resend(principal_of(request), endpoint_id, delivery_id)
        return WebhookDeliveryOut.of(delivery)
