"""Sealed records: small secrets of an organization, kept by storage.

Two ports meet in ``use_cases/sealed.py``: ``SecretBox`` (``ports.secrets``, the
crypto adapter) seals and opens a value; ``SecretStore`` (here, each storage
adapter) keeps what it sealed, as a ``SealedRecord``, and never sees plaintext.
They are separate modules because they are separate roles with separate
adapters; this one is named after the use case module that joins them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import msgspec

__all__ = ["SealedRecord", "SecretStore"]


class SealedRecord(msgspec.Struct, frozen=True, kw_only=True):
    value: str  # sealed (SecretBox), never plaintext
    expires_at: datetime | None = None


class SecretStore(Protocol):
    """Small sealed records of an organization, by (kind, key): OAuth states, clients
    and tokens, the organization's and agents' sealed settings. Implemented by each
    storage adapter (``Storage.secrets``); raises what storage raises
    (``StorageError``, ``Unavailable``), never ``NotFound``: a missing record is
    ``None``."""

    async def put(self, org_id: str, kind: str, key: str, record: SealedRecord) -> None: ...

    async def get(self, org_id: str, kind: str, key: str) -> SealedRecord | None: ...

    async def put_new(self, org_id: str, kind: str, key: str, record: SealedRecord) -> bool:
        """Store the record only if there is none: of concurrent writers, one wins."""
        ...

    async def get_many(
        self, org_id: str, wanted: list[tuple[str, str]]
    ) -> dict[tuple[str, str], SealedRecord]:
        """Several (kind, key) records in one read; missing ones are absent."""
        ...

    async def take(self, org_id: str, kind: str, key: str) -> SealedRecord | None:
        """Read and delete in one step: of concurrent takers, one gets the record."""
        ...

    async def swap(self, org_id: str, kind: str, key: str, old: str, new: SealedRecord) -> bool:
        """Replace the record if its value is still ``old`` (compare-and-set)."""
        ...

    async def every(self, org_id: str | None) -> list[tuple[str, str, str, SealedRecord]]:
        """(org, kind, key, record) of every record, all organizations when
        ``org_id`` is None (the key-rotation command)."""
        ...

    async def prefixed(self, org_id: str, kind: str, prefixes: list[str]) -> set[str]:
        """Which of ``prefixes`` (taken literally) start the key of at least one
        record of ``kind``, in one read."""
        ...

    async def delete_prefix(self, org_id: str, kind: str, prefix: str) -> int:
        """Delete the records of ``kind`` whose key starts with ``prefix`` (taken
        literally: no pattern characters); returns how many."""
        ...
