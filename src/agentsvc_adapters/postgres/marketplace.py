"""Marketplace profiles on PostgreSQL (``marketplace_profiles``; migration 0018).
The unique index on ``handle`` is what makes a handle one agent's: a second agent
that takes it fails on the index (``HANDLE_TAKEN``), whichever commits second."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec
import psycopg

from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.entities.marketplace import Avatar, MarketplaceProfile
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.marketplace import MarketplaceStore

_COLS = (
    "agent_id, org_id, handle, display_name, tagline, description, categories,"
    " capabilities, listed, avatar_type, avatar_sha256, updated_at"
)
_INSERT = (
    "INSERT INTO marketplace_profiles (agent_id, org_id, handle, display_name, tagline,"
    " description, categories, capabilities, listed, avatar_type, avatar_sha256,"
    " updated_at, avatar)"
    " VALUES (%(agent_id)s, %(org_id)s, %(handle)s, %(display_name)s, %(tagline)s,"
    " %(description)s, %(categories)s, %(capabilities)s, %(listed)s, %(avatar_type)s,"
    " %(avatar_sha256)s, %(updated_at)s, %(avatar)s)"
    " ON CONFLICT (org_id, agent_id) DO UPDATE SET handle = EXCLUDED.handle,"
    " display_name = EXCLUDED.display_name, tagline = EXCLUDED.tagline,"
    " description = EXCLUDED.description, categories = EXCLUDED.categories,"
    " capabilities = EXCLUDED.capabilities, listed = EXCLUDED.listed,"
    " updated_at = EXCLUDED.updated_at"
)
# the profile's fields: a stored avatar is left as it is
_PUT = _INSERT + f" RETURNING {_COLS}"
# the fields and a new picture
_PUT_AVATAR = (
    _INSERT + ", avatar_type = EXCLUDED.avatar_type, avatar_sha256 = EXCLUDED.avatar_sha256,"
    " avatar = EXCLUDED.avatar"
)


def _profile(row: Row) -> MarketplaceProfile:
    return MarketplaceProfile(
        agent_id=row[0],
        org_id=row[1],
        handle=row[2],
        display_name=row[3],
        tagline=row[4],
        description=row[5],
        categories=tuple(row[6]),
        capabilities=tuple(row[7]),
        listed=row[8],
        avatar=None if row[9] is None else Avatar(content_type=row[9], sha256=row[10]),
        updated_at=row[11],
    )


def _params(p: MarketplaceProfile, data: bytes | None) -> dict[str, object]:
    return {
        "agent_id": p.agent_id,
        "org_id": p.org_id,
        "handle": p.handle,
        "display_name": p.display_name,
        "tagline": p.tagline,
        "description": p.description,
        "categories": list(p.categories),
        "capabilities": list(p.capabilities),
        "listed": p.listed,
        "avatar_type": None if p.avatar is None else p.avatar.content_type,
        "avatar_sha256": None if p.avatar is None else p.avatar.sha256,
        "updated_at": p.updated_at,
        "avatar": data,
    }


class PostgresMarketplace(Repo, MarketplaceStore):
    async def get(self, org_id: str, agent_id: UUID) -> MarketplaceProfile | None:
        row = await self._one(
            f"SELECT {_COLS} FROM marketplace_profiles WHERE org_id = %s AND agent_id = %s",
            (org_id, agent_id),
        )
        return None if row is None else _profile(row)

    async def _write(self, sql: str, params: dict[str, object]) -> Row | None:
        async with translate(), self._pool.connection() as conn:
            try:
                cur = await conn.execute(sql, params)
            except psycopg.errors.UniqueViolation:  # the handle's index
                raise Conflict("the handle is taken", code="HANDLE_TAKEN") from None
            except psycopg.errors.ForeignKeyViolation:  # the agent went
                raise NotFound("agent not found") from None
            return await cur.fetchone() if cur.description else None

    async def put(self, profile: MarketplaceProfile) -> MarketplaceProfile:
        # a new row has no avatar, whatever ``profile`` read
        row = await self._write(_PUT, _params(msgspec.structs.replace(profile, avatar=None), None))
        assert row is not None
        return _profile(row)

    async def put_avatar(self, profile: MarketplaceProfile, data: bytes) -> None:
        await self._write(_PUT_AVATAR, _params(profile, data))

    async def clear_avatar(self, org_id: str, agent_id: UUID, at: datetime) -> bool:
        row = await self._one(
            "UPDATE marketplace_profiles SET avatar = NULL, avatar_type = NULL,"
            " avatar_sha256 = NULL, updated_at = %s"
            " WHERE org_id = %s AND agent_id = %s AND avatar_sha256 IS NOT NULL RETURNING 1",
            (at, org_id, agent_id),
        )
        return row is not None

    async def avatar(self, org_id: str, agent_id: UUID) -> tuple[str, bytes] | None:
        row = await self._one(
            "SELECT avatar_type, avatar FROM marketplace_profiles"
            " WHERE org_id = %s AND agent_id = %s AND avatar IS NOT NULL",
            (org_id, agent_id),
        )
        return None if row is None else (row[0], bytes(row[1]))

    async def public_avatar(self, agent_id: UUID, sha256: str) -> tuple[str, bytes] | None:
        row = await self._one(
            "SELECT avatar_type, avatar FROM marketplace_profiles"
            " WHERE agent_id = %s AND avatar_sha256 = %s AND avatar IS NOT NULL",
            (agent_id, sha256),
        )
        return None if row is None else (row[0], bytes(row[1]))

    async def delete(self, org_id: str, agent_id: UUID) -> bool:
        row = await self._one(
            "DELETE FROM marketplace_profiles WHERE org_id = %s AND agent_id = %s RETURNING 1",
            (org_id, agent_id),
        )
        return row is not None
