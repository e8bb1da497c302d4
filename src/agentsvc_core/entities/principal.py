from __future__ import annotations

from typing import Literal
from uuid import UUID

import msgspec

AuthMethod = Literal["api_key", "jwt"]


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """Who is calling: every request resolves to one of these."""

    org_id: str
    method: AuthMethod
    user_id: str | None = None
    key_id: UUID | None = None

    @property
    def is_org_admin(self) -> bool:
        """API keys act for the whole organization; JWT users act for themselves."""
        return self.method == "api_key"
