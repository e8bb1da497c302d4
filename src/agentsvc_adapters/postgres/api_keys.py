"""API keys on PostgreSQL (their hashes: the plaintext is never stored)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from agentsvc_adapters.postgres._rows import KEY_COLS, to_key
from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.entities import ApiKey
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import ApiKeyRepository


class PostgresApiKeys(Repo, ApiKeyRepository):
    async def add(self, key: ApiKey) -> None:
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                f"INSERT INTO api_keys ({KEY_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (key_hash) DO NOTHING",
                (
                    key.id,
                    key.org_id,
                    key.name,
                    key.display_prefix,
                    key.key_hash,
                    key.created_at,
                    key.revoked_at,
                ),
            )

    async def find_by_hash(self, key_hash: str) -> ApiKey | None:
        row = await self._one(f"SELECT {KEY_COLS} FROM api_keys WHERE key_hash = %s", (key_hash,))
        return None if row is None else to_key(row)

    async def list(self, org_id: str) -> list[ApiKey]:
        rows = await self._all(
            f"SELECT {KEY_COLS} FROM api_keys WHERE org_id = %s ORDER BY created_at, id",
            (org_id,),
        )
        return [to_key(r) for r in rows]

    async def revoke(self, org_id: str, key_id: UUID, at: datetime) -> ApiKey:
        row = await self._one(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, %s)"
            f" WHERE org_id = %s AND id = %s RETURNING {KEY_COLS}",
            (at, org_id, key_id),
        )
        if row is None:
            raise NotFound("API key not found")
        return to_key(row)
