"""``query``: one statement, read through caps the database applies.

On the call's connection, in its read-only transaction:

1. the statement (trailing semicolons and comments cut, ``capped.statement``) is
   parsed and described by the database alone, over the extended protocol, which
   refuses a second statement; nothing runs yet;
2. a statement that answers no columns (``SET``, a write, which the read-only
   transaction then refuses with its own message) runs as it is: it can send
   back no value;
3. one that answers rows is wrapped as a subquery (``capped.capped_select``) that
   cuts every value, every row and the number of rows in the database; the
   wrapped statement is parsed before it runs, and one the wrapper cannot hold
   (``SHOW``, ``EXPLAIN``, ``CALL`` with results, a ``WITH`` holding a write) is
   refused, not run;
4. its rows are streamed and reading stops at ``max_rows`` rows or ``max_bytes``
   of JSON (the rest is cancelled).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, cast

import msgspec
import psycopg
from psycopg.errors import error_from_result
from psycopg.generators import execute as pq_execute
from psycopg.pq.abc import PGresult

from agentsvc_adapters.sqldb.capped import capped_select, row_values, statement
from agentsvc_core.ports import DatabaseError, DatabaseTarget, TableRows

__all__ = ["MAX_MESSAGE_CHARS", "NOT_A_QUERY", "cut_message", "run_query"]

# The longest database message a tool result carries. PostgreSQL puts the offending
# value in some messages (`invalid input syntax for type integer: "yyyy…"`), with no
# bound of its own: the model gets the start, which is what explains the error.
MAX_MESSAGE_CHARS = 2000


def cut_message(text: str) -> str:
    """``text`` cut to MAX_MESSAGE_CHARS, marked when it was."""
    if len(text) > MAX_MESSAGE_CHARS:
        return text[:MAX_MESSAGE_CHARS] + "… (message cut)"
    return text


NOT_A_QUERY = (
    "this statement answers rows but cannot be read as a subquery, which is how the"
    " service reads rows within its caps (SELECT, VALUES, TABLE and WITH ... SELECT"
    " without INSERT, UPDATE or DELETE can); it was not run"
)
TOO_DEEP = "a JSON value nests too deeply to be read (keep it under a few hundred levels)"
_enc = msgspec.json.Encoder()
Connection = psycopg.AsyncConnection[Any]


async def _answer(conn: Connection) -> PGresult:
    """The last result of what was just sent on ``conn``'s libpq connection; the
    database's error raised as psycopg raises it."""
    results: list[PGresult] = await conn.wait(pq_execute(conn.pgconn))
    for result in results:
        if result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
            raise error_from_result(result, encoding=conn.info.encoding)
    return results[-1]


async def _parse(conn: Connection, text: str) -> None:
    """The database parses ``text`` as the unnamed statement, and runs nothing."""
    try:
        command = text.encode(conn.info.encoding)
    except UnicodeEncodeError:
        raise DatabaseError(
            f"the statement has characters the database's encoding"
            f" ({conn.info.encoding}) cannot hold"
        ) from None
    conn.pgconn.send_prepare(b"", command)
    await _answer(conn)


async def _describe(conn: Connection, text: str) -> list[tuple[str, int]]:
    """The columns (name, type oid) of the rows ``text`` answers; none for a
    statement that answers none."""
    await _parse(conn, text)
    conn.pgconn.send_describe_prepared(b"")
    described = await _answer(conn)
    return [
        ((described.fname(i) or b"").decode(conn.info.encoding, "replace"), described.ftype(i))
        for i in range(described.nfields)
    ]


async def run_query(conn: Connection, sql: str, target: DatabaseTarget) -> TableRows:
    text = statement(sql)
    if not text:
        raise DatabaseError("the statement is empty (nothing but comments or ';')")
    columns = await _describe(conn, text)
    if not columns:
        return await _rowless(conn, text, target.max_rows)
    capped = capped_select(
        text,
        [oid for _, oid in columns],
        cap=max(256, target.max_bytes // 4),
        max_bytes=target.max_bytes,
        max_rows=target.max_rows,
    )
    try:
        await _parse(conn, capped)
    except psycopg.errors.SyntaxError:
        # the statement parsed alone: what fails now is the wrapper around it
        raise DatabaseError(NOT_A_QUERY) from None
    except (
        psycopg.errors.SyntaxErrorOrAccessRuleViolation,
        psycopg.errors.FeatureNotSupported,
    ) as exc:
        raise DatabaseError(cut_message(f"{NOT_A_QUERY} ({exc.diag.message_primary})")) from None
    return await _read(conn, capped, tuple(name for name, _ in columns), target)


async def _read(
    conn: Connection, capped: str, columns: tuple[str, ...], target: DatabaseTarget
) -> TableRows:
    """The rows of ``capped_select``, streamed until ``max_rows`` rows or
    ``max_bytes`` of JSON (the rest is cancelled)."""
    rows: list[list[Any]] = []
    size = 64 + len(_enc.encode(columns))  # the answer's envelope and column names
    truncated = False
    cur = conn.cursor()
    async with aclosing(cast("AsyncGenerator[Any]", cur.stream(capped))) as stream:
        async for text, cuts in stream:
            if len(rows) >= target.max_rows:
                truncated = True
                break
            try:
                values = row_values(text, cuts, target.max_bytes)
            except RecursionError:
                raise DatabaseError(TOO_DEEP) from None
            if values is None:  # the row alone is longer than the answer may be
                truncated = True
                break
            truncated = truncated or any(cuts)
            weight = len(_enc.encode(values)) + 1
            if size + weight > target.max_bytes:
                truncated = True
                break
            rows.append(values)
            size += weight
    return TableRows(columns=columns, rows=rows, truncated=truncated)


async def _rowless(conn: Connection, text: str, max_rows: int) -> TableRows:
    """A statement described as answering no columns, run as it is: ``SET``, a
    write (which the read-only transaction refuses), a ``SELECT`` of no column
    (rows without values, counted up to ``max_rows``)."""
    rows: list[list[Any]] = []
    cur = conn.cursor()
    try:
        async with aclosing(cast("AsyncGenerator[Any]", cur.stream(text))) as stream:
            async for _ in stream:
                if len(rows) >= max_rows:
                    return TableRows(columns=(), rows=rows, truncated=True)
                rows.append([])
    except psycopg.ProgrammingError as exc:
        # a statement that ran and answers no rows (SET, DO...): psycopg's stream()
        # says so only once it has finished
        if "didn't produce a result" not in str(exc):
            raise
    return TableRows(columns=(), rows=rows)
