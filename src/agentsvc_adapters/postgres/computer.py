"""Computer instances on PostgreSQL (``computer_instances``, migration 0024).

The partial unique index ``computer_instances_one_active`` does the race's work:
two first uses of one thread's computer insert one row, the second insert fails
(``Conflict``) and its caller reads the winner. ``modify`` holds the row's lock
while its change is made, so concurrent changes of one instance are serialised."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

import msgspec
import psycopg

from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.entities.computer import ComputerInstance
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.computer import ComputerStore

_FIELDS = tuple(f.name for f in msgspec.structs.fields(ComputerInstance))
_COLS = ", ".join(_FIELDS)
_MARKS = ", ".join(["%s"] * len(_FIELDS))
_SET = ", ".join(f"{f} = %s" for f in _FIELDS[2:])
_ACTIVE = "status <> 'destroyed'"


def _instance(r: Row) -> ComputerInstance:
    return ComputerInstance(**dict(zip(_FIELDS, r, strict=True)))


def _values(i: ComputerInstance) -> tuple[object, ...]:
    return tuple(getattr(i, f) for f in _FIELDS)


class PostgresComputers(Repo, ComputerStore):
    async def add(self, instance: ComputerInstance) -> ComputerInstance:
        async with translate(), self._pool.connection() as conn:
            try:
                await conn.execute(
                    f"INSERT INTO computer_instances ({_COLS}) VALUES ({_MARKS})",
                    _values(instance),
                )
            except psycopg.errors.UniqueViolation:
                raise Conflict(
                    "the computer has an active instance", code="INSTANCE_EXISTS"
                ) from None
            except psycopg.errors.ForeignKeyViolation:
                raise NotFound("agent not found") from None
        return instance

    async def get(self, org_id: str, instance_id: UUID) -> ComputerInstance:
        row = await self._one(
            f"SELECT {_COLS} FROM computer_instances WHERE org_id = %s AND id = %s",
            (org_id, instance_id),
        )
        if row is None:
            raise NotFound("computer instance not found")
        return _instance(row)

    async def active(
        self, org_id: str, agent_id: UUID, thread_id: UUID | None
    ) -> ComputerInstance | None:
        row = await self._one(
            f"SELECT {_COLS} FROM computer_instances WHERE org_id = %s AND agent_id = %s"
            f" AND thread_id IS NOT DISTINCT FROM %s AND {_ACTIVE}",
            (org_id, agent_id, thread_id),
        )
        return None if row is None else _instance(row)

    async def of_agent(self, org_id: str, agent_id: UUID) -> list[ComputerInstance]:
        rows = await self._all(
            f"SELECT {_COLS} FROM computer_instances WHERE org_id = %s AND agent_id = %s"
            " ORDER BY created_at DESC, id DESC",
            (org_id, agent_id),
        )
        return [_instance(r) for r in rows]

    async def of_thread(self, org_id: str, thread_id: UUID) -> ComputerInstance | None:
        row = await self._one(
            f"SELECT {_COLS} FROM computer_instances WHERE org_id = %s AND thread_id = %s"
            f" AND {_ACTIVE}",
            (org_id, thread_id),
        )
        return None if row is None else _instance(row)

    async def modify(
        self,
        org_id: str,
        instance_id: UUID,
        change: Callable[[ComputerInstance], ComputerInstance],
    ) -> ComputerInstance:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_COLS} FROM computer_instances WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, instance_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("computer instance not found")
            changed = change(_instance(row))
            try:
                await conn.execute(
                    f"UPDATE computer_instances SET {_SET} WHERE org_id = %s AND id = %s",
                    (*_values(changed)[2:], org_id, instance_id),
                )
            except psycopg.errors.UniqueViolation:
                raise Conflict(
                    "the computer has an active instance", code="INSTANCE_EXISTS"
                ) from None
        return changed

    async def idle_since(self, now: datetime, limit: int = 100) -> list[ComputerInstance]:
        rows = await self._all(
            f"SELECT {_COLS} FROM computer_instances WHERE status IN ('ready', 'idle')"
            " AND last_used_at + idle_timeout_s * interval '1 second' <= %s"
            " ORDER BY last_used_at, id LIMIT %s",
            (now, limit),
        )
        return [_instance(r) for r in rows]
