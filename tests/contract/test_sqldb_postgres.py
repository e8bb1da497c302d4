"""The database integrations' adapter (``agentsvc_adapters.sqldb``) against the real
PostgreSQL on loopback: a database of its own with a table, read by a role that
owns it (so only the session, not privileges, keeps writes out)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agentsvc_adapters import sqldb
from agentsvc_adapters.sqldb import PostgresDatabases
from agentsvc_adapters.sqldb.query import NOT_A_QUERY
from agentsvc_core.ports import DatabaseError, DatabaseTarget
from agentsvc_core.use_cases.integrations import result_json
from tests.pg import fresh_database, reader_role

pytestmark = pytest.mark.postgres

PASSWORD = "integration-pw-7c1e9a"


@pytest.fixture(scope="module")
def db_url(pg_admin_url: str) -> Iterator[str]:
    """A database with ``orders`` (50 rows) and ``secrets``, and a login role that
    owns both, as a ``postgresql://`` URL with a password."""
    role = f"integ_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(PASSWORD)
            )
        )
    try:
        with fresh_database(pg_admin_url) as url:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    "CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL,"
                    " price numeric(8, 2), placed date DEFAULT '2026-01-02', blob bytea)"
                )
                conn.execute(
                    "INSERT INTO orders SELECT g, 'item ' || g, g * 1.25, '2026-01-02',"
                    " '\\x00ff' FROM generate_series(1, 50) g"
                )
                conn.execute("CREATE SCHEMA vault")
                conn.execute("CREATE TABLE vault.secrets (k text)")
                conn.execute(
                    sql.SQL("GRANT ALL ON SCHEMA vault TO {}").format(sql.Identifier(role))
                )
                for table in ("orders", "vault.secrets"):
                    conn.execute(
                        sql.SQL("ALTER TABLE {} OWNER TO {}").format(
                            sql.SQL(table), sql.Identifier(role)
                        )
                    )
            d = conninfo_to_dict(url)
            yield (
                f"postgresql://{role}:{PASSWORD}@{d.get('host', '127.0.0.1')}:"
                f"{d.get('port', '5432')}/{d['dbname']}"
            )
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def target(url: str, **over: int) -> DatabaseTarget:
    bounds = {"max_rows": 200, "max_bytes": 64 * 1024, "statement_timeout_ms": 2000, **over}
    return DatabaseTarget(connection=url, **bounds)


def count(admin_url: str, db_url: str) -> int:
    dbname = conninfo_to_dict(db_url)["dbname"]
    with psycopg.connect(make_conninfo(admin_url, dbname=dbname)) as conn:
        row = conn.execute("SELECT count(*) FROM orders").fetchone()
        assert row is not None
        return int(row[0])


OPEN = PostgresDatabases(allow_private_network=True)


async def test_select_answers_json_values(db_url: str) -> None:
    await OPEN.test(db_url)
    rows = await OPEN.query(
        target(db_url), "SELECT id, item, price, placed, blob FROM orders WHERE id <= 2 ORDER BY id"
    )
    assert rows.columns == ("id", "item", "price", "placed", "blob")
    assert rows.rows == [
        [1, "item 1", "1.25", "2026-01-02", "\\x00ff"],
        [2, "item 2", "2.50", "2026-01-02", "\\x00ff"],
    ]
    assert not rows.truncated
    assert json.loads(result_json(rows))["row_count"] == 2


@pytest.mark.parametrize(
    ("statement", "verb"),
    [
        ("INSERT INTO orders (id, item) VALUES (999, 'x')", "INSERT"),
        ("UPDATE orders SET item = 'x'", "UPDATE"),
        ("DELETE FROM orders", "DELETE"),
        ("CREATE TABLE evil (a int)", "CREATE TABLE"),
        ("DROP TABLE orders", "DROP TABLE"),
        ("SELECT * FROM orders FOR UPDATE", "SELECT FOR UPDATE"),
    ],
)
async def test_writes_are_refused_by_the_database(
    db_url: str, pg_admin_url: str, statement: str, verb: str
) -> None:
    with pytest.raises(DatabaseError) as err:
        await OPEN.query(target(db_url), statement)
    assert err.value.detail == f"cannot execute {verb} in a read-only transaction"
    assert count(pg_admin_url, db_url) == 50


