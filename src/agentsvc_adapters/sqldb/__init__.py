"""The customer's PostgreSQL databases (database integrations), read-only, through
the outbound guard.

Connecting is an outbound connection, so it follows the guard's rule
(``outbound.py``): the host is normalised and resolved here, every address it
resolves to is checked (loopback, private, link-local, metadata... refused unless
``AGENTSVC_ALLOW_PRIVATE_NETWORK=true``), and psycopg connects with
``hostaddr=<the checked address>``, so libpq resolves nothing itself and DNS
rebinding between the check and the connection is not possible (``host`` stays
the name, for TLS verification). Unix sockets (a host that is a path, or none)
are refused. The connection string is a ``postgresql://`` URL whose parameters are
an allow-list (``_ALLOWED``); the service sets the rest itself: no password file,
no password from the service's own environment (``PGPASSWORD``), its session
options.

Refused: a role that may act on the database server itself (a superuser or a
member of one, a member of ``pg_execute_server_program``, ``pg_read_server_files``,
``pg_write_server_files`` or ``pg_signal_backend``), checked at the start of every
call: a read-only transaction does not stop ``SET ROLE``, ``COPY ... TO PROGRAM``,
``pg_read_file`` or ``pg_terminate_backend``.

Read-only, by the database: every session starts with
``default_transaction_read_only=on``, ``statement_timeout`` (the integration's),
a small ``lock_timeout`` and ``idle_in_transaction_session_timeout``; each call
runs in a ``READ ONLY`` transaction on a connection of its own, which is closed
(so the transaction rolled back, and whatever a statement ``SET``) when the call
ends.

``query`` has the database parse and describe the statement alone first, over the
extended protocol, which refuses a second statement ("cannot insert multiple
commands into a prepared statement"); trailing semicolons and comments are cut
before (``capped.statement``). A statement that answers rows runs wrapped as a
subquery (``capped.py``) so that the database itself cuts each value to a quarter of
``max_bytes``, each row's JSON to ``max_bytes``, and the rows to ``max_rows + 1``:
no value reaches the service whole. Its rows are streamed and reading stops at
``max_rows`` rows or ``max_bytes`` of JSON (the rest is cancelled). A statement that
answers rows but cannot stand as a subquery (``SHOW``, ``EXPLAIN``, a ``CALL``
with results...) is refused, not run; one that answers none (``SET``, and the
writes the read-only transaction refuses) runs as it is.

Errors are the database's own message (read-only violation, timeout, syntax),
with the password cut out should it ever appear; a connection that failed below
the database (refused, timed out, no such host) reads ``could not reach
<host>:<port>`` as the guard's failures do.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import msgspec
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import tuple_row

from agentsvc_adapters.outbound import (
    FAILURES,
    Resolver,
    address_problem,
    normalise_host,
    note_refusal,
    parse_ip_literal,
    system_resolver,
)
from agentsvc_adapters.sqldb.query import cut_message, run_query
from agentsvc_core.ports import DatabaseError, DatabaseTarget, SqlDatabases, TableName, TableRows

__all__ = ["PostgresDatabases"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# URL parameters a connection string may carry; the service sets every other one
_ALLOWED = frozenset(
    {
        "host",
        "port",
        "dbname",
        "user",
        "password",
        "sslmode",
        "sslrootcert",
        "sslnegotiation",
        "channel_binding",
        "application_name",
        "connect_timeout",
    }
)
# the values libpq takes for these parameters, checked here so that a typo is said
# as such (libpq's own refusal would read as a database that cannot be reached)
_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "sslnegotiation": ("postgres", "direct"),
    "channel_binding": ("disable", "prefer", "require"),
}
_KINDS = {
    "r": "table",
    "v": "view",
    "m": "materialized view",
    "f": "foreign table",
    "p": "partitioned table",
}
MAX_TABLES = 1000
LOCK_TIMEOUT_MS = 1000
# The two read-only layers, each enough alone (a test removes either and shows the
# other still refuses writes): every session's default, and the transaction each
# call runs in.
READ_ONLY_SESSION = "-c default_transaction_read_only=on"
BEGIN_READ_ONLY = "BEGIN TRANSACTION READ ONLY"
# a path that cannot exist (/dev/null is no directory): libpq reads no password
# file, the service's own ~/.pgpass included, and says nothing
_NO_PASSFILE = os.path.join(os.devnull, "agentsvc-no-passfile")

# Whether the session's role may act on the database server itself: a superuser, a
# member of a superuser role (SET ROLE works in a read-only transaction), or a
# member of the roles that run programs, read and write the server's files
# (COPY ... TO PROGRAM, pg_read_file) or end other sessions (pg_terminate_backend),
# all of which a read-only transaction allows.
_POWERS = (
    "SELECT EXISTS (SELECT 1 FROM pg_roles r"
    " WHERE r.rolsuper AND pg_has_role(current_user, r.oid, 'MEMBER'))"
    " OR pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER')"
    " OR pg_has_role(current_user, 'pg_read_server_files', 'MEMBER')"
    " OR pg_has_role(current_user, 'pg_write_server_files', 'MEMBER')"
    " OR pg_has_role(current_user, 'pg_signal_backend', 'MEMBER')"
)
TOO_POWERFUL = (
    "the role may act on the database server (a superuser or a member of one, or a"
    " member of pg_execute_server_program, pg_read_server_files, pg_write_server_files"
    " or pg_signal_backend);"
    " connect with a role that may only read what the agent needs"
)

_LIST_TABLES = (
    "SELECT n.nspname, c.relname, c.relkind::text FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p')"
    " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
    " AND n.nspname NOT LIKE 'pg\\_toast%%' AND n.nspname NOT LIKE 'pg\\_temp%%'"
    " AND pg_catalog.has_any_column_privilege(c.oid, 'SELECT')"
    " ORDER BY 1, 2 LIMIT %s"
)
_DESCRIBE = (
    "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,"
    " pg_catalog.pg_get_expr(d.adbin, d.adrelid)"
    " FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid"
    " LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum"
    " WHERE c.relname = %(name)s"
    " AND (n.nspname = %(schema)s"
    "  OR (%(schema)s::text IS NULL AND pg_catalog.pg_table_is_visible(c.oid)))"
    " AND c.relkind IN ('r', 'v', 'm', 'f', 'p') AND a.attnum > 0 AND NOT a.attisdropped"
    " AND pg_catalog.has_any_column_privilege(c.oid, 'SELECT')"
    " ORDER BY a.attnum"
)


class _Where(msgspec.Struct, frozen=True, kw_only=True):
    params: dict[str, str]
    host: str  # normalised
    port: int
    password: str


class PostgresDatabases(SqlDatabases):
    """``resolver`` replaces the system DNS lookup (tests)."""

    def __init__(
        self,
        *,
        allow_private_network: bool,
        resolver: Resolver | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.allow_private_network = allow_private_network
        self._resolve = resolver or system_resolver
        self._connect_timeout_s = connect_timeout_s

    # --- where to connect ---------------------------------------------------------

    def _where(self, connection: str) -> _Where:
        if not connection.startswith(("postgresql://", "postgres://")):
            raise DatabaseError("the connection must be a postgresql:// URL")
        try:
            params = {k: str(v) for k, v in conninfo_to_dict(connection).items()}
        except psycopg.ProgrammingError:
            # psycopg's message quotes the malformed part, which may be the password
            raise DatabaseError("the connection is not a valid postgresql:// URL") from None
        unknown = sorted(set(params) - _ALLOWED)
        if unknown:
            raise DatabaseError(
                f"the connection parameter {unknown[0]!r} is not allowed "
                f"(allowed: {', '.join(sorted(_ALLOWED))})"
            )
        if params.get("sslrootcert", "system") != "system":
            raise DatabaseError("sslrootcert may only be 'system' (the system's trusted CAs)")
        for name, choices in _CHOICES.items():
            if name in params and params[name] not in choices:
                raise DatabaseError(f"{name} must be one of {', '.join(choices)}")
        if not params.get("connect_timeout", "0").isdigit():
            raise DatabaseError("connect_timeout must be a whole number of seconds")
        raw_host = params.get("host", "")
        if not raw_host or raw_host.startswith(("/", "@")):
            note_refusal("unix sockets are not allowed")
            raise DatabaseError(
                "refused by the outbound guard: unix sockets are not allowed (give a host name)"
            )
        if "," in raw_host or "," in params.get("port", ""):
            raise DatabaseError("the connection must name one host and one port")
        try:
            host = normalise_host(raw_host)
        except ValueError as exc:
            note_refusal(str(exc))
            raise DatabaseError(f"refused by the outbound guard: {exc}") from None
        try:
            port = int(params.get("port") or 5432)
        except ValueError:
            raise DatabaseError("the port must be a number") from None
        if not 1 <= port <= 65535:
            raise DatabaseError("the port must be between 1 and 65535")
        return _Where(params=params, host=host, port=port, password=params.get("password", ""))

    async def _addresses(self, where: _Where) -> list[IPAddress]:
        """As the outbound guard: every address checked, any refused refuses all."""
        literal = parse_ip_literal(where.host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                with anyio.fail_after(self._connect_timeout_s):
                    found = await self._resolve(where.host, where.port)
                addresses = [ipaddress.ip_address(a.split("%")[0]) for a in found]
            except (OSError, TimeoutError, ValueError):
                addresses = []
        if not addresses:
            FAILURES["unreachable"] += 1
            raise DatabaseError(f"could not reach {where.host}:{where.port}")
        if not self.allow_private_network:
            for addr in addresses:
                if (problem := address_problem(addr)) is not None:
                    reason = f"{where.host} resolves to {problem}"
                    note_refusal(reason)
                    raise DatabaseError(f"refused by the outbound guard: {reason}")
        return addresses

    @staticmethod
    def _clean(message: str, where: _Where, connection: str) -> str:
        """A driver's message without the connection string or its password, cut to
        MAX_MESSAGE_CHARS (the password is taken out before the cut, so no part of
        it is left at the edge)."""
        text = message.replace(connection, "***")
        if len(where.password) >= 3:
            text = text.replace(where.password, "***")
        return cut_message(text.strip())

    def _connect_failure(self, exc: psycopg.Error, where: _Where, connection: str) -> str | None:
        """What to say when connecting failed: the database's refusal (it answered),
        or None when it could not be reached at all."""
        message = str(exc)
        if "FATAL:" in message:
            said = message.rsplit("FATAL:", 1)[1]
            return "the database refused the connection: " + self._clean(said, where, connection)
        if "SSL" in message:
            return f"could not connect to {where.host}:{where.port} over SSL (see sslmode)"
        return None

    async def _connect(
        self, where: _Where, connection: str, timeout_ms: int
    ) -> psycopg.AsyncConnection[Any]:
        addresses = await self._addresses(where)
        options = (
            f"{READ_ONLY_SESSION}"
            f" -c statement_timeout={timeout_ms}"
            f" -c lock_timeout={min(LOCK_TIMEOUT_MS, timeout_ms)}"
            f" -c idle_in_transaction_session_timeout={timeout_ms + 10_000}"
            # notices (RAISE NOTICE in a function, with no bound on their size) are
            # not sent: nothing reads them, and a large one would be read whole
            " -c client_min_messages=error"
        )
        for addr in addresses:
            kwargs = {
                **where.params,
                "host": where.host,
                "hostaddr": str(addr),
                "port": str(where.port),
                "password": where.password,  # "" keeps PGPASSWORD of the service out
                "passfile": _NO_PASSFILE,
                "options": options,
                "connect_timeout": str(max(2, math.ceil(self._connect_timeout_s))),
                "application_name": where.params.get("application_name", "agentsvc"),
            }
            try:
                with anyio.fail_after(self._connect_timeout_s + 1):
                    return await psycopg.AsyncConnection.connect(
                        make_conninfo("", **kwargs), autocommit=True, row_factory=tuple_row
                    )
            except psycopg.ProgrammingError:
                raise DatabaseError("the connection has an invalid parameter value") from None
            except psycopg.Error as exc:
                said = self._connect_failure(exc, where, connection)
                if said is not None:
                    raise DatabaseError(said) from None
            except TimeoutError:
                pass
        FAILURES["unreachable"] += 1
        raise DatabaseError(f"could not reach {where.host}:{where.port}")

    @asynccontextmanager
    async def _session(
        self, connection: str, timeout_ms: int
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection of its own in a READ ONLY transaction; closed at the end,
        which ends the transaction without committing anything."""
        where = self._where(connection)
        conn = await self._connect(where, connection, timeout_ms)
        try:
            # the driver's own deadline, a little after the database's
            with anyio.fail_after(timeout_ms / 1000 + 2):
                await conn.execute(BEGIN_READ_ONLY)
                # checked on every call: a grant may come after the integration
                powers = await (await conn.execute(_POWERS)).fetchone()
                if powers is None or powers[0]:
                    raise DatabaseError(TOO_POWERFUL)
                yield conn
        except TimeoutError:
            raise DatabaseError(
                f"the statement did not finish within {timeout_ms} ms and was cancelled"
            ) from None
        except psycopg.Error as exc:
            raise DatabaseError(self._clean(str(exc), where, connection)) from None
        finally:
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
                # a statement still running (the deadline struck): stop it first
                with suppress(psycopg.Error):
                    await conn.cancel_safe(timeout=2.0)
            await conn.close()

    # --- the port -----------------------------------------------------------------

    async def test(self, connection: str) -> None:
        async with self._session(connection, 5000) as conn:
            await conn.execute("SELECT 1")

    async def list_tables(self, target: DatabaseTarget) -> list[TableName]:
        async with self._session(target.connection, target.statement_timeout_ms) as conn:
            cur = await conn.execute(_LIST_TABLES, (MAX_TABLES,))
            rows = await cur.fetchall()
        return [TableName(schema=r[0], name=r[1], kind=_KINDS.get(r[2], r[2])) for r in rows]

    async def describe_table(
        self, target: DatabaseTarget, schema: str | None, name: str
    ) -> TableRows:
        async with self._session(target.connection, target.statement_timeout_ms) as conn:
            cur = await conn.execute(_DESCRIBE, {"schema": schema, "name": name})
            rows = await cur.fetchall()
        if not rows:
            shown = f"{schema}.{name}" if schema else name
            raise DatabaseError(
                f"no table or view {shown!r} that this role may read (names are case-sensitive)"
            )
        return TableRows(
            columns=("column", "type", "nullable", "default"), rows=[list(r) for r in rows]
        )

    async def query(self, target: DatabaseTarget, sql: str) -> TableRows:
        async with self._session(target.connection, target.statement_timeout_ms) as conn:
            return await run_query(conn, sql, target)
