"""Sealed JSON records of an organization, in the ``SecretStore``.

One convention for every such record (OAuth states, tokens and clients, the
signing secret, resolver and compaction settings, compaction checkpoints, the
agents' tool configurations): the
value is the msgspec JSON of a Struct sealed by the ``SecretBox``, with the
associated data ``"{org}:{kind}:{key}"``, so a record opens only where it was
written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar
from uuid import UUID

import msgspec

from agentsvc_core.errors import Conflict
from agentsvc_core.ports import SealedRecord, SecretBox, SecretStore

S = TypeVar("S", bound=msgspec.Struct)
Row = tuple[str, UUID, str]  # (organization, row id, sealed value)


async def reseal_rows(
    box: SecretBox,
    rows: list[Row],
    context: Callable[[str, UUID], str],
    reseal: Callable[[str, UUID, str, str], Awaitable[bool]],
) -> int:
    """Re-seal with the newest key each row's sealed value that another key sealed
    (the key-rotation command), each only if it is still the value read
    (``reseal(org, id, old, new)`` compares and sets). Returns how many."""
    count = 0
    for org, row_id, sealed in rows:
        if box.is_current(sealed):
            continue
        where = context(org, row_id)
        if await reseal(org, row_id, sealed, box.seal(box.open(sealed, where), where)):
            count += 1
    return count


class SealedRecords:
    def __init__(self, store: SecretStore, box: SecretBox) -> None:
        self.store = store
        self._box = box

    def seal(self, org: str, kind: str, key: str, value: msgspec.Struct) -> str:
        return self._box.seal(msgspec.json.encode(value), f"{org}:{kind}:{key}")

    def open(self, org: str, kind: str, key: str, sealed: str, typ: type[S]) -> S:
        """Raises ``SecretUnreadable`` when the record does not belong here."""
        return msgspec.json.decode(self._box.open(sealed, f"{org}:{kind}:{key}"), type=typ)

    async def get(self, org: str, kind: str, key: str, typ: type[S]) -> S | None:
        found = await self.store.get(org, kind, key)
        return None if found is None else self.open(org, kind, key, found.value, typ)

    async def put(
        self,
        org: str,
        kind: str,
        key: str,
        value: msgspec.Struct,
        expires_at: datetime | None = None,
    ) -> None:
        sealed = SealedRecord(value=self.seal(org, kind, key, value), expires_at=expires_at)
        await self.store.put(org, kind, key, sealed)

    async def change(
        self,
        org: str,
        kind: str,
        key: str,
        typ: type[S],
        fn: Callable[[S | None], S],
        *,
        attempts: int = 20,
    ) -> S:
        """Read, change with ``fn`` (given None when there is no record), write,
        without losing a concurrent change: the write is a compare-and-set on the
        sealed value read (``swap``), retried with ``fn`` applied to what won. The
        first write of an absent record is an insert that only one writer wins
        (``put_new``); the others run ``fn`` again on what it wrote.
        ``fn`` may raise to refuse the change; it must not have side effects."""
        for _ in range(attempts):
            found = await self.store.get(org, kind, key)
            current = None if found is None else self.open(org, kind, key, found.value, typ)
            new = fn(current)
            sealed = SealedRecord(value=self.seal(org, kind, key, new))
            if found is None:
                if await self.store.put_new(org, kind, key, sealed):
                    return new
            elif await self.store.swap(org, kind, key, found.value, sealed):
                return new
        raise Conflict("the setting is being changed by another request; try again")

    async def rotate(self, org_id: str | None = None) -> int:
        """Re-seal every record not sealed with the newest key (the key-rotation
        command), each only if it has not changed meanwhile. Returns how many."""
        count = 0
        for org, kind, key, record in await self.store.every(org_id):
            if self._box.is_current(record.value):
                continue
            context = f"{org}:{kind}:{key}"
            fresh = SealedRecord(
                value=self._box.seal(self._box.open(record.value, context), context),
                expires_at=record.expires_at,
            )
            if await self.store.swap(org, kind, key, record.value, fresh):
                count += 1
        return count
