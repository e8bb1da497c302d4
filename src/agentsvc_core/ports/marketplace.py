"""Storage of agents' marketplace profiles (``Storage.marketplace``).

Scoped by organization; a profile goes when its agent goes. ``handle`` is unique
across the service (``Conflict`` with code ``HANDLE_TAKEN`` when another agent has
it). An avatar's bytes are stored beside the profile and read on their own.
Adapters raise what storage raises (``NotFound``, ``StorageError``,
``Unavailable``)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol
from uuid import UUID

from agentsvc_core.entities.marketplace import MarketplaceProfile

__all__ = ["MarketplaceStore"]


class MarketplaceStore(Protocol):
    async def get(self, org_id: str, agent_id: UUID) -> MarketplaceProfile | None:
        """The stored profile, or None."""
        ...

    async def put(self, profile: MarketplaceProfile) -> MarketplaceProfile:
        """Store the profile's fields (insert or replace), never its avatar, which
        only ``put_avatar`` and ``clear_avatar`` change (so a change of the text
        made from an older read cannot undo a new picture); answers the profile as
        stored, with its avatar. Raises ``NotFound`` when the agent is gone,
        ``Conflict`` (``HANDLE_TAKEN``) when another agent has the handle."""
        ...

    async def put_avatar(self, profile: MarketplaceProfile, data: bytes) -> None:
        """Store the profile with ``avatar`` set and the picture's bytes."""
        ...

    async def clear_avatar(self, org_id: str, agent_id: UUID, at: datetime) -> bool:
        """Remove the avatar (its bytes too), ``updated_at`` set to ``at``; False
        when there was none."""
        ...

    async def avatar(self, org_id: str, agent_id: UUID) -> tuple[str, bytes] | None:
        """(content type, bytes) of the agent's avatar, or None."""
        ...

    async def public_avatar(self, agent_id: UUID, sha256: str) -> tuple[str, bytes] | None:
        """(content type, bytes) of the avatar of ``agent_id`` (whatever its
        organization: agent ids are unique) if its digest is ``sha256``, else None."""
        ...

    async def delete(self, org_id: str, agent_id: UUID) -> bool:
        """Delete the profile and its avatar; False when there was none."""
        ...
