"""A fake ``EventPublisher`` that records what the areas publish (event webhooks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.ports.event_webhooks import EventPublisher


class Event(msgspec.Struct, frozen=True):
    org_id: str
    type: str
    data: dict[str, Any]
    thread_id: UUID | None
    key: str | None


class Published(EventPublisher):
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def publish(
        self,
        org_id: str,
        type: str,
        data: Mapping[str, Any],
        *,
        thread_id: UUID | None = None,
        key: str | None = None,
    ) -> None:
        self.events.append(Event(org_id, type, dict(data), thread_id, key))

    def types(self) -> list[str]:
        return [e.type for e in self.events]
