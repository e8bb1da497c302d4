"""A ``query`` statement read through caps the database applies, so that no value
reaches the service whole.

The statement, once the database has parsed it alone (so its parentheses balance
and it ends where it seems to), is wrapped as a subquery::

    SELECT left('[' || <each value's JSON text, joined by ','> || ']', max_bytes + 1),
           ARRAY[<whether each value was cut>]
    FROM (SELECT * FROM (
    <statement>
    ) AS q0 ("1", "2", ...) OFFSET 0) AS q,
    LATERAL (SELECT <each column read as text or JSON text> OFFSET 0) AS t
    LIMIT max_rows + 1

Each value becomes JSON in the database, by the type the database describes (a
domain's is its base type's), as psycopg read it before: booleans, integers,
floats, JSON, dates and times, and arrays of these, as ``to_json`` writes them;
text as it is; ``bytea`` as ``\\x`` hex; numeric, UUID, interval and every other
type as the type writes itself (its output function); other built-in arrays as
lists of their elements' text. A value whose text (or, for a JSON value, whose JSON
text) is longer than ``cap`` characters is cut to its first ``cap`` in the
database, and the row says so; the service appends the mark. A row whose JSON is
longer than the whole answer may be arrives cut to one character more than that,
which is enough to drop it. ``t`` reads each column once (``OFFSET 0`` keeps the
database from evaluating it once per reference), and ``q`` keeps the statement
planned as it would be alone. The columns are renamed by position, so that
duplicate or odd names (``SELECT 1 AS a, 2 AS a``, ``?column?``) cannot clash;
their real names come from the database's description of the statement.

Why the statement cannot leave the subquery: it parsed alone as one complete
statement, so its quotes and comments are closed and its parentheses balance; on
lines of its own between ``(`` and ``)`` it is read token for token the same, and
the parenthesis after it is the one before it. What follows that parenthesis, and
the select list before it, are the service's.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec
from psycopg.postgres import types as builtin_types

__all__ = ["MARK", "capped_select", "row_values", "statement"]

MARK = "…"

# type oids (stable in every PostgreSQL) whose to_json is the value as psycopg read
# it: booleans, integers, floats, JSON, dates and times; and arrays of these and of text
_JSON_SCALARS = frozenset({16, 20, 21, 23, 700, 701, 114, 3802, 1082, 1083, 1266, 1114, 1184})
_JSON_ARRAYS = frozenset(
    {1000, 1016, 1005, 1007, 1021, 1022, 199, 3807, 1182, 1183, 1270, 1115, 1185}
    | {1009, 1015, 1014, 1003, 1002}  # text, varchar, char(n), name, "char"
)
_TEXT = frozenset({25, 1043, 19, 18})  # text, varchar, name, "char": read as they are
_OID, _OID_ARRAY, _BYTEA = 26, 1028, 17
# other arrays psycopg knew: a list of each element's text
_ARRAYS = frozenset(t.array_oid for t in builtin_types if t.array_oid) - _JSON_ARRAYS

_DOLLAR = re.compile(r"\$([A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)?\$")
_WORD = re.compile(r"[\w$\x80-\U0010ffff]")


def _skip_quoted(sql: str, i: int, quote: str, backslashes: bool) -> int:
    """The index after the closing ``quote`` of the literal opening at ``i``."""
    j = i + 1
    while j < len(sql):
        ch = sql[j]
        if backslashes and ch == "\\":
            j += 2
            continue
        if ch == quote:
            if sql.startswith(quote, j + 1):  # '' or "" inside
                j += 2
                continue
            return j + 1
        j += 1
    return len(sql)


def _skip_comment(sql: str, i: int) -> int:
    """The index after the (nested) block comment opening at ``i``."""
    depth, j = 0, i
    while j < len(sql):
        if sql.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif sql.startswith("*/", j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                return j
        else:
            j += 1
    return len(sql)


def statement(sql: str) -> str:
    """``sql`` without what may follow the statement and cannot go inside a
    subquery: trailing semicolons, comments and blanks.

    Scans as PostgreSQL's lexer does for what hides a ``;`` (quoted literals and
    names, dollar quotes, comments); whatever it misjudges, the database parses
    the result alone before it is wrapped, so a mistake here can refuse a
    statement but not change what the wrapper holds."""
    end = i = 0
    while i < len(sql):
        ch = sql[i]
        if ch.isspace() or ch == ";":
            i += 1
            continue
        if sql.startswith("--", i):
            newline = sql.find("\n", i)
            i = len(sql) if newline < 0 else newline + 1
            continue
        if sql.startswith("/*", i):
            i = _skip_comment(sql, i)
            continue
        word_before = i > 0 and _WORD.match(sql[i - 1]) is not None
        if ch == "'":
            escapes = i > 0 and sql[i - 1] in "eE" and not (i > 1 and _WORD.match(sql[i - 2]))
            i = _skip_quoted(sql, i, "'", escapes)
        elif ch == '"':
            i = _skip_quoted(sql, i, '"', False)
        elif ch == "$" and not word_before and (tag := _DOLLAR.match(sql, i)) is not None:
            closing = sql.find(tag.group(0), tag.end())
            i = len(sql) if closing < 0 else closing + len(tag.group(0))
        else:
            i += 1
        end = i
    return sql[:end]


def _read_as(col: str, oid: int) -> tuple[str, bool]:
    """The SQL of a column's value as text, and whether that text is JSON already
    (else it is the value of a JSON string)."""
    if oid in _TEXT:
        return f"{col}::text", False
    if oid == _BYTEA:
        return f"E'\\\\x' || encode({col}, 'hex')", False
    if oid == _OID:
        return f"to_json({col}::int8)::text", True
    if oid == _OID_ARRAY:
        return f"to_json({col}::int8[])::text", True
    if oid in _JSON_SCALARS or oid in _JSON_ARRAYS:
        return f"to_json({col})::text", True
    if oid in _ARRAYS:
        return f"to_json({col}::text[])::text", True
    # numeric, uuid, interval, ranges, records, domains' and extensions' types...: the
    # type's output, as psycopg read it (not ::text, which cuts char(n)'s padding
    # and adds inet's netmask); num_nulls keeps a record of nulls from being null
    return f"CASE WHEN num_nulls({col}) = 0 THEN format('%s', {col}) END", False


def _column(text: str, is_json: bool, cap: int) -> tuple[str, str]:
    """The SQL of one value's JSON text from its ``text`` (computed once), a value
    longer than ``cap`` characters cut to a string of its first ``cap``; and of
    whether it was cut."""
    cut = f"coalesce(length({text}) > {cap}, false)"
    if not is_json:
        return f"to_json(left({text}, {cap}))::text", cut
    return (
        f"CASE WHEN length({text}) > {cap} THEN to_json(left({text}, {cap}))::text ELSE {text} END",
        cut,
    )


def capped_select(stmt: str, oids: list[int], cap: int, max_bytes: int, max_rows: int) -> str:
    """``stmt`` (a statement the database described as answering rows of the
    types ``oids``) wrapped so that each row comes back as its JSON text, at most
    ``max_bytes + 1`` characters, with each value at most ``cap``, and with which
    values were cut; at most ``max_rows + 1`` rows."""
    names = [f'"{i + 1}"' for i in range(len(oids))]
    read = [_read_as(f"q.{n}", oid) for n, oid in zip(names, oids, strict=True)]
    columns = [_column(f"t.{n}", is_json, cap) for n, (_, is_json) in zip(names, read, strict=True)]
    texts = ", ".join(f"{sql} AS {n}" for n, (sql, _) in zip(names, read, strict=True))
    values, cuts = ", ".join(v for v, _ in columns), ", ".join(c for _, c in columns)
    # the statement is the caller's by design: the database parsed it alone first
    return (
        f"SELECT left('[' || array_to_string(ARRAY[{values}], ',', 'null') || ']',"  # noqa: S608
        f" {max_bytes + 1}), ARRAY[{cuts}]"
        f" FROM (SELECT * FROM (\n{stmt}\n) AS q0 ({', '.join(names)}) OFFSET 0) AS q,"
        f" LATERAL (SELECT {texts} OFFSET 0) AS t"
        f" LIMIT {max_rows + 1}"
    )


def _number(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


_decode = msgspec.json.Decoder(float_hook=_number)


def _plain(value: Any) -> Any:
    """A decoded JSON value as the answer keeps it: integers beyond 64 bits as text."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def row_values(text: str, cuts: list[bool], max_bytes: int) -> list[Any] | None:
    """One row of ``capped_select`` as JSON values, a cut value as text ending in
    the mark; None when the row alone is longer than ``max_bytes``."""
    if len(text) > max_bytes:
        return None
    values = [_plain(v) for v in _decode.decode(text)]
    for i, cut in enumerate(cuts):
        if cut:
            values[i] = f"{values[i]}{MARK}"
    return values
