"""Channels, contacts, chats and inbound events on PostgreSQL (``channels``,
``channel_contacts``, ``channel_chats``, ``channel_events``; migration 0022).

The unique keys do the races' work: a second ``whatsapp_web`` of an agent fails
on ``channels_one_whatsapp_web``; two first messages of one sender make one
contact (``ON CONFLICT (channel_id, external_id) DO UPDATE``); two first
messages of one chat claim one thread (``ON CONFLICT DO NOTHING``, then the
row read back); a redelivered event inserts nothing (``ON CONFLICT DO NOTHING``
on the event's primary key)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from uuid import UUID

import msgspec
import psycopg

from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.entities.channel import Channel, ChannelEvent, Contact, EventState
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.channels import ChannelStore

_encode = msgspec.json.Encoder().encode
_COLS = (
    "id, org_id, agent_id, type, name, status, status_reason, config, credentials_sealed,"
    " dm_policy, allow_from, group_policy, created_at, updated_at"
)
_KCOLS = (
    "id, org_id, channel_id, external_id, display_name, username, thread_id, status,"
    " pairing_code, first_seen_at, last_message_at"
)
_EFIELDS = tuple(f.name for f in msgspec.structs.fields(ChannelEvent))
_ECOLS = ", ".join(_EFIELDS)


def _channel(r: Row) -> Channel:
    return Channel(
        id=r[0],
        org_id=r[1],
        agent_id=r[2],
        type=r[3],
        name=r[4],
        status=r[5],
        status_reason=r[6],
        config=dict(r[7]),
        credentials_sealed=r[8],
        dm_policy=r[9],
        allow_from=tuple(r[10]),
        group_policy=r[11],
        created_at=r[12],
        updated_at=r[13],
    )


def _values(c: Channel) -> tuple[object, ...]:
    return (
        c.id,
        c.org_id,
        c.agent_id,
        c.type,
        c.name,
        c.status,
        c.status_reason,
        _encode(c.config).decode(),
        c.credentials_sealed,
        c.dm_policy,
        list(c.allow_from),
        c.group_policy,
        c.created_at,
        c.updated_at,
    )


def _contact(r: Row) -> Contact:
    return Contact(
        id=r[0],
        org_id=r[1],
        channel_id=r[2],
        external_id=r[3],
        display_name=r[4],
        username=r[5],
        thread_id=r[6],
        status=r[7],
        pairing_code=r[8],
        first_seen_at=r[9],
        last_message_at=r[10],
    )


def _contact_values(c: Contact) -> tuple[object, ...]:
    return (
        c.id,
        c.org_id,
        c.channel_id,
        c.external_id,
        c.display_name,
        c.username,
        c.thread_id,
        c.status,
        c.pairing_code,
        c.first_seen_at,
        c.last_message_at,
    )


def _event(r: Row) -> ChannelEvent:
    return ChannelEvent(**dict(zip(_EFIELDS, r, strict=True)))


def _event_key(e: ChannelEvent) -> tuple[str, UUID, str]:
    return (e.org_id, e.channel_id, e.event_id)


def _event_values(e: ChannelEvent) -> tuple[object, ...]:
    return tuple(getattr(e, f) for f in _EFIELDS)


_CHANNEL_MARKS = ", ".join(["%s"] * 7 + ["%s::jsonb"] + ["%s"] * 6)
_SET = ", ".join(f"{c.strip()} = %s" for c in _COLS.split(",")[3:])
_UPSERT_CONTACT = f"""
INSERT INTO channel_contacts ({_KCOLS}) VALUES ({", ".join(["%s"] * 11)})
ON CONFLICT (org_id, channel_id, external_id) DO UPDATE SET
    display_name = COALESCE(EXCLUDED.display_name, channel_contacts.display_name),
    username = COALESCE(EXCLUDED.username, channel_contacts.username),
    thread_id = COALESCE(EXCLUDED.thread_id, channel_contacts.thread_id),
    last_message_at = COALESCE(EXCLUDED.last_message_at, channel_contacts.last_message_at)
