"""Skills on PostgreSQL (``skills``, ``skill_versions``; migration 0021).

A skill's row names its current version; the content is that version's row. The
unique index on ``(org_id, name)`` makes a name one skill's (``SKILL_NAME_TAKEN``),
whichever commits second. ``modify`` locks the skill's row, so two changes of one
skill (a sync and a rename) are applied one after the other, and a new version is
inserted in the same transaction as the row that names it. A version's files are
one MessagePack map (path -> bytes): they are always read and written together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

import msgspec
import psycopg

from agentsvc_adapters.postgres.pool import Connection, Repo, Row, translate
from agentsvc_core.entities.skill import Skill, SkillBinding, SkillContent, SkillEntry, SkillOrigin
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.skills import SkillStore

__all__ = ["PostgresSkills"]

_SKILL = (
    "s.id, s.org_id, s.name, s.renamed, s.source::text, s.version, s.status, s.sync_error,"
    " s.last_synced_at, s.created_at, s.updated_at"
)
_CONTENT = (
    "v.name, v.description, v.body, v.allowed_tools, v.front_matter::text, v.files, v.content_hash"
)
_FROM = (
    " FROM skills s JOIN skill_versions v"
    " ON v.org_id = s.org_id AND v.skill_id = s.id AND v.version = s.version"
)
_source = msgspec.json.Decoder(SkillOrigin).decode
_object = msgspec.json.Decoder(dict[str, Any]).decode
_files = msgspec.msgpack.Decoder(dict[str, bytes]).decode
_json = msgspec.json.Encoder().encode
_pack = msgspec.msgpack.Encoder().encode


def _content(row: Row) -> SkillContent:
    return SkillContent(
        name=row[0],
        description=row[1],
        body=row[2],
        allowed_tools=tuple(row[3]),
        front_matter=_object(row[4]),
        files=_files(row[5]),
        content_hash=row[6],
    )


def _skill(row: Row) -> Skill:
    return Skill(
        id=row[0],
        org_id=row[1],
        name=row[2],
        renamed=row[3],
        source=_source(row[4]),
        version=row[5],
        status=row[6],
        sync_error=row[7],
        last_synced_at=row[8],
        created_at=row[9],
        updated_at=row[10],
        content=_content(row[11:]),
    )


def _taken(name: str) -> Conflict:
    return Conflict(f"a skill named {name!r} exists already", "SKILL_NAME_TAKEN")


async def _insert_version(conn: Connection, skill: Skill) -> None:
    c = skill.content
    await conn.execute(
        "INSERT INTO skill_versions (org_id, skill_id, version, name, description, body,"
        " allowed_tools, front_matter, files, content_hash)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s)",
        (
            skill.org_id,
            skill.id,
            skill.version,
            c.name,
            c.description,
            c.body,
            list(c.allowed_tools),
            _json(c.front_matter).decode(),
            _pack(c.files),
            c.content_hash,
        ),
    )


class PostgresSkills(Repo, SkillStore):
    async def add(self, skill: Skill) -> None:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            try:
                await conn.execute(
                    "INSERT INTO skills (org_id, id, name, renamed, source, version, status,"
                    " sync_error, last_synced_at, created_at, updated_at)"
                    " VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s)",
                    (
                        skill.org_id,
                        skill.id,
                        skill.name,
                        skill.renamed,
                        _json(skill.source).decode(),
                        skill.version,
                        skill.status,
                        skill.sync_error,
                        skill.last_synced_at,
                        skill.created_at,
                        skill.updated_at,
                    ),
                )
            except psycopg.errors.UniqueViolation:
                raise _taken(skill.name) from None
            await _insert_version(conn, skill)

    async def get(self, org_id: str, skill_id: UUID) -> Skill:
        row = await self._one(
            f"SELECT {_SKILL}, {_CONTENT}{_FROM} WHERE s.org_id = %s AND s.id = %s",
            (org_id, skill_id),
        )
        if row is None:
            raise NotFound("skill not found")
        return _skill(row)

    async def modify(self, org_id: str, skill_id: UUID, change: Callable[[Skill], Skill]) -> Skill:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            # the lock first, then the read: a SELECT of the join FOR UPDATE that waited
            # for another change would recheck the join against the version it read
            # before that change, and find nothing
            await conn.execute(
                "SELECT 1 FROM skills WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, skill_id),
            )
            cur = await conn.execute(
                f"SELECT {_SKILL}, {_CONTENT}{_FROM} WHERE s.org_id = %s AND s.id = %s",
                (org_id, skill_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("skill not found")
            current = _skill(row)
            updated = change(current)
            if updated.version > current.version:
                await _insert_version(conn, updated)
            else:
                updated = msgspec.structs.replace(updated, content=current.content)
            try:
                await conn.execute(
                    "UPDATE skills SET name = %s, renamed = %s, source = %s::jsonb,"
                    " version = %s, status = %s, sync_error = %s, last_synced_at = %s,"
                    " updated_at = %s WHERE org_id = %s AND id = %s",
                    (
                        updated.name,
                        updated.renamed,
                        _json(updated.source).decode(),
                        updated.version,
                        updated.status,
                        updated.sync_error,
                        updated.last_synced_at,
                        updated.updated_at,
                        org_id,
                        skill_id,
                    ),
                )
            except psycopg.errors.UniqueViolation:
                raise _taken(updated.name) from None
            return updated

    async def delete(self, org_id: str, skill_id: UUID) -> None:
        row = await self._one(
            "DELETE FROM skills WHERE org_id = %s AND id = %s RETURNING id", (org_id, skill_id)
        )
        if row is None:
            raise NotFound("skill not found")

    async def version(self, org_id: str, skill_id: UUID, version: int) -> SkillContent | None:
        row = await self._one(
            f"SELECT {_CONTENT} FROM skill_versions v"
            " WHERE v.org_id = %s AND v.skill_id = %s AND v.version = %s",
            (org_id, skill_id, version),
        )
        return None if row is None else _content(row)

    async def entries(self, org_id: str, bindings: Sequence[SkillBinding]) -> list[SkillEntry]:
        on = [b for b in bindings if b.enabled]
        if not on:
            return []
        rows = await self._all(
            "SELECT s.id, s.name, v.description, v.version"
            " FROM unnest(%s::uuid[], %s::int[]) WITH ORDINALITY AS b (skill_id, pinned, n)"
            " JOIN skills s ON s.org_id = %s AND s.id = b.skill_id AND s.status <> 'disabled'"
            " JOIN skill_versions v ON v.org_id = s.org_id AND v.skill_id = s.id"
            " AND v.version = coalesce(b.pinned, s.version)"
            " ORDER BY b.n",
            ([b.skill_id for b in on], [b.pinned_version for b in on], org_id),
        )
        return [SkillEntry(skill_id=r[0], name=r[1], description=r[2], version=r[3]) for r in rows]

    async def list(self, org_id: str) -> list[Skill]:
        rows = await self._all(
            f"SELECT {_SKILL}, {_CONTENT}{_FROM} WHERE s.org_id = %s ORDER BY s.created_at, s.id",
            (org_id,),
        )
        return [_skill(r) for r in rows]
