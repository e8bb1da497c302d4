"""Idempotency keys on PostgreSQL (``idempotency_keys``, migration 0007)."""

from __future__ import annotations

from datetime import datetime

from agentsvc_adapters.postgres._rows import KEY_CLAIM, key_claim_params
from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.ports.idempotency import IdempotencyClaim, IdempotencyRecord, IdempotencyStore

_FIND = (
    "SELECT fingerprint, run_id, status, content_type, body FROM idempotency_keys"
    " WHERE org_id = %s AND key = %s AND expires_at >= %s"
)


def _record(r: Row) -> IdempotencyRecord:
    return IdempotencyRecord(
        fingerprint=bytes(r[0]), run_id=r[1], status=r[2], content_type=r[3], body=r[4]
    )


class PostgresIdempotency(Repo, IdempotencyStore):
    async def claim(self, org_id: str, claim: IdempotencyClaim) -> IdempotencyRecord | None:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(KEY_CLAIM, key_claim_params(org_id, claim, None))
            if await cur.fetchone() is not None:
                return None
            cur = await conn.execute(_FIND, (org_id, claim.key, claim.at))
            row = await cur.fetchone()
        # held a moment ago and released since: taken by nobody now, so by this one
        return _record(row) if row is not None else await self.claim(org_id, claim)

    async def find(self, org_id: str, key: str, now: datetime) -> IdempotencyRecord | None:
        row = await self._one(_FIND, (org_id, key, now))
        return None if row is None else _record(row)

    async def complete(
        self, org_id: str, key: str, status: int, content_type: str, body: str
    ) -> None:
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                "UPDATE idempotency_keys SET status = %s, content_type = %s, body = %s"
                " WHERE org_id = %s AND key = %s",
                (status, content_type, body, org_id, key),
            )

    async def release(self, org_id: str, key: str) -> None:
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                "DELETE FROM idempotency_keys WHERE org_id = %s AND key = %s", (org_id, key)
            )

    async def purge_keys(self, now: datetime) -> int:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute("DELETE FROM idempotency_keys WHERE expires_at < %s", (now,))
            return cur.rowcount
