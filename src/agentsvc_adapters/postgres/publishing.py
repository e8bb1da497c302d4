"""Published chats and visitor threads on PostgreSQL (``published_chats``,
``visitor_threads``; migration 0020). The unique index on ``slug`` makes a slug
one chat's: a second chat that takes it fails on the index (``SLUG_TAKEN``),
whichever commits second."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from uuid import UUID

import psycopg

from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.entities.published_chat import ListedChat, PublishedChat, VisitorThread
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.publishing import PublishingStore

_COLS = (
    "org_id, agent_id, slug, visibility, title, description, welcome_message,"
    " starter_prompts, is_active, allowed_domains, rate_limit_per_min, daily_cost_cap_usd,"
    " allow_user_grants, identity_sealed, previous_sealed, rotated_at, created_at, updated_at"
)
_SET = ", ".join(f"{c.strip()} = %s" for c in _COLS.split(",")[2:])
_VCOLS = "org_id, thread_id, agent_id, visitor_id, identified, created_at"


def _chat(r: Row) -> PublishedChat:
    return PublishedChat(
        org_id=r[0],
        agent_id=r[1],
        slug=r[2],
        visibility=r[3],
        title=r[4],
        description=r[5],
        welcome_message=r[6],
        starter_prompts=tuple(r[7]),
        is_active=r[8],
        allowed_domains=None if r[9] is None else tuple(r[9]),
        rate_limit_per_min=r[10],
        daily_cost_cap_usd=r[11],
        allow_user_grants=r[12],
        identity_sealed=r[13],
        previous_sealed=r[14],
        rotated_at=r[15],
        created_at=r[16],
        updated_at=r[17],
    )


def _values(c: PublishedChat) -> tuple[object, ...]:
    return (
        c.org_id,
        c.agent_id,
        c.slug,
        c.visibility,
        c.title,
        c.description,
        c.welcome_message,
        list(c.starter_prompts),
        c.is_active,
        None if c.allowed_domains is None else list(c.allowed_domains),
        c.rate_limit_per_min,
        c.daily_cost_cap_usd,
        c.allow_user_grants,
        c.identity_sealed,
        c.previous_sealed,
        c.rotated_at,
        c.created_at,
        c.updated_at,
    )


def _visitor(r: Row) -> VisitorThread:
    return VisitorThread(
        org_id=r[0],
        thread_id=r[1],
        agent_id=r[2],
        visitor_id=r[3],
        identified=r[4],
        created_at=r[5],
    )


@contextmanager
def _slug_taken() -> Iterator[None]:
    try:
        yield
    except psycopg.errors.UniqueViolation as exc:
        if "published_chats_slug" in str(exc.diag.constraint_name or ""):
            raise Conflict("the slug is taken", code="SLUG_TAKEN") from None
        raise Conflict("the agent is published already", code="ALREADY_PUBLISHED") from None
    except psycopg.errors.ForeignKeyViolation:
        raise NotFound("agent not found") from None


class PostgresPublishing(Repo, PublishingStore):
    async def add(self, chat: PublishedChat) -> PublishedChat:
        marks = ", ".join(["%s"] * 18)
        async with translate(), self._pool.connection() as conn:
            with _slug_taken():
                await conn.execute(
                    f"INSERT INTO published_chats ({_COLS}) VALUES ({marks})", _values(chat)
                )
        return chat

    async def get(self, org_id: str, agent_id: UUID) -> PublishedChat | None:
        row = await self._one(
            f"SELECT {_COLS} FROM published_chats WHERE org_id = %s AND agent_id = %s",
            (org_id, agent_id),
        )
        return None if row is None else _chat(row)

    async def of_agents(self, org_id: str, agent_ids: list[UUID]) -> dict[UUID, PublishedChat]:
        if not agent_ids:
            return {}
        rows = await self._all(
            f"SELECT {_COLS} FROM published_chats WHERE org_id = %s AND agent_id = ANY(%s)",
            (org_id, agent_ids),
        )
        return {r[1]: _chat(r) for r in rows}

    async def of_org(self, org_id: str) -> list[PublishedChat]:
        rows = await self._all(
            f"SELECT {_COLS} FROM published_chats WHERE org_id = %s ORDER BY created_at, agent_id",
            (org_id,),
        )
        return [_chat(r) for r in rows]

    async def by_slug(self, slug: str) -> PublishedChat | None:
        row = await self._one(f"SELECT {_COLS} FROM published_chats WHERE slug = %s", (slug,))
        return None if row is None else _chat(row)

    async def modify(
        self, org_id: str, agent_id: UUID, change: Callable[[PublishedChat], PublishedChat]
    ) -> PublishedChat:
        # the row lock serialises concurrent changes of one chat: none is lost
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_COLS} FROM published_chats WHERE org_id = %s AND agent_id = %s"
                " FOR UPDATE",
                (org_id, agent_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("the agent is not published")
            updated = change(_chat(row))
            with _slug_taken():
                await conn.execute(
                    f"UPDATE published_chats SET {_SET} WHERE org_id = %s AND agent_id = %s",
                    (*_values(updated)[2:], org_id, agent_id),
                )
            return updated

    async def delete(self, org_id: str, agent_id: UUID) -> bool:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM published_chats WHERE org_id = %s AND agent_id = %s",
                (org_id, agent_id),
            )
            return cur.rowcount > 0

    async def add_visitor_thread(self, thread: VisitorThread) -> None:
        async with translate(), self._pool.connection() as conn:
            try:
                await conn.execute(
                    f"INSERT INTO visitor_threads ({_VCOLS}) VALUES (%s, %s, %s, %s, %s, %s)",
                    (
                        thread.org_id,
                        thread.thread_id,
                        thread.agent_id,
                        thread.visitor_id,
                        thread.identified,
                        thread.created_at,
                    ),
                )
            except psycopg.errors.ForeignKeyViolation:
                raise NotFound("thread not found") from None

    async def visitor_thread(self, org_id: str, thread_id: UUID) -> VisitorThread | None:
        row = await self._one(
            f"SELECT {_VCOLS} FROM visitor_threads WHERE org_id = %s AND thread_id = %s",
            (org_id, thread_id),
        )
        return None if row is None else _visitor(row)

    async def visitor_threads(
        self, org_id: str, agent_id: UUID, *, before: datetime | None, limit: int
    ) -> list[VisitorThread]:
        rows = await self._all(
            f"SELECT {_VCOLS} FROM visitor_threads WHERE org_id = %s AND agent_id = %s"
            " AND (%s::timestamptz IS NULL OR created_at < %s)"
            " ORDER BY created_at DESC, thread_id DESC LIMIT %s",
            (org_id, agent_id, before, before, limit),
        )
        return [_visitor(r) for r in rows]

    async def visitor_cost(self, org_id: str, agent_id: UUID, since: datetime) -> float:
        row = await self._one(
            "SELECT coalesce(sum(u.cost_usd), 0) FROM visitor_threads v"
            " JOIN usage_records u ON u.org_id = v.org_id AND u.thread_id = v.thread_id"
            " WHERE v.org_id = %s AND v.agent_id = %s AND u.created_at >= %s",
            (org_id, agent_id, since),
        )
        return float(row[0]) if row is not None else 0.0

    async def sealed_identities(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        rows = await self._all(
            "SELECT org_id, agent_id, identity_sealed FROM published_chats"
            " WHERE (%(org)s::text IS NULL OR org_id = %(org)s)"
            " UNION ALL SELECT org_id, agent_id, previous_sealed FROM published_chats"
            " WHERE previous_sealed IS NOT NULL AND (%(org)s::text IS NULL OR org_id = %(org)s)"
            " ORDER BY 1, 2, 3",
            {"org": org_id},
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def reseal(self, org_id: str, agent_id: UUID, old: str, new: str) -> bool:
        row = await self._one(
            "UPDATE published_chats SET"
            " identity_sealed = CASE WHEN identity_sealed = %(old)s THEN %(new)s"
            " ELSE identity_sealed END,"
            " previous_sealed = CASE WHEN previous_sealed = %(old)s THEN %(new)s"
            " ELSE previous_sealed END"
            " WHERE org_id = %(org)s AND agent_id = %(agent)s"
            " AND (identity_sealed = %(old)s OR previous_sealed = %(old)s) RETURNING agent_id",
            {"old": old, "new": new, "org": org_id, "agent": agent_id},
        )
        return row is not None

    async def listed(
        self, *, q: str | None, category: str | None, before: datetime | None, limit: int
    ) -> list[ListedChat]:
        pattern = None if not q else "%" + _like(q.lower()) + "%"
        rows = await self._all(
            "SELECT c.agent_id, c.slug, p.handle, p.display_name, p.tagline, p.description,"
            " p.categories, p.capabilities, p.avatar_sha256, c.created_at"
            " FROM published_chats c JOIN marketplace_profiles p"
            " ON p.org_id = c.org_id AND p.agent_id = c.agent_id"
            " WHERE c.is_active AND c.visibility = 'public' AND p.listed"
            " AND (%s::timestamptz IS NULL OR c.created_at < %s)"
            " AND (%s::text IS NULL OR %s = ANY(p.categories))"
            " AND (%s::text IS NULL OR lower(p.display_name) LIKE %s"
            " OR lower(coalesce(p.handle, '')) LIKE %s OR lower(p.tagline) LIKE %s"
            " OR lower(p.description) LIKE %s)"
            " ORDER BY c.created_at DESC, c.agent_id DESC LIMIT %s",
            (
                before,
                before,
                category,
                category,
                pattern,
                pattern,
                pattern,
                pattern,
                pattern,
                limit,
            ),
        )
        return [
            ListedChat(
                agent_id=r[0],
                slug=r[1],
                handle=r[2],
                display_name=r[3],
                tagline=r[4],
                description=r[5],
                categories=tuple(r[6]),
                capabilities=tuple(r[7]),
                avatar_sha256=r[8],
                published_at=r[9],
            )
            for r in rows
        ]


def _like(text: str) -> str:
    """``text`` as a LIKE pattern's literal part."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