async def test_a_write_inside_with_is_refused_before_it_runs(
    db_url: str, pg_admin_url: str
) -> None:
    # it answers rows, so it runs only as a subquery, where the database refuses it
    with pytest.raises(DatabaseError) as err:
        await OPEN.query(
            target(db_url),
            "WITH gone AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM gone",
        )
    assert err.value.detail.startswith(NOT_A_QUERY)
    assert "data-modifying statement" in err.value.detail
    assert count(pg_admin_url, db_url) == 50


async def test_a_session_setting_does_not_outlive_its_call(db_url: str, pg_admin_url: str) -> None:
    # each call is a connection of its own, rolled back: the next one is read-only again
    await OPEN.query(target(db_url), "SET default_transaction_read_only = off")
    with pytest.raises(DatabaseError, match="read-only transaction"):
        await OPEN.query(target(db_url), "INSERT INTO orders (id, item) VALUES (998, 'x')")
    # ... and a statement cannot leave the read-only transaction it runs in
    with pytest.raises(DatabaseError, match="read-write mode must be set before any query"):
        await OPEN.query(
            target(db_url),
            "SELECT set_config('transaction_read_only', 'off', true), count(*) FROM orders",
        )
    assert count(pg_admin_url, db_url) == 50


# The two read-only layers (the session's default, the call's READ ONLY transaction)
# are each enough alone: a test takes one away and the other still refuses writes.
INSERT = "INSERT INTO orders (id, item) VALUES (997, 'x')"
READ_ONLY = (
    "SELECT current_setting('default_transaction_read_only') AS by_default,"
    " current_setting('transaction_read_only') AS now"
)


async def test_the_read_only_transaction_alone_refuses_writes(
    db_url: str, pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqldb, "READ_ONLY_SESSION", "")
    # the session now defaults to read-write: only the transaction is read-only
    assert (await OPEN.query(target(db_url), READ_ONLY)).rows == [["off", "on"]]
    with pytest.raises(DatabaseError) as err:
        await OPEN.query(target(db_url), INSERT)
    assert err.value.detail == "cannot execute INSERT in a read-only transaction"
    assert count(pg_admin_url, db_url) == 50


async def test_the_read_only_session_alone_refuses_writes(
    db_url: str, pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqldb, "BEGIN_READ_ONLY", "BEGIN")
    # a plain BEGIN: the transaction is read-only by the session's default alone
    assert (await OPEN.query(target(db_url), READ_ONLY)).rows == [["on", "on"]]
    with pytest.raises(DatabaseError) as err:
        await OPEN.query(target(db_url), INSERT)
    assert err.value.detail == "cannot execute INSERT in a read-only transaction"
    assert count(pg_admin_url, db_url) == 50


