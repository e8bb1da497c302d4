"""Numbered SQL migrations shipped in the package, applied under an advisory lock.

``migrate`` runs every pending ``migrations/NNNN_name.sql`` in one transaction,
holding ``pg_advisory_xact_lock``: when several service processes start at once,
one applies the migrations and the others wait for its commit, then find nothing
left to do. A failing migration rolls back entirely.
"""

from __future__ import annotations

import logging
import re
from importlib import resources

import psycopg
from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
from pgqueuer.adapters.persistence.queries import Queries

from agentsvc_core.errors import StorageError, Unavailable

log = logging.getLogger("agentsvc.migrate")

# An arbitrary constant naming "agentsvc schema migrations" among advisory locks.
_LOCK_ID = 0x6167_656E_7473_7663 & 0x7FFF_FFFF_FFFF_FFFF
_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every shipped migration, in order."""
    found = []
    for entry in resources.files("agentsvc_adapters.postgres.migrations").iterdir():
        m = _NAME.fullmatch(entry.name)
        if m:
            found.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError("two migrations share a version number")
    return found


async def migrate(conninfo: str) -> list[int]:
    """Apply pending migrations; return the versions applied by this call."""
    applied_now: list[int] = []
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo)
    except psycopg.ProgrammingError:
        # psycopg's message quotes the malformed part, which may be the password
        raise StorageError("the database URL (AGENTSVC_DATABASE_URL) is malformed") from None
    except psycopg.OperationalError as exc:
        raise Unavailable(f"cannot connect to the database ({type(exc).__name__})") from None
    async with conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT version FROM schema_migrations")
        done = {row[0] for row in await cur.fetchall()}
        for version, name, sql in migrations():
            if version in done:
                continue
            log.info("applying migration %04d_%s", version, name)
            await conn.execute(sql.encode())
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
            applied_now.append(version)
    await install_queue(conninfo)
    return applied_now


# pgqueuer's own advisory lock guards its upgrades; this one makes the
# install-or-upgrade decision one process's at a time when several start at once.
_QUEUE_LOCK = 0x6A6F_6273_6167_656E & 0x7FFF_FFFF_FFFF_FFFF


async def install_queue(conninfo: str) -> None:
    """Create the job queue's tables (PgQueuer's, ``agentsvc_adapters.jobs``), or
    converge them on the installed PgQueuer's schema: idempotent, after our own
    migrations. Its statements cannot share one transaction, hence a connection
    in autocommit mode and a session lock."""
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        raise Unavailable(f"cannot connect to the database ({type(exc).__name__})") from None
    async with conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (_QUEUE_LOCK,))
        queries = Queries(PsycopgDriver(conn))
        if await queries.schema_is_installed():
            await queries.upgrade()
        else:
            await queries.install()
            log.info("installed the job queue's tables")
