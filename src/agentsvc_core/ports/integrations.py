"""Storage of database integrations (``Storage.integrations``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol
from uuid import UUID

from agentsvc_core.entities import Integration

__all__ = ["IntegrationStore"]


class IntegrationStore(Protocol):
    """An organization's database integrations. Raises what storage raises
    (``StorageError``, ``Unavailable``) besides the errors named here."""

    async def add(self, integration: Integration) -> Integration:
        """Store a new integration. Its slug is made unique within the organization
        (``-2``, ``-3``... appended on a collision); the stored one is returned.
        Raises ``Conflict`` when the organization has one of that name already."""
        ...

    async def get(self, org_id: str, integration_id: UUID) -> Integration:
        """Raises ``NotFound`` (another organization's id too)."""
        ...

    async def get_many(self, org_id: str, ids: list[UUID]) -> list[Integration]:
        """The organization's integrations among ``ids``, in the order of ``ids``;
        ids that name none (deleted, another organization's) are left out. One read."""
        ...

    async def list_all(self, org_id: str) -> list[Integration]:
        """Oldest first."""
        ...

    async def modify(
        self, org_id: str, integration_id: UUID, change: Callable[[Integration], Integration]
    ) -> Integration:
        """Atomic read-change-write (concurrent changes are serialised: none is
        lost); the stored one is returned. A changed slug is made unique as in
        ``add``. Raises ``NotFound``, and ``Conflict`` when another integration of
        the organization has the new name (nothing changes then)."""
        ...

    async def delete(self, org_id: str, integration_id: UUID) -> None:
        """Raises ``NotFound``."""
        ...

    async def sealed_connections(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        """(org, id, sealed connection) of every integration, all organizations
        when ``org_id`` is None (the key-rotation command)."""
        ...

    async def reseal(self, org_id: str, integration_id: UUID, old: str, new: str) -> bool:
        """Replace the sealed connection if it is still ``old``."""
        ...
