from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec

API_KEY_PREFIX = "ask_"


class ApiKey(msgspec.Struct, frozen=True, kw_only=True):
    """An organization-level API key. Only the SHA-256 of the token is kept."""

    id: UUID
    org_id: str
    name: str
    # The first characters of the token, safe to show so people can tell keys apart.
    display_prefix: str
    key_hash: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None