RETURNING {_KCOLS}, (xmax = 0)
"""


@contextmanager
def _keys(gone: str) -> Iterator[None]:
    """A broken foreign key is ``NotFound`` (what it names went meanwhile); the one
    unique index an insert can break here is ``channels_one_whatsapp_web``."""
    try:
        yield
    except psycopg.errors.UniqueViolation:
        raise Conflict("the agent has a whatsapp_web channel", code="CHANNEL_TYPE_TAKEN") from None
    except psycopg.errors.ForeignKeyViolation:
        raise NotFound(gone) from None


class PostgresChannels(Repo, ChannelStore):
    async def add(self, channel: Channel) -> Channel:
        async with translate(), self._pool.connection() as conn:
            with _keys("agent not found"):
                await conn.execute(
                    f"INSERT INTO channels ({_COLS}) VALUES ({_CHANNEL_MARKS})", _values(channel)
                )
        return channel

    async def get(self, org_id: str, channel_id: UUID) -> Channel:
        row = await self._one(
            f"SELECT {_COLS} FROM channels WHERE org_id = %s AND id = %s", (org_id, channel_id)
        )
        if row is None:
            raise NotFound("channel not found")
        return _channel(row)

    async def find(self, channel_id: UUID) -> Channel | None:
        row = await self._one(f"SELECT {_COLS} FROM channels WHERE id = %s", (channel_id,))
        return None if row is None else _channel(row)

    async def of_agent(self, org_id: str, agent_id: UUID) -> list[Channel]:
        rows = await self._all(
            f"SELECT {_COLS} FROM channels WHERE org_id = %s AND agent_id = %s"
            " ORDER BY created_at, id",
            (org_id, agent_id),
        )
        return [_channel(r) for r in rows]

    async def modify(
        self, org_id: str, channel_id: UUID, change: Callable[[Channel], Channel]
    ) -> Channel:
        # the row lock serialises concurrent changes of one channel: none is lost
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_COLS} FROM channels WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, channel_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("channel not found")
            changed = change(_channel(row))
            values = _values(changed)
            await conn.execute(
                f"UPDATE channels SET {_SET.replace('config = %s', 'config = %s::jsonb')}"
                " WHERE org_id = %s AND id = %s",
                (*values[3:], org_id, channel_id),
            )
        return changed

    async def delete(self, org_id: str, channel_id: UUID) -> bool:
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM channels WHERE org_id = %s AND id = %s", (org_id, channel_id)
            )
            return cur.rowcount > 0

    async def upsert_contact(self, contact: Contact) -> tuple[Contact, bool]:
        await self.get(contact.org_id, contact.channel_id)
        async with translate(), self._pool.connection() as conn:
            cur = await conn.execute(_UPSERT_CONTACT, _contact_values(contact))
            row = await cur.fetchone()
        assert row is not None
        return _contact(row[:11]), bool(row[11])

    async def contact(self, org_id: str, channel_id: UUID, contact_id: UUID) -> Contact:
        row = await self._one(
            f"SELECT {_KCOLS} FROM channel_contacts"
            " WHERE org_id = %s AND channel_id = %s AND id = %s",
            (org_id, channel_id, contact_id),
        )
        if row is None:
            raise NotFound("contact not found")
        return _contact(row)

    async def contacts(
        self,
        org_id: str,
        channel_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[Contact]:
        where = "org_id = %s AND channel_id = %s"
        params: list[object] = [org_id, channel_id]
        if before is not None:
            where += " AND (first_seen_at, id) < (%s, %s)"
            params.extend(before)
        rows = await self._all(
            f"SELECT {_KCOLS} FROM channel_contacts WHERE {where}"
            " ORDER BY first_seen_at DESC, id DESC LIMIT %s",
            (*params, limit),
        )
        return [_contact(r) for r in rows]

    async def modify_contact(
        self, org_id: str, channel_id: UUID, contact_id: UUID, change: Callable[[Contact], Contact]
    ) -> Contact:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_KCOLS} FROM channel_contacts"
                " WHERE org_id = %s AND channel_id = %s AND id = %s FOR UPDATE",
                (org_id, channel_id, contact_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("contact not found")
            changed = change(_contact(row))
            await conn.execute(
                "UPDATE channel_contacts SET display_name = %s, username = %s, thread_id = %s,"
                " status = %s, pairing_code = %s, last_message_at = %s"
                " WHERE org_id = %s AND id = %s",
                (
                    changed.display_name,
                    changed.username,
                    changed.thread_id,
                    changed.status,
                    changed.pairing_code,
                    changed.last_message_at,
                    org_id,
                    contact_id,
                ),
            )
        return changed

    async def chat_thread(self, org_id: str, channel_id: UUID, chat_id: str) -> UUID | None:
        row = await self._one(
            "SELECT thread_id FROM channel_chats"
            " WHERE org_id = %s AND channel_id = %s AND chat_id = %s",
            (org_id, channel_id, chat_id),
        )
        return None if row is None else row[0]

    async def claim_chat(
        self, org_id: str, channel_id: UUID, chat_id: str, thread_id: UUID
    ) -> UUID:
        await self.get(org_id, channel_id)
        async with translate(), self._pool.connection() as conn:
            with _keys("thread not found"):
                # the first claim wins; a later one reads the winner's thread
                await conn.execute(
                    "INSERT INTO channel_chats (org_id, channel_id, chat_id, thread_id)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (org_id, channel_id, chat_id, thread_id),
                )
        held = await self.chat_thread(org_id, channel_id, chat_id)
        if held is None:
            raise NotFound("channel not found")
        return held

    async def record_event(self, event: ChannelEvent) -> bool:
        marks = ", ".join(["%s"] * len(_EFIELDS))
        async with translate(), self._pool.connection() as conn:
            with _keys("channel not found"):
                cur = await conn.execute(
                    f"INSERT INTO channel_events ({_ECOLS}) VALUES ({marks})"
                    " ON CONFLICT (org_id, channel_id, event_id) DO NOTHING",
                    _event_values(event),
                )
            return cur.rowcount > 0

    async def event(self, org_id: str, channel_id: UUID, event_id: str) -> ChannelEvent | None:
        row = await self._one(
            f"SELECT {_ECOLS} FROM channel_events"
            " WHERE org_id = %s AND channel_id = %s AND event_id = %s",
            (org_id, channel_id, event_id),
        )
        return None if row is None else _event(row)

    async def events(
        self,
        org_id: str,
        channel_id: UUID,
        *,
        before: tuple[datetime, str] | None,
        limit: int,
        state: EventState | None = None,
    ) -> list[ChannelEvent]:
        where = "org_id = %s AND channel_id = %s"
        params: list[object] = [org_id, channel_id]
        if state is not None:
            where += " AND state = %s"
            params.append(state)
        if before is not None:
            where += " AND (created_at, event_id) < (%s, %s)"
            params.extend(before)
        rows = await self._all(
            f"SELECT {_ECOLS} FROM channel_events WHERE {where}"
            " ORDER BY created_at DESC, event_id DESC LIMIT %s",
            (*params, limit),
        )
        return [_event(r) for r in rows]

    async def save_event(self, event: ChannelEvent) -> None:
        fields = [f for f in _EFIELDS if f not in ("org_id", "channel_id", "event_id")]
        sets = ", ".join(f"{f} = %s" for f in fields)
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                f"UPDATE channel_events SET {sets}"
                " WHERE org_id = %s AND channel_id = %s AND event_id = %s",
                (*(getattr(event, f) for f in fields), *_event_key(event)),
            )
