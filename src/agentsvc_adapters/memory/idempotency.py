"""Idempotency keys in memory (one process: a claim needs no lock)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.ports.idempotency import IdempotencyClaim, IdempotencyRecord, IdempotencyStore


class MemoryIdempotency(IdempotencyStore):
    def __init__(self) -> None:
        # (organization, key) -> (record, expires at)
        self._keys: dict[tuple[str, str], tuple[IdempotencyRecord, datetime]] = {}

    def take(self, org_id: str, claim: IdempotencyClaim, run_id: UUID | None) -> bool:
        """Claim the key (for the run ``run_id``, of a send); False when it is held."""
        held = self._keys.get((org_id, claim.key))
        if held is not None and held[1] >= claim.at:
            return False
        record = IdempotencyRecord(fingerprint=claim.fingerprint, run_id=run_id)
        self._keys[(org_id, claim.key)] = (record, claim.expires_at)
        return True

    async def claim(self, org_id: str, claim: IdempotencyClaim) -> IdempotencyRecord | None:
        if self.take(org_id, claim, None):
            return None
        return self._keys[(org_id, claim.key)][0]

    async def find(self, org_id: str, key: str, now: datetime) -> IdempotencyRecord | None:
        held = self._keys.get((org_id, key))
        return None if held is None or held[1] < now else held[0]

    async def complete(
        self, org_id: str, key: str, status: int, content_type: str, body: str
    ) -> None:
        held = self._keys.get((org_id, key))
        if held is not None:
            done = msgspec.structs.replace(
                held[0], status=status, content_type=content_type, body=body
            )
            self._keys[(org_id, key)] = (done, held[1])

    async def release(self, org_id: str, key: str) -> None:
        self._keys.pop((org_id, key), None)

    def drop_runs(self, org_id: str, run_ids: list[UUID]) -> int:
        """Forget the keys of these runs' sends (a deleted thread's); how many."""
        wanted = set(run_ids)
        held = [k for k, (r, _) in self._keys.items() if k[0] == org_id and r.run_id in wanted]
        for k in held:
            del self._keys[k]
        return len(held)

    async def purge_keys(self, now: datetime) -> int:
        old = [k for k, (_, expires) in self._keys.items() if expires < now]
        for k in old:
            del self._keys[k]
        return len(old)