async def test_without_either_layer_a_write_would_run(
    db_url: str, pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the two tests above take away is what keeps writes out: with neither,
    the role (the table's owner) writes; the call's end rolls the write back."""
    monkeypatch.setattr(sqldb, "READ_ONLY_SESSION", "")
    monkeypatch.setattr(sqldb, "BEGIN_READ_ONLY", "BEGIN")
    assert (await OPEN.query(target(db_url), READ_ONLY)).rows == [["off", "off"]]
    done = await OPEN.query(target(db_url), INSERT)
    assert done.rows == []
    assert count(pg_admin_url, db_url) == 50


async def test_a_second_statement_is_refused(db_url: str, pg_admin_url: str) -> None:
    with pytest.raises(DatabaseError, match="multiple commands"):
        await OPEN.query(target(db_url), "SELECT 1; DELETE FROM orders")
    with pytest.raises(DatabaseError, match="multiple commands"):
        await OPEN.query(target(db_url), "SELECT 1; COMMIT; DELETE FROM orders")
    assert count(pg_admin_url, db_url) == 50


async def test_row_cap(db_url: str) -> None:
    rows = await OPEN.query(target(db_url, max_rows=7), "SELECT id FROM orders ORDER BY id")
    assert [r[0] for r in rows.rows] == [1, 2, 3, 4, 5, 6, 7]
    assert rows.truncated
    exact = await OPEN.query(target(db_url, max_rows=50), "SELECT id FROM orders")
    assert len(exact.rows) == 50
    assert not exact.truncated


async def test_byte_cap(db_url: str) -> None:
    capped = target(db_url, max_bytes=1024)
    rows = await OPEN.query(capped, "SELECT id, item, repeat('x', 40) FROM orders ORDER BY id")
    answer = result_json(rows)
    assert len(answer.encode()) <= 1024
    assert rows.truncated
    assert 5 < len(rows.rows) < 50
    # one value longer than the answer may be is cut, not dropped with its row
    long = await OPEN.query(capped, "SELECT repeat('y', 100000) AS big")
    assert long.truncated
    assert len(long.rows) == 1
    assert long.rows[0][0].startswith("yyy")
    assert len(result_json(long).encode()) <= 1024


async def test_values_keep_their_json_types(db_url: str) -> None:
    rows = await OPEN.query(
        target(db_url),
        "SELECT 7::int8, 2::int2, 1.5::float8, 'NaN'::float8, 1.50::numeric(6, 2), true,"
        " NULL::text, 'tea'::text, 'ab'::char(4), '2026-01-02'::date,"
        " '2026-01-02 10:00+00'::timestamptz, '12:30'::time, '1 day 2 hours'::interval,"
        " '\\x00ff'::bytea, '8a1f50d8-3c1e-4b8a-9b55-9f7c0a3c2f11'::uuid, '10.0.0.1'::inet,"
        " ARRAY[1, NULL, 3], ARRAY[1.5, 2.25], ARRAY['a', 'b'], ARRAY[[true], [false]],"
        ' \'{"a": [1, "x", null], "big": 123456789012345678901234567890}\'::jsonb,'
        " '[1e400]'::json, 12345678901234567890123::numeric, 26::oid, int4range(1, 5),"
        " row(1, 'a'), NULL::numeric",
    )
    assert rows.rows == [
        [
            7,
            2,
            1.5,
            "NaN",
            "1.50",
            True,
            None,
            "tea",
            "ab  ",
            "2026-01-02",
            "2026-01-02T10:00:00+00:00",
            "12:30:00",
            "1 day 02:00:00",
            "\\x00ff",
            "8a1f50d8-3c1e-4b8a-9b55-9f7c0a3c2f11",
            "10.0.0.1",
            [1, None, 3],
            ["1.5", "2.25"],
            ["a", "b"],
            [[True], [False]],
            {"a": [1, "x", None], "big": "123456789012345678901234567890"},
            ["1e400"],
            "12345678901234567890123",
            26,
            "[1,5)",
            "(1,a)",
            None,
        ]
    ]
    assert not rows.truncated


async def test_columns_keep_their_names_and_order(db_url: str) -> None:
    rows = await OPEN.query(target(db_url), "SELECT 1 AS a, 2 AS a, 3, 'x' AS \"1\", 4 AS b")
    assert rows.columns == ("a", "a", "?column?", "1", "b")
    assert rows.rows == [[1, 2, 3, "x", 4]]
    empty = await OPEN.query(target(db_url), "SELECT id, item FROM orders WHERE false")
    assert (empty.columns, empty.rows, empty.truncated) == (("id", "item"), [], False)


@pytest.mark.parametrize(
    "statement",
    [
        "VALUES (1, 'a'), (2, NULL), (3, 'c')",
        "TABLE orders",
        "WITH o AS (SELECT id FROM orders) SELECT id FROM o",
        "(SELECT id FROM orders) UNION ALL (SELECT 2)",
        "SELECT id FROM orders ORDER BY id DESC",
        "SELECT id FROM orders;",
        "SELECT id FROM orders ; ; -- done",
        "/* first */ SELECT id FROM orders /* last */;",
        "SELECT id FROM orders WHERE item <> ';' -- not the end\n;\n",
        "SELECT id FROM orders WHERE item <> $$;$$ AND item <> $x$ -- $x$;",
    ],
)
async def test_queries_in_every_form_are_read(db_url: str, statement: str) -> None:
    rows = await OPEN.query(target(db_url, max_rows=2), statement)
    assert len(rows.rows) == 2
    assert rows.truncated


async def test_order_is_kept(db_url: str) -> None:
    rows = await OPEN.query(target(db_url, max_rows=3), "SELECT id FROM orders ORDER BY id DESC")
    assert rows.rows == [[50], [49], [48]]


@pytest.mark.parametrize(
    "statement",
    ["SHOW work_mem", "EXPLAIN SELECT 1", "EXPLAIN ANALYZE SELECT pg_sleep(5)"],
)
async def test_statements_answering_rows_outside_a_query_are_refused_not_run(
    db_url: str, statement: str
) -> None:
    # EXPLAIN ANALYZE would run its statement, here into the statement timeout
    with pytest.raises(DatabaseError) as err:
        await OPEN.query(target(db_url, statement_timeout_ms=300), statement)
    assert err.value.detail == NOT_A_QUERY


async def test_statements_answering_no_rows_run_as_they_are(db_url: str) -> None:
    done = await OPEN.query(target(db_url), "SET work_mem = '8MB';")
    assert (done.columns, done.rows, done.truncated) == ((), [], False)
    # a SELECT of no column answers rows without values, counted to max_rows
    rows = await OPEN.query(target(db_url, max_rows=3), "SELECT FROM orders")
    assert (rows.columns, rows.rows, rows.truncated) == ((), [[], [], []], True)


@pytest.mark.parametrize("statement", ["", " ;; ", "-- nothing", "/* nothing */ ;"])
async def test_an_empty_statement_is_refused(db_url: str, statement: str) -> None:
    with pytest.raises(DatabaseError) as err:
        await OPEN.query(target(db_url), statement)
    assert err.value.detail == "the statement is empty (nothing but comments or ';')"


@pytest.mark.parametrize(
    "statement",
    [
        # close the wrapper's parenthesis, then answer an uncut value at the top level
        "SELECT 1) q UNION ALL SELECT repeat('y', 100000) FROM (SELECT 1",
        'SELECT 1 AS "1") AS q0 ("1") OFFSET 0) AS q, LATERAL (SELECT 1 AS "1") AS t'
        " UNION ALL SELECT repeat('y', 100000), ARRAY[false] FROM (SELECT * FROM (SELECT 1",
        "SELECT 1 -- \n) q UNION ALL SELECT repeat('y', 100000) FROM (SELECT 1",
    ],
)
async def test_a_statement_cannot_leave_the_wrapper(db_url: str, statement: str) -> None:
    # the database parses the statement alone first: its parentheses must balance
    with pytest.raises(DatabaseError, match="syntax error"):
        await OPEN.query(target(db_url), statement)


@pytest.mark.parametrize(
    ("value", "answer"),
    [
        ("repeat('y', 300)", "y" * 256 + "…"),
        ("repeat('é', 256)", "é" * 256),  # 256 characters: not cut
        # a JSON value too long becomes a string: the start of its JSON text, and the mark
        ("to_jsonb(repeat('w', 300))", '"' + "w" * 255 + "…"),
        ("ARRAY[repeat('z', 300)]", '["' + "z" * 254 + "…"),
        ("decode(repeat('ff', 200), 'hex')", "\\x" + "f" * 254 + "…"),
        ("repeat('9', 300)::numeric", "9" * 256 + "…"),
        ("'c'::char(300)", "c" + " " * 255 + "…"),  # padded, as the type writes itself
    ],
)
async def test_long_values_are_cut(db_url: str, value: str, answer: str) -> None:
    capped = target(db_url, max_bytes=1024)  # values of at most 256 characters
    rows = await OPEN.query(capped, f"SELECT {value}, 1 AS next")
    assert rows.rows == [[answer, 1]]
    assert rows.truncated == answer.endswith("…")
    assert len(result_json(rows).encode()) <= 1024


async def test_a_row_longer_than_the_answer_is_left_out(db_url: str) -> None:
    many = ", ".join(f"repeat('y', 250) AS c{i}" for i in range(10))
    rows = await OPEN.query(target(db_url, max_bytes=1024), f"SELECT {many}")
    assert (rows.rows, rows.truncated) == ([], True)
    assert len(rows.columns) == 10


async def test_a_value_nested_too_deeply_is_a_clear_error(db_url: str) -> None:
    nested = "(repeat('[', 2000) || repeat(']', 2000))::jsonb"
    with pytest.raises(DatabaseError, match="nests too deeply"):
        await OPEN.query(target(db_url, max_bytes=1024 * 1024), f"SELECT {nested}")
    # cut, it is a string
    assert (await OPEN.query(target(db_url, max_bytes=1024), f"SELECT {nested}")).truncated


async def test_a_statement_the_encoding_cannot_hold_is_refused(db_url: str) -> None:
    with pytest.raises(DatabaseError, match="cannot hold"):
        await OPEN.query(target(db_url), "SELECT '\ud800'")


async def test_statement_timeout(db_url: str) -> None:
    with pytest.raises(DatabaseError, match="statement timeout"):
        await OPEN.query(target(db_url, statement_timeout_ms=300), "SELECT pg_sleep(5)")


async def test_syntax_errors_are_the_databases_message(db_url: str) -> None:
    with pytest.raises(DatabaseError, match='syntax error at or near "SELEC"') as err:
        await OPEN.query(target(db_url), "SELEC 1")
    assert PASSWORD not in err.value.detail


async def test_a_long_error_message_is_cut(db_url: str) -> None:
    """PostgreSQL puts the offending value in the message, however long it is: the
    tool result carries its start only."""
    with pytest.raises(DatabaseError) as err:
        await OPEN.query(target(db_url), "SELECT repeat('y', 100000)::int")
    detail = err.value.detail
    assert detail.startswith('invalid input syntax for type integer: "yyy')
    assert detail.endswith("… (message cut)")
    assert len(detail) == 2000 + len("… (message cut)")
    with pytest.raises(DatabaseError) as err:
        await OPEN.query(target(db_url), "SELECT 'short'::int")
    assert err.value.detail.startswith('invalid input syntax for type integer: "short"')
    assert "(message cut)" not in err.value.detail


async def test_notices_are_not_sent(db_url: str) -> None:
    """A notice has no bound on its size and nothing reads it: the session asks the
    database not to send any (client_min_messages), whatever a statement raises."""
    async with OPEN._session(db_url, 2000) as conn:  # the session a call runs in
        heard: list[str] = []
        conn.add_notice_handler(lambda d: heard.append(d.message_primary or ""))
        await conn.execute("DO $$BEGIN RAISE NOTICE 'hello'; RAISE WARNING 'careful'; END$$")
        shown = await (await conn.execute("SHOW client_min_messages")).fetchone()
    assert heard == []
    assert shown == ("error",)


async def test_list_and_describe_tables(db_url: str) -> None:
    tables = await OPEN.list_tables(target(db_url))
    assert [(t.schema, t.name, t.kind) for t in tables] == [
        ("public", "orders", "table"),
        ("vault", "secrets", "table"),
    ]
    described = await OPEN.describe_table(target(db_url), None, "orders")
    assert described.columns == ("column", "type", "nullable", "default")
    assert described.rows[0] == ["id", "integer", False, None]
    assert described.rows[2] == ["price", "numeric(8,2)", True, None]
    assert described.rows[3][3] == "'2026-01-02'::date"
    qualified = await OPEN.describe_table(target(db_url), "vault", "secrets")
    assert qualified.rows == [["k", "text", True, None]]
    with pytest.raises(DatabaseError, match="no table or view 'nothing'"):
        await OPEN.describe_table(target(db_url), None, "nothing")
    with pytest.raises(DatabaseError, match=r"no table or view 'public\.secrets'"):
        await OPEN.describe_table(target(db_url), "public", "secrets")


async def test_loopback_is_refused_unless_private_networks_are_allowed(db_url: str) -> None:
    guarded = PostgresDatabases(allow_private_network=False)
    with pytest.raises(DatabaseError) as err:
        await guarded.test(db_url)
    assert err.value.detail.startswith("refused by the outbound guard:")
    assert "loopback" in err.value.detail
    assert PASSWORD not in err.value.detail
    localhost = db_url.replace("127.0.0.1", "localhost")
    with pytest.raises(DatabaseError, match="loopback"):
        await guarded.test(localhost)


async def test_names_are_resolved_and_checked_by_the_guard(db_url: str) -> None:
    """The adapter resolves the name itself and connects to the address it checked:
    a name only the test's resolver knows reaches the database; a name resolving to
    a private address is refused, whatever else it resolves to."""

    async def resolver(host: str, port: int) -> list[str]:
        return {"db.example": ["127.0.0.1"], "mixed.example": ["8.8.8.8", "10.1.2.3"]}[host]

    named = db_url.replace("127.0.0.1", "db.example")
    await PostgresDatabases(allow_private_network=True, resolver=resolver).test(named)
    guarded = PostgresDatabases(allow_private_network=False, resolver=resolver)
    with pytest.raises(DatabaseError, match=r"db\.example resolves to a loopback address"):
        await guarded.test(named)
    with pytest.raises(DatabaseError, match=r"mixed\.example resolves to a private address"):
        await guarded.test(db_url.replace("127.0.0.1", "mixed.example"))


@pytest.mark.parametrize(
    ("connection", "problem"),
    [
        ("postgresql:///orders", "unix sockets are not allowed"),
        ("postgresql://%2Ftmp/orders", "unix sockets are not allowed"),
        ("postgresql://u:p@/orders?host=/var/run/postgresql", "unix sockets are not allowed"),
        ("postgresql://a.example,b.example/orders", "one host"),
        (
            "postgresql://a.example/orders?options=-c%20default_transaction_read_only%3Doff",
            "'options' is not allowed",
        ),
        ("postgresql://a.example/orders?hostaddr=10.0.0.1", "'hostaddr' is not allowed"),
        ("postgresql://a.example/orders?service=prod", "'service' is not allowed"),
        ("postgresql://a.example/orders?sslrootcert=/etc/ssl/x.pem", "sslrootcert may only"),
        ("host=a.example dbname=orders", "postgresql:// URL"),
        ("postgresql://a.example:99999/orders", "port must be between 1 and 65535"),
    ],
)
async def test_connection_strings_outside_the_rule_are_refused(
    connection: str, problem: str
) -> None:
    with pytest.raises(DatabaseError) as err:
        await OPEN.test(connection)
    assert problem in err.value.detail


async def test_failures_name_no_secret(db_url: str) -> None:
    wrong_db = db_url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(DatabaseError) as err:
        await OPEN.test(wrong_db)
    assert err.value.detail.startswith("the database refused the connection:")
    assert "no_such_database" in err.value.detail
    assert PASSWORD not in err.value.detail
    # the same URL with port 9, where nothing listens (the embedded server has a port
    # of its own, so the port is replaced by name, not by ":5432")
    d = conninfo_to_dict(db_url)
    closed = f"postgresql://{d['user']}:{PASSWORD}@127.0.0.1:9/{d['dbname']}"
    with pytest.raises(DatabaseError) as err:
        await OPEN.test(closed)
    assert err.value.detail == "could not reach 127.0.0.1:9"


@pytest.mark.parametrize(
    "power",
    [
        "SUPERUSER",
        "a superuser role",
        "pg_execute_server_program",
        "pg_read_server_files",
        "pg_write_server_files",
        "pg_signal_backend",
    ],
)
async def test_a_role_that_can_act_on_the_server_is_refused(
    db_url: str, pg_admin_url: str, power: str
) -> None:
    """A read-only transaction does not stop SET ROLE, COPY ... TO PROGRAM,
    pg_read_file or pg_terminate_backend: such a role is refused at the test and at
    every call, a grant made later too."""
    user = conninfo_to_dict(db_url)["user"]
    assert isinstance(user, str)
    role = sql.Identifier(user)
    boss = sql.Identifier(f"boss_{uuid.uuid4().hex[:8]}")
    if power == "SUPERUSER":
        grant = [sql.SQL("ALTER ROLE {} SUPERUSER").format(role)]
        revoke = [sql.SQL("ALTER ROLE {} NOSUPERUSER").format(role)]
    elif power == "a superuser role":  # NOLOGIN, but SET ROLE reaches it
        grant = [
            sql.SQL("CREATE ROLE {} SUPERUSER NOLOGIN").format(boss),
            sql.SQL("GRANT {} TO {}").format(boss, role),
        ]
        revoke = [sql.SQL("DROP ROLE {}").format(boss)]
    else:
        grant = [sql.SQL("GRANT {} TO {}").format(sql.Identifier(power), role)]
        revoke = [sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(power), role)]
    await OPEN.test(db_url)  # an ordinary role: fine
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        for statement in grant:
            admin.execute(statement)
    try:
        with pytest.raises(DatabaseError, match="the role may act on the database server"):
            await OPEN.test(db_url)
        with pytest.raises(DatabaseError, match="the role may act on the database server"):
            await OPEN.query(target(db_url), "SELECT 1")
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            for statement in revoke:
                admin.execute(statement)
    assert (await OPEN.query(target(db_url), "SELECT 1 AS one")).rows == [[1]]


# --- the session's bounds, what a message may show, the caps at their edges ----------


SESSION = (
    "SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),"
    " current_setting('idle_in_transaction_session_timeout'),"
    " current_setting('default_transaction_read_only'), current_setting('application_name')"
)


@pytest.mark.parametrize(
    ("timeout_ms", "bounds"),
    [(2000, ["2s", "1s", "12s"]), (500, ["500ms", "500ms", "10500ms"])],
)
async def test_each_session_runs_within_the_integrations_bounds(
    db_url: str, timeout_ms: int, bounds: list[str]
) -> None:
    """The statement timeout is the integration's; a lock is waited for a second at
    most (never longer than a statement); a transaction left idle ends ten seconds
    after a statement would have."""
    rows = await OPEN.query(target(db_url, statement_timeout_ms=timeout_ms), SESSION)
    assert rows.rows == [[*bounds, "on", "agentsvc"]]


async def test_the_connections_application_name_is_kept(db_url: str) -> None:
    rows = await OPEN.query(target(db_url + "?application_name=reports"), SESSION)
    assert rows.rows[0][-1] == "reports"


async def test_a_short_connect_timeout_still_connects(db_url: str) -> None:
    await PostgresDatabases(allow_private_network=True, connect_timeout_s=0.5).test(db_url)


async def test_the_password_and_the_connection_are_cut_out_of_a_message(db_url: str) -> None:
    for shown in (PASSWORD, db_url):
        with pytest.raises(DatabaseError) as err:
            await OPEN.query(target(db_url), f"SELECT '{shown}'::int")
        # the message's first line; the statement follows it, cut the same way
        assert err.value.detail.splitlines()[0] == 'invalid input syntax for type integer: "***"'
        assert PASSWORD not in err.value.detail


@pytest.mark.parametrize(("password", "shown"), [("Zq7", "***"), ("Zq", "Zq")])
async def test_a_password_of_three_characters_is_cut_out_and_a_shorter_one_is_not(
    db_url: str, pg_admin_url: str, password: str, shown: str
) -> None:
    """Two characters are too common to cut from every message (and too short to
    be worth keeping secret)."""
    d = conninfo_to_dict(db_url)
    with reader_role(pg_admin_url, password) as role:
        url = f"postgresql://{role}:{password}@{d['host']}:{d['port']}/{d['dbname']}"
        with pytest.raises(DatabaseError) as err:
            await OPEN.query(target(url), f"SELECT '{password}'::int")
    assert err.value.detail.splitlines()[0] == (f'invalid input syntax for type integer: "{shown}"')


async def test_a_connection_that_fails_over_ssl_says_so(db_url: str) -> None:
    d = conninfo_to_dict(db_url)
    with pytest.raises(DatabaseError) as err:
        await OPEN.test(db_url + "?sslmode=verify-full&sslrootcert=system")
    assert err.value.detail == (
        f"could not connect to {d['host']}:{d['port']} over SSL (see sslmode)"
    )


async def test_each_value_is_cut_to_a_quarter_of_the_answer(db_url: str) -> None:
    capped = target(db_url, max_bytes=4096)  # values of at most 1024 characters
    rows = await OPEN.query(capped, "SELECT repeat('y', 1024), repeat('z', 1025)")
    assert rows.rows == [["y" * 1024, "z" * 1024 + "…"]]


async def test_rows_fill_the_answer_exactly_and_no_further(db_url: str) -> None:
    """The answer's size, as counted while reading: 64 bytes of envelope, the column
    names' JSON, and each row's JSON with its comma. Rows that reach max_bytes
    exactly are kept; one byte less and the last of them is not."""
    envelope = 64 + len('["g"]')
    each = len("[1]") + 1
    exactly = envelope + 5 * each
    statement = "SELECT g FROM generate_series(1, 9) g"
    rows = await OPEN.query(target(db_url, max_bytes=exactly), statement)
    assert (rows.rows, rows.truncated) == ([[1], [2], [3], [4], [5]], True)
    rows = await OPEN.query(target(db_url, max_bytes=exactly - 1), statement)
    assert rows.rows == [[1], [2], [3], [4]]


async def test_an_array_of_oids_is_a_list_of_numbers(db_url: str) -> None:
    rows = await OPEN.query(target(db_url), "SELECT ARRAY[26, 1043]::oid[], 26::oid")
    assert rows.rows == [[[26, 1043], 26]]


async def test_a_connection_without_a_password_fails_as_any_other(db_url: str) -> None:
    """No password in the URL: none is cut from messages, and a failure reads as
    the database's refusal (a server that trusts the role) or as unreachable (one
    that asks for a password, which the service does not take from its own
    environment)."""
    d = conninfo_to_dict(db_url)
    url = f"postgresql://{d['user']}@{d['host']}:{d['port']}/no_such_database"
    with pytest.raises(DatabaseError) as err:
        await OPEN.test(url)
    assert err.value.detail.startswith(
        ("the database refused the connection:", f"could not reach {d['host']}:{d['port']}")
    )


async def test_a_database_in_another_encoding_reads_its_messages_right(
    db_url: str, pg_admin_url: str
) -> None:
    name = f"latin1_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'"
                " TEMPLATE template0"
            ).format(sql.Identifier(name))
        )
    try:
        latin1 = db_url.rsplit("/", 1)[0] + f"/{name}"
        with pytest.raises(DatabaseError) as err:
            await OPEN.query(target(latin1), "SELECT 'café'::int")
        assert err.value.detail.splitlines()[0] == ('invalid input syntax for type integer: "café"')
        rows = await OPEN.query(target(latin1), "SELECT 'thé' AS \"boisson préférée\"")
        assert (rows.columns, rows.rows) == (("boisson préférée",), [["thé"]])
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
