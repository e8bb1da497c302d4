"""Database integrations: an organization's databases its agents may read."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

IntegrationType = Literal["postgresql"]


class Integration(msgspec.Struct, frozen=True, kw_only=True):
    """A database an organization's agents may query, read-only. ``connection`` is
    sealed (SecretBox, associated data ``"{org}:integrations:{id}"``): the
    ``postgresql://`` URL, never stored in clear nor shown."""

    id: UUID
    org_id: str
    name: str
    slug: str
    type: IntegrationType
    connection: str
    allowed_tables: tuple[str, ...] | None
    max_rows: int
    max_bytes: int
    statement_timeout_ms: int
    created_at: datetime
    updated_at: datetime
