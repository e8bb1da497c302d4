from __future__ import annotations

from agentsvc_adapters.postgres.pool import Repo
from agentsvc_core.ports import SealedRecord, SecretStore


class PostgresSecrets(Repo, SecretStore):
    async def put(self, org_id: str, kind: str, key: str, record: SealedRecord) -> None:
        await self._one(
            "INSERT INTO org_secrets (org_id, kind, key, value, expires_at)"
            " VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (org_id, kind, key) DO UPDATE SET value = EXCLUDED.value,"
            " expires_at = EXCLUDED.expires_at, updated_at = now() RETURNING key",
            (org_id, kind, key, record.value, record.expires_at),
        )

    async def put_new(self, org_id: str, kind: str, key: str, record: SealedRecord) -> bool:
        row = await self._one(
            "INSERT INTO org_secrets (org_id, kind, key, value, expires_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (org_id, kind, key) DO NOTHING"
            " RETURNING key",
            (org_id, kind, key, record.value, record.expires_at),
        )
        return row is not None

    async def get(self, org_id: str, kind: str, key: str) -> SealedRecord | None:
        row = await self._one(
            "SELECT value, expires_at FROM org_secrets"
            " WHERE org_id = %s AND kind = %s AND key = %s",
            (org_id, kind, key),
        )
        return None if row is None else SealedRecord(value=row[0], expires_at=row[1])

    async def get_many(
        self, org_id: str, wanted: list[tuple[str, str]]
    ) -> dict[tuple[str, str], SealedRecord]:
        if not wanted:
            return {}
        rows = await self._all(
            "SELECT kind, key, value, expires_at FROM org_secrets WHERE org_id = %s"
            " AND (kind, key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            (org_id, [k for k, _ in wanted], [k for _, k in wanted]),
        )
        return {(r[0], r[1]): SealedRecord(value=r[2], expires_at=r[3]) for r in rows}

    async def take(self, org_id: str, kind: str, key: str) -> SealedRecord | None:
        # DELETE ... RETURNING: of concurrent takers exactly one gets the row.
        row = await self._one(
            "DELETE FROM org_secrets WHERE org_id = %s AND kind = %s AND key = %s"
            " RETURNING value, expires_at",
            (org_id, kind, key),
        )
        return None if row is None else SealedRecord(value=row[0], expires_at=row[1])

    async def swap(self, org_id: str, kind: str, key: str, old: str, new: SealedRecord) -> bool:
        row = await self._one(
            "UPDATE org_secrets SET value = %s, expires_at = %s, updated_at = now()"
            " WHERE org_id = %s AND kind = %s AND key = %s AND value = %s RETURNING key",
            (new.value, new.expires_at, org_id, kind, key, old),
        )
        return row is not None

    async def every(self, org_id: str | None) -> list[tuple[str, str, str, SealedRecord]]:
        rows = await self._all(
            "SELECT org_id, kind, key, value, expires_at FROM org_secrets"
            " WHERE %s::text IS NULL OR org_id = %s",
            (org_id, org_id),
        )
        return [(r[0], r[1], r[2], SealedRecord(value=r[3], expires_at=r[4])) for r in rows]

    async def prefixed(self, org_id: str, kind: str, prefixes: list[str]) -> set[str]:
        if not prefixes:
            return set()
        rows = await self._all(
            "SELECT p FROM unnest(%s::text[]) AS p WHERE EXISTS (SELECT 1 FROM org_secrets"
            " WHERE org_id = %s AND kind = %s AND starts_with(key, p))",
            (prefixes, org_id, kind),
        )
        return {r[0] for r in rows}

    async def delete_prefix(self, org_id: str, kind: str, prefix: str) -> int:
        # starts_with takes the prefix literally (LIKE would read % and _ in it)
        rows = await self._all(
            "DELETE FROM org_secrets WHERE org_id = %s AND kind = %s"
            " AND starts_with(key, %s) RETURNING key",
            (org_id, kind, prefix),
        )
        return len(rows)
