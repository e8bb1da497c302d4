from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import msgspec

from agentsvc_adapters.memory.mcps import unique_slug
from agentsvc_core.entities import Integration
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports import IntegrationStore


class MemoryIntegrations(IntegrationStore):
    def __init__(self) -> None:
        self._items: dict[tuple[str, UUID], Integration] = {}

    def _of(self, org_id: str) -> list[Integration]:
        return [i for (o, _), i in self._items.items() if o == org_id]

    async def add(self, integration: Integration) -> Integration:
        mine = self._of(integration.org_id)
        if any(i.name == integration.name for i in mine):
            raise Conflict(f"an integration named {integration.name!r} exists already")
        stored = msgspec.structs.replace(
            integration, slug=unique_slug(integration.slug, {i.slug for i in mine})
        )
        self._items[(integration.org_id, integration.id)] = stored
        return stored

    async def get(self, org_id: str, integration_id: UUID) -> Integration:
        try:
            return self._items[(org_id, integration_id)]
        except KeyError:
            raise NotFound("integration not found") from None

    async def get_many(self, org_id: str, ids: list[UUID]) -> list[Integration]:
        found = (self._items.get((org_id, i)) for i in dict.fromkeys(ids))
        return [i for i in found if i is not None]

    async def list_all(self, org_id: str) -> list[Integration]:
        return sorted(self._of(org_id), key=lambda i: (i.created_at, i.id))

    async def modify(
        self, org_id: str, integration_id: UUID, change: Callable[[Integration], Integration]
    ) -> Integration:
        current = await self.get(org_id, integration_id)
        updated = change(current)
        others = [i for i in self._of(org_id) if i.id != integration_id]
        if any(i.name == updated.name for i in others):
            raise Conflict(f"an integration named {updated.name!r} exists already")
        if updated.slug != current.slug:
            slug = unique_slug(updated.slug, {i.slug for i in others})
            updated = msgspec.structs.replace(updated, slug=slug)
        self._items[(org_id, integration_id)] = updated
        return updated

    async def delete(self, org_id: str, integration_id: UUID) -> None:
        if self._items.pop((org_id, integration_id), None) is None:
            raise NotFound("integration not found")

    async def sealed_connections(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        return sorted(
            (i.org_id, i.id, i.connection)
            for i in self._items.values()
            if org_id is None or i.org_id == org_id
        )

    async def reseal(self, org_id: str, integration_id: UUID, old: str, new: str) -> bool:
        found = self._items.get((org_id, integration_id))
        if found is None or found.connection != old:
            return False
        self._items[(org_id, integration_id)] = msgspec.structs.replace(found, connection=new)
        return True
