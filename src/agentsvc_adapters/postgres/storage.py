"""PostgreSQL storage on psycopg 3 (async) and one ``AsyncConnectionPool``.

SQL is written by hand and parameterised. Connections are in autocommit mode;
operations that read then write take a transaction and a row lock. psycopg's
exceptions never leave this module: they become domain errors in ``_translate``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agentsvc_adapters.postgres.owners import new_owner
from agentsvc_core.entities import Agent, ApiKey, Organization, ToolProfile
from agentsvc_core.errors import Conflict, DomainError, NotFound, StorageError, Unavailable
from agentsvc_core.ports import (
    AgentRepository,
    ApiKeyRepository,
    ConversationStore,
    McpRepository,
    OrganizationRepository,
    Storage,
    ThreadRepository,
    TurnReader,
)
from agentsvc_core.ports.oauth import SecretStore

Row = tuple[Any, ...]
Params = tuple[Any, ...] | list[Any] | dict[str, Any]


class Connection(psycopg.AsyncConnection[Row]):
    """A pooled connection that keeps a cursor for each of the turn's statements.

    ``conn.execute`` makes a new cursor, and with it a new ``Transformer`` that looks
    up the dumper of every parameter and the loader of every column again; a cursor
    that runs the same query object again keeps them (measured: 13-25% less of this
    process's CPU per statement). ``hot`` runs a statement on its own cursor and
    returns the rows; the cursor never leaves this class.

    A kept cursor holds its last parameters and result until it runs again, so
    ``hot`` keeps at most ``HOT_MAX`` (the least recently used goes first) and drops
    the cursor of a run whose parameters weigh more than ``HOT_KEEP_BYTES`` or whose
    result has more than ``HOT_KEEP_ROWS`` rows: what stays is a turn's worth.
    ``close`` drops them all (a cursor refers to its connection: a cycle)."""

    HOT_MAX = 8
    HOT_KEEP_BYTES = 64 * 1024
    HOT_KEEP_ROWS = 16

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the statement's text -> (that text, as the object the cursor last ran; the cursor)
        self._hot: OrderedDict[str, tuple[str, psycopg.AsyncCursor[Row]]] = OrderedDict()
        self.handed_out_at = time.monotonic()  # by the pool (check_if_idle)

    async def hot(self, sql: str, params: Params) -> list[Row]:
        entry = self._hot.get(sql)
        if entry is None:
            entry = self._hot[sql] = (sql, self.cursor())
            if len(self._hot) > self.HOT_MAX:
                self._hot.popitem(last=False)
        else:
            self._hot.move_to_end(sql)
        rows = await (await entry[1].execute(entry[0], params)).fetchall()
        if len(rows) > self.HOT_KEEP_ROWS or _weight(params) > self.HOT_KEEP_BYTES:
            del self._hot[sql]  # and with its cursor, what it holds
        return rows

    async def close(self) -> None:
        self._hot.clear()
        await super().close()


def _weight(params: Params) -> int:
    values = params.values() if isinstance(params, dict) else params
    return sum(len(v) for v in values if isinstance(v, str | bytes))


class LifoPool(AsyncConnectionPool[Connection]):
    """``AsyncConnectionPool`` that hands out the connection returned last.

    psycopg_pool hands out the one idle the longest, so a process that needs one or
    two connections at a time (a turn's statements take a fraction of a millisecond)
    rotates over all of them, and every statement lands on a backend that has gone
    cold: PostgreSQL spent 700-1300 us of CPU per turn with ten connections against
    410-650 us with one (sequential turns; handing out the last one returned:
    420-590 us with ten). The connections idle the longest stay at the end the pool
    shrinks from, so unused ones still close after ``max_idle``. They may sit there
    long enough for a firewall, a NAT or ``idle_session_timeout`` to cut them, which
    the rotation used to hide: ``check_if_idle`` tests one that has been idle longer
    than ``IDLE_CHECK_S`` before handing it out (the pool then takes another)."""

    async def _get_ready_connection(self, timeout: float | None) -> Connection | None:  # noqa: ASYNC109 (the overridden signature)
        conn = await super()._get_ready_connection(timeout)  # the one idle the longest
        if conn is not None and self._pool:
            self._pool.appendleft(conn)
            conn = self._pool.pop()
        return conn


Pool = AsyncConnectionPool[Connection]
IDLE_CHECK_S = 30.0


async def check_if_idle(conn: Connection) -> None:
    """The pool's ``check``, run as it hands ``conn`` out: one empty statement if
    ``conn`` was last handed out more than ``IDLE_CHECK_S`` ago (a checkout lasts
    milliseconds, so that is how long it sat idle), none otherwise; raises if it is
    broken. (Not the pool's ``reset``: with one, the pool takes every connection back
    through a worker task, later and at a cost.)"""
    now = time.monotonic()
    idle, conn.handed_out_at = now - conn.handed_out_at, now
    if idle > IDLE_CHECK_S:
        await AsyncConnectionPool.check_connection(conn)


_profiles_decoder = msgspec.json.Decoder(dict[str, ToolProfile])
_encoder = msgspec.json.Encoder()


@asynccontextmanager
async def _translate() -> AsyncIterator[None]:
    """Map driver and pool failures to domain errors (the adapter's edge)."""
    try:
        yield
    except DomainError:
        raise
    except PoolTimeout as exc:
        raise Unavailable("storage is busy or unreachable; try again") from exc
    except psycopg.errors.UniqueViolation as exc:
        raise Conflict("the resource already exists") from exc
    except psycopg.OperationalError as exc:
        raise Unavailable("storage is unreachable; try again") from exc
    except psycopg.Error as exc:
        raise StorageError("storage failed") from exc


class _Repo:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def _one(self, sql: str, params: Params) -> tuple[Any, ...] | None:
        async with _translate(), self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchone()

    async def _all(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
        async with _translate(), self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchall()


class PostgresOrganizations(_Repo, OrganizationRepository):
    async def ensure(self, org: Organization) -> Organization:
        # Insert unless present and read the row in one statement. Under READ
        # COMMITTED a concurrent inserter of the same id makes our insert wait and
        # then do nothing, while this statement's snapshot (taken before the other
        # committed) cannot see the winner: then one more read, in a new snapshot.
        row = await self._one(
            "WITH ins AS (INSERT INTO organizations (org_id, created_at) VALUES (%s, %s)"
            " ON CONFLICT (org_id) DO NOTHING RETURNING org_id, created_at)"
            " SELECT org_id, created_at FROM ins"
            " UNION ALL SELECT org_id, created_at FROM organizations WHERE org_id = %s"
            " LIMIT 1",
            (org.id, org.created_at, org.id),
        )
        if row is None:
            return await self.get(org.id)
        return Organization(id=row[0], created_at=row[1])

    async def get(self, org_id: str) -> Organization:
        row = await self._one(
            "SELECT org_id, created_at FROM organizations WHERE org_id = %s", (org_id,)
        )
        if row is None:
            raise NotFound("organization not found")
        return Organization(id=row[0], created_at=row[1])


_KEY_COLS = "id, org_id, name, display_prefix, key_hash, created_at, revoked_at"


def _key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(
        id=row[0],
        org_id=row[1],
        name=row[2],
        display_prefix=row[3],
        key_hash=row[4],
        created_at=row[5],
        revoked_at=row[6],
    )


class PostgresApiKeys(_Repo, ApiKeyRepository):
    async def add(self, key: ApiKey) -> None:
        async with _translate(), self._pool.connection() as conn:
            await conn.execute(
                f"INSERT INTO api_keys ({_KEY_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
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
        row = await self._one(f"SELECT {_KEY_COLS} FROM api_keys WHERE key_hash = %s", (key_hash,))
        return None if row is None else _key(row)

    async def list(self, org_id: str) -> list[ApiKey]:
        rows = await self._all(
            f"SELECT {_KEY_COLS} FROM api_keys WHERE org_id = %s ORDER BY created_at, id",
            (org_id,),
        )
        return [_key(r) for r in rows]

    async def revoke(self, org_id: str, key_id: UUID, at: datetime) -> ApiKey:
        row = await self._one(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, %s)"
            f" WHERE org_id = %s AND id = %s RETURNING {_KEY_COLS}",
            (at, org_id, key_id),
        )
        if row is None:
            raise NotFound("API key not found")
        return _key(row)


_AGENT_COLS = (
    "id, org_id, name, description, stable_preamble, default_model,"
    " tool_profiles::text, default_profile, runtime_provider, created_at, updated_at"
)


def _agent(row: tuple[Any, ...]) -> Agent:
    return Agent(
        id=row[0],
        org_id=row[1],
        name=row[2],
        description=row[3],
        stable_preamble=row[4],
        default_model=row[5],
        tool_profiles=None if row[6] is None else _profiles_decoder.decode(row[6]),
        default_profile=row[7],
        runtime_provider=row[8],
        created_at=row[9],
        updated_at=row[10],
    )


def _agent_values(a: Agent) -> tuple[Any, ...]:
    profiles = None if a.tool_profiles is None else _encoder.encode(a.tool_profiles).decode()
    return (
        a.name,
        a.description,
        a.stable_preamble,
        a.default_model,
        profiles,
        a.default_profile,
        a.runtime_provider,
        a.created_at,
        a.updated_at,
    )


class PostgresAgents(_Repo, AgentRepository):
    async def add(self, agent: Agent) -> None:
        async with _translate(), self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO agents (org_id, id, name, description, stable_preamble,"
                " default_model, tool_profiles, default_profile, runtime_provider,"
                " created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s::json, %s, %s, %s, %s)",
                (agent.org_id, agent.id, *_agent_values(agent)),
            )

    async def get(self, org_id: str, agent_id: UUID) -> Agent:
        row = await self._one(
            f"SELECT {_AGENT_COLS} FROM agents WHERE org_id = %s AND id = %s", (org_id, agent_id)
        )
        if row is None:
            raise NotFound("agent not found")
        return _agent(row)

    async def list(self, org_id: str) -> list[Agent]:
        rows = await self._all(
            f"SELECT {_AGENT_COLS} FROM agents WHERE org_id = %s ORDER BY created_at, id",
            (org_id,),
        )
        return [_agent(r) for r in rows]

    async def modify(self, org_id: str, agent_id: UUID, change: Callable[[Agent], Agent]) -> Agent:
        # The row lock serialises concurrent modifications of one agent: each
        # sees the previous one's result, so none is lost.
        async with _translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_AGENT_COLS} FROM agents WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, agent_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("agent not found")
            updated = change(_agent(row))
            await conn.execute(
                "UPDATE agents SET name = %s, description = %s, stable_preamble = %s,"
                " default_model = %s, tool_profiles = %s::json, default_profile = %s,"
                " runtime_provider = %s, created_at = %s, updated_at = %s"
                " WHERE org_id = %s AND id = %s",
                (*_agent_values(updated), org_id, agent_id),
            )
            return updated

    async def delete(self, org_id: str, agent_id: UUID) -> None:
        row = await self._one(
            "DELETE FROM agents WHERE org_id = %s AND id = %s RETURNING id", (org_id, agent_id)
        )
        if row is None:
            raise NotFound("agent not found")


async def _configure(conn: Connection) -> None:
    # Timestamps come back in UTC whatever the server's default time zone is.
    await conn.execute("SET TIME ZONE 'UTC'")


class PostgresStorage(Storage):
    """All repositories over one pool. ``open()``/``close()`` belong to the lifespan."""

    def __init__(
        self, conninfo: str, *, min_size: int = 2, max_size: int = 10, timeout: float = 10.0
    ) -> None:
        self.conninfo = conninfo
        self.pool: Pool = LifoPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs={"autocommit": True, "row_factory": tuple_row},
            connection_class=Connection,
            configure=_configure,
            check=check_if_idle,
            name="agentsvc",
        )
        self._orgs = PostgresOrganizations(self.pool)
        self._keys = PostgresApiKeys(self.pool)
        self._agents = PostgresAgents(self.pool)
        # imported here: conversations builds on this module's helpers
        from agentsvc_adapters.postgres.conversations import (  # noqa: PLC0415
            PostgresConversations,
            PostgresThreads,
        )
        from agentsvc_adapters.postgres.mcps import PostgresMcps  # noqa: PLC0415
        from agentsvc_adapters.postgres.secrets import PostgresSecrets  # noqa: PLC0415
        from agentsvc_adapters.postgres.turns import PostgresTurnReader  # noqa: PLC0415

        # this process among the runs' owners: the stop bus holds its lock (owners.py)
        self.owner = new_owner()
        self._threads = PostgresThreads(self.pool)
        self._conversations = PostgresConversations(self.pool, self.owner)
        self._mcps = PostgresMcps(self.pool)
        self._secrets = PostgresSecrets(self.pool)
        self._turn_reader = PostgresTurnReader(self.pool)

    async def open(self) -> None:
        async with _translate():
            await self.pool.open(wait=True, timeout=30.0)

    async def close(self) -> None:
        await self.pool.close()

    @property
    def organizations(self) -> OrganizationRepository:
        return self._orgs

    @property
    def api_keys(self) -> ApiKeyRepository:
        return self._keys

    @property
    def agents(self) -> AgentRepository:
        return self._agents

    @property
    def threads(self) -> ThreadRepository:
        return self._threads

    @property
    def conversations(self) -> ConversationStore:
        return self._conversations

    @property
    def mcps(self) -> McpRepository:
        return self._mcps

    @property
    def secrets(self) -> SecretStore:
        return self._secrets

    @property
    def turn_reader(self) -> TurnReader:
        return self._turn_reader
