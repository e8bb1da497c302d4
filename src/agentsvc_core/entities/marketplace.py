"""An agent's marketplace profile (docs/marketplace.md): how the agent presents
itself in the public listing, once listed. Public by purpose: nothing in it is
sealed."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec


class Avatar(msgspec.Struct, frozen=True, kw_only=True):
    """A profile's picture as the service re-encoded it: its type and the SHA-256 of
    its bytes (which name its version in its URL). The bytes are kept apart."""

    content_type: str
    sha256: str


class MarketplaceProfile(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: UUID
    org_id: str
    handle: str | None = None  # unique across the service
    display_name: str = ""
    tagline: str = ""
    description: str = ""
    categories: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    listed: bool = False
    avatar: Avatar | None = None
    updated_at: datetime | None = None  # None: never stored (the defaults)
