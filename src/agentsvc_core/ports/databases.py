"""Outbound SQL databases: what database integrations need from a driver.

An adapter connects to the customer's database through the outbound guard (the
host resolved and checked by the adapter, then connected to by that address),
in a session that cannot write (``default_transaction_read_only`` and a
``READ ONLY`` transaction that is always rolled back), with a statement timeout,
a small lock timeout and a connect timeout; one statement per call.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from agentsvc_core.errors import DomainError

__all__ = ["DatabaseError", "DatabaseTarget", "SqlDatabases", "TableName", "TableRows"]


class DatabaseError(DomainError):
    """The database could not be reached, refused the connection or the statement
    (read-only, timeout, syntax...). ``detail`` is the reason, usually the
    database's own message: never the connection string or its password."""


class DatabaseTarget(msgspec.Struct, frozen=True, kw_only=True):
    """Where and within which bounds to run. ``connection`` is the opened
    (plaintext) URL: it lives only as long as the call."""

    connection: str
    max_rows: int
    max_bytes: int
    statement_timeout_ms: int


class TableName(msgspec.Struct, frozen=True, kw_only=True):
    schema: str
    name: str
    kind: str  # "table", "view", "materialized view", "foreign table", "partitioned table"


class TableRows(msgspec.Struct, frozen=True, kw_only=True):
    """A statement's result, capped: at most ``max_rows`` rows whose JSON fits in
    about ``max_bytes`` (``truncated`` says rows or long values were left out).
    Values are JSON values: numbers, strings (dates, decimals, bytes as text),
    booleans, null, lists and objects."""

    columns: tuple[str, ...]
    rows: list[list[Any]]
    truncated: bool = False


class SqlDatabases(Protocol):
    """Every method raises ``DatabaseError`` with a readable reason."""

    async def test(self, connection: str) -> None:
        """Connect and run ``SELECT 1`` in a read-only transaction."""
        ...

    async def list_tables(self, target: DatabaseTarget) -> list[TableName]:
        """The tables and views the connecting role can see (system schemas left
        out), by schema and name."""
        ...

    async def describe_table(
        self, target: DatabaseTarget, schema: str | None, name: str
    ) -> TableRows:
        """The columns of one table or view (``schema`` None: any schema, the
        search path's first): name, type, nullable, default. Raises
        ``DatabaseError`` when the role can see no such table."""
        ...

    async def query(self, target: DatabaseTarget, sql: str) -> TableRows:
        """Run one statement read-only; a second statement is refused. The bounds
        hold before the answer reaches the service (no value arrives whole): a
        statement whose rows the adapter cannot read within them is refused with
        ``DatabaseError``, not run."""
        ...
