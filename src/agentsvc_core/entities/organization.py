from __future__ import annotations

from datetime import datetime

import msgspec


class Organization(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant. Its id is a caller-chosen string (``default``, ``acme``...)."""

    id: str
    created_at: datetime
