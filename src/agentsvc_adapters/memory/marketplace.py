"""Marketplace profiles in memory: the handle's uniqueness and the agent's
existence are checked as PostgreSQL's unique index and foreign key do."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities.marketplace import MarketplaceProfile
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.marketplace import MarketplaceStore


class MemoryMarketplace(MarketplaceStore):
    def __init__(self, agent_exists: Callable[[str, UUID], bool]) -> None:
        self._agent_exists = agent_exists
        self._profiles: dict[tuple[str, UUID], MarketplaceProfile] = {}
        self._avatars: dict[tuple[str, UUID], tuple[str, bytes]] = {}

    def all(self) -> Iterator[MarketplaceProfile]:
        """Every stored profile (the public listing reads them)."""
        return iter(list(self._profiles.values()))

    def drop_agent(self, org_id: str, agent_id: UUID) -> None:
        self._profiles.pop((org_id, agent_id), None)
        self._avatars.pop((org_id, agent_id), None)

    async def get(self, org_id: str, agent_id: UUID) -> MarketplaceProfile | None:
        return self._profiles.get((org_id, agent_id))

    def _check(self, profile: MarketplaceProfile) -> tuple[str, UUID]:
        key = (profile.org_id, profile.agent_id)
        if not self._agent_exists(*key):
            raise NotFound("agent not found")
        if profile.handle is not None and any(
            other.handle == profile.handle and k != key for k, other in self._profiles.items()
        ):
            raise Conflict("the handle is taken", code="HANDLE_TAKEN")
        return key

    async def put(self, profile: MarketplaceProfile) -> MarketplaceProfile:
        key = self._check(profile)
        stored = self._profiles.get(key)
        kept = msgspec.structs.replace(profile, avatar=stored.avatar if stored else None)
        self._profiles[key] = kept
        return kept

    async def put_avatar(self, profile: MarketplaceProfile, data: bytes) -> None:
        assert profile.avatar is not None
        key = self._check(profile)
        self._profiles[key] = profile
        self._avatars[key] = (profile.avatar.content_type, bytes(data))

    async def clear_avatar(self, org_id: str, agent_id: UUID, at: datetime) -> bool:
        stored = self._profiles.get((org_id, agent_id))
        if stored is None or stored.avatar is None:
            return False
        self._profiles[(org_id, agent_id)] = msgspec.structs.replace(
            stored, avatar=None, updated_at=at
        )
        self._avatars.pop((org_id, agent_id), None)
        return True

    async def avatar(self, org_id: str, agent_id: UUID) -> tuple[str, bytes] | None:
        return self._avatars.get((org_id, agent_id))

    async def public_avatar(self, agent_id: UUID, sha256: str) -> tuple[str, bytes] | None:
        for (org, agent), profile in self._profiles.items():
            avatar = profile.avatar
            if agent == agent_id and avatar is not None and avatar.sha256 == sha256:
                return self._avatars.get((org, agent))
        return None

    async def delete(self, org_id: str, agent_id: UUID) -> bool:
        self._avatars.pop((org_id, agent_id), None)
        return self._profiles.pop((org_id, agent_id), None) is not None
