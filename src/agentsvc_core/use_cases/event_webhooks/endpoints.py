"""The organization's webhook endpoints (``/api/webhooks``): defining them, their
secret (shown once, at creation and at each rotation), their deliveries and a
resend. Admins only, reads included: an endpoint sees the whole organization's
events."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.entities.event_webhook import EVENT_TYPES, EventDelivery, WebhookEndpoint
from agentsvc_core.errors import Conflict, InvalidInput, PermissionDenied
from agentsvc_core.partial import given_fields
from agentsvc_core.ports import Clock, SecretBox
from agentsvc_core.ports.event_webhooks import EventWebhookStore
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.rules import MAX_DESCRIPTION, check_text, check_url_text
from agentsvc_core.use_cases.event_webhooks.delivery import enqueue_delivery, secret_context
from agentsvc_core.use_cases.event_webhooks.signing import new_secret
from agentsvc_core.use_cases.sealed import reseal_rows

__all__ = ["EndpointChanges", "EndpointDraft", "EventWebhooks", "checked_events"]

MAX_ENDPOINTS = 50  # per organization
_ATTEMPTS = 10  # compare-and-set attempts of a change


class EndpointDraft(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    events: list[str]
    description: str = ""
    enabled: bool = True


class EndpointChanges(msgspec.Struct, frozen=True, kw_only=True):
    """A PATCH: only the fields given change."""

    url: str | UnsetType = UNSET
    events: list[str] | UnsetType = UNSET
    description: str | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET


def checked_events(events: Sequence[str]) -> tuple[str, ...]:
    """A non-empty subset of the known types, sorted, without repeats."""
    if not events:
        raise InvalidInput("events", "name at least one event type")
    unknown = sorted(set(events) - EVENT_TYPES.keys())
    if unknown:
        raise InvalidInput("events", f"unknown event type {unknown[0]!r}")
    return tuple(sorted(set(events)))


class EventWebhooks:
    def __init__(
        self,
        store: EventWebhookStore,
        box: SecretBox,
        urls: UrlPolicy,
        jobs: JobQueue,
        clock: Clock,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        """``changed``: told after every change of an endpoint (the publisher's
        cache in this process starts afresh)."""
        self._store = store
        self._box = box
        self._urls = urls
        self._jobs = jobs
        self._clock = clock
        self._changed = changed

    @staticmethod
    def _admin(who: Principal) -> None:
        if not who.is_admin:
            raise PermissionDenied("webhooks are managed by the organization's admins")

    def _check(self, endpoint: WebhookEndpoint) -> WebhookEndpoint:
        check_text("url", endpoint.url, max_len=4096, required=True)
        check_url_text("url", endpoint.url)
        refusal = self._urls.refusal(endpoint.url)
        if refusal:
            raise InvalidInput("url", refusal)
        check_text("description", endpoint.description, max_len=MAX_DESCRIPTION)
        return msgspec.structs.replace(endpoint, events=checked_events(endpoint.events))

    def _sealed(self, org: str, endpoint_id: UUID, secret: str) -> str:
        return self._box.seal(secret.encode(), secret_context(org, endpoint_id))

    async def create(self, who: Principal, draft: EndpointDraft) -> tuple[WebhookEndpoint, str]:
        """The endpoint and its secret (the only time it is answered)."""
        self._admin(who)
        if len(await self._store.list_endpoints(who.org_id)) >= MAX_ENDPOINTS:
            raise InvalidInput("url", f"an organization has at most {MAX_ENDPOINTS} endpoints")
        now = self._clock.now()
        endpoint_id = uuid.uuid4()
        secret = new_secret()
        endpoint = self._check(
            WebhookEndpoint(
                id=endpoint_id,
                org_id=who.org_id,
                url=draft.url,
                description=draft.description,
                events=tuple(draft.events),
                enabled=draft.enabled,
                secret=self._sealed(who.org_id, endpoint_id, secret),
                disabled_reason=None,
                created_at=now,
                updated_at=now,
            )
        )
        await self._store.add_endpoint(endpoint)
        self._changed()
        return endpoint, secret

    async def list_all(self, who: Principal) -> list[WebhookEndpoint]:
        self._admin(who)
        return await self._store.list_endpoints(who.org_id)

    async def get(self, who: Principal, endpoint_id: UUID) -> WebhookEndpoint:
        self._admin(who)
        return await self._store.get_endpoint(who.org_id, endpoint_id)

    async def _change(
        self, org: str, endpoint_id: UUID, change: Callable[[WebhookEndpoint], WebhookEndpoint]
    ) -> WebhookEndpoint:
        """``change`` applied with compare-and-set, so that neither a concurrent
        change nor a 410's disabling nor a key rotation's reseal is lost."""
        for _ in range(_ATTEMPTS):
            current = await self._store.get_endpoint(org, endpoint_id)
            updated = change(current)
            if await self._store.replace_endpoint(updated, current):
                self._changed()
                return updated
        raise Conflict("the endpoint is being changed by another request; try again")

    async def update(
        self, who: Principal, endpoint_id: UUID, changes: EndpointChanges
    ) -> WebhookEndpoint:
        """Only the fields given change; enabling an endpoint clears why the service
        had disabled it."""
        self._admin(who)
        fields = {
            f: tuple(v) if isinstance(v, list) else v for f, v in given_fields(changes).items()
        }
        if changes.enabled is True:
            fields["disabled_reason"] = None

        def changed(current: WebhookEndpoint) -> WebhookEndpoint:
            now = self._clock.now()
            return self._check(msgspec.structs.replace(current, **fields, updated_at=now))

        return await self._change(who.org_id, endpoint_id, changed)

    async def delete(self, who: Principal, endpoint_id: UUID) -> None:
        self._admin(who)
        await self._store.delete_endpoint(who.org_id, endpoint_id)
        self._changed()

    async def rotate_secret(self, who: Principal, endpoint_id: UUID) -> tuple[WebhookEndpoint, str]:
        """A new secret, answered once; the old one signs nothing from now on."""
        self._admin(who)
        secret = new_secret()
        sealed = self._sealed(who.org_id, endpoint_id, secret)
        updated = await self._change(
            who.org_id,
            endpoint_id,
            lambda c: msgspec.structs.replace(c, secret=sealed, updated_at=self._clock.now()),
        )
        return updated, secret

    async def deliveries(
        self,
        who: Principal,
        endpoint_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> tuple[list[EventDelivery], bool]:
        """Newest first; and whether there are more."""
        self._admin(who)
        await self._store.get_endpoint(who.org_id, endpoint_id)
        return await self._store.deliveries(who.org_id, endpoint_id, before=before, limit=limit)

    async def resend(self, who: Principal, endpoint_id: UUID, delivery_id: UUID) -> EventDelivery:
        """A new delivery of the same event (the same ``webhook-id``), queued now."""
        self._admin(who)
        endpoint = await self._store.get_endpoint(who.org_id, endpoint_id)
        earlier = await self._store.get_delivery(who.org_id, delivery_id)
        if earlier.endpoint_id != endpoint.id:
            raise InvalidInput("deliveryId", "is not a delivery of this endpoint")
        now = self._clock.now()
        delivery = EventDelivery(
            id=uuid.uuid4(),
            org_id=who.org_id,
            endpoint_id=endpoint.id,
            event_id=earlier.event_id,
            event_type=earlier.event_type,
            status="pending",
            attempts=(),
            next_attempt_at=now,
            created_at=now,
            updated_at=now,
        )
        await self._store.add_delivery(delivery)
        await enqueue_delivery(self._jobs, delivery)
        return delivery

    async def rotate_secrets(self, org_id: str | None = None) -> int:
        """Re-seal every endpoint's secret with the newest key. Returns how many."""
        rows = await self._store.sealed_secrets(org_id)
        return await reseal_rows(self._box, rows, secret_context, self._store.reseal)
