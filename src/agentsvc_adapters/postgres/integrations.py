"""Database integrations on PostgreSQL. Names are unique per organization (a
constraint: 409); slugs too, a colliding one gets ``-2``, ``-3``... appended."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import msgspec
import psycopg

from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.entities import Integration
from agentsvc_core.errors import Conflict, NotFound, StorageError
from agentsvc_core.ports import IntegrationStore

_COLS = (
    "org_id, id, name, slug, type, connection, allowed_tables::text, max_rows, max_bytes,"
    " statement_timeout_ms, created_at, updated_at"
)
_names = msgspec.json.Decoder(tuple[str, ...])
_MAX_SUFFIX = 1000


def _row(r: Row) -> Integration:
    return Integration(
        org_id=r[0],
        id=r[1],
        name=r[2],
        slug=r[3],
        type=r[4],
        connection=r[5],
        allowed_tables=None if r[6] is None else _names.decode(r[6]),
        max_rows=r[7],
        max_bytes=r[8],
        statement_timeout_ms=r[9],
        created_at=r[10],
        updated_at=r[11],
    )


def _values(i: Integration, slug: str) -> tuple[Any, ...]:
    tables = None if i.allowed_tables is None else msgspec.json.encode(i.allowed_tables).decode()
    return (
        i.org_id,
        i.id,
        i.name,
        slug,
        i.type,
        i.connection,
        tables,
        i.max_rows,
        i.max_bytes,
        i.statement_timeout_ms,
        i.created_at,
        i.updated_at,
    )


class PostgresIntegrations(Repo, IntegrationStore):
    async def add(self, integration: Integration) -> Integration:
        async with translate(), self._pool.connection() as conn:
            for n in range(1, _MAX_SUFFIX):
                slug = integration.slug if n == 1 else f"{integration.slug}-{n}"
                try:
                    cur = await conn.execute(
                        f"INSERT INTO integrations ({_COLS.replace('::text', '')}) VALUES"
                        " (%s, %s, %s, %s, %s, %s, %s::json, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (org_id, slug) DO NOTHING RETURNING id",
                        _values(integration, slug),
                    )
                except psycopg.errors.UniqueViolation:  # the name: the slug's is handled
                    raise Conflict(
                        f"an integration named {integration.name!r} exists already"
                    ) from None
                if await cur.fetchone() is not None:
                    return msgspec.structs.replace(integration, slug=slug)
        raise StorageError("no free slug for the integration")

    async def get(self, org_id: str, integration_id: UUID) -> Integration:
        row = await self._one(
            f"SELECT {_COLS} FROM integrations WHERE org_id = %s AND id = %s",
            (org_id, integration_id),
        )
        if row is None:
            raise NotFound("integration not found")
        return _row(row)

    async def get_many(self, org_id: str, ids: list[UUID]) -> list[Integration]:
        if not ids:
            return []
        rows = await self._all(
            f"SELECT {_COLS} FROM integrations WHERE org_id = %s AND id = ANY(%s)",
            (org_id, list(ids)),
        )
        found = {r[1]: _row(r) for r in rows}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    async def list_all(self, org_id: str) -> list[Integration]:
        rows = await self._all(
            f"SELECT {_COLS} FROM integrations WHERE org_id = %s ORDER BY created_at, id",
            (org_id,),
        )
        return [_row(r) for r in rows]

    async def modify(
        self, org_id: str, integration_id: UUID, change: Callable[[Integration], Integration]
    ) -> Integration:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            # the row locked until the change is written: concurrent changes queue
            cur = await conn.execute(
                f"SELECT {_COLS} FROM integrations WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, integration_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("integration not found")
            current = _row(row)
            updated = change(current)
            for n in range(1, _MAX_SUFFIX):
                unchanged = n == 1 or updated.slug == current.slug
                slug = updated.slug if unchanged else f"{updated.slug}-{n}"
                try:
                    async with conn.transaction():  # a savepoint: a slug clash is retried
                        await conn.execute(
                            "UPDATE integrations SET name = %s, slug = %s, type = %s,"
                            " connection = %s, allowed_tables = %s::json, max_rows = %s,"
                            " max_bytes = %s, statement_timeout_ms = %s, updated_at = %s"
                            " WHERE org_id = %s AND id = %s",
                            (
                                *_values(updated, slug)[2:10],  # name ... statement_timeout_ms
                                updated.updated_at,
                                org_id,
                                integration_id,
                            ),
                        )
                except psycopg.errors.UniqueViolation as exc:
                    if exc.diag.constraint_name == "integrations_org_name":
                        raise Conflict(
                            f"an integration named {updated.name!r} exists already"
                        ) from None
                    continue
                return msgspec.structs.replace(updated, slug=slug)
        raise StorageError("no free slug for the integration")

    async def delete(self, org_id: str, integration_id: UUID) -> None:
        row = await self._one(
            "DELETE FROM integrations WHERE org_id = %s AND id = %s RETURNING id",
            (org_id, integration_id),
        )
        if row is None:
            raise NotFound("integration not found")

    async def sealed_connections(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        rows = await self._all(
            "SELECT org_id, id, connection FROM integrations"
            " WHERE (%(org)s::text IS NULL OR org_id = %(org)s) ORDER BY org_id, id",
            {"org": org_id},
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def reseal(self, org_id: str, integration_id: UUID, old: str, new: str) -> bool:
        row = await self._one(
            "UPDATE integrations SET connection = %s WHERE org_id = %s AND id = %s"
            " AND connection = %s RETURNING id",
            (new, org_id, integration_id, old),
        )
        return row is not None
