"""The database integrations' guard (``agentsvc_adapters.sqldb``) where no database
is needed: what ``statement`` cuts, the integers kept as numbers, the connection
rules with their exact wording, the guard's refusals and counts, and the bounds on
finding and reaching a server (loopback only). Written to kill the mutants `make
mutation SELECTION=postgres` found alive (docs/development.md); what needs a
server is in tests/contract/test_sqldb_postgres.py."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest

from agentsvc_adapters.outbound import FAILURES
from agentsvc_adapters.sqldb import PostgresDatabases
from agentsvc_adapters.sqldb.capped import row_values, statement
from agentsvc_adapters.sqldb.query import MAX_MESSAGE_CHARS, cut_message
from agentsvc_core.ports import DatabaseError
from tests.outbound import closed_port, fake_dns

# --- what statement() cuts ---------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "kept"),
    [
        ("'a' ;", "'a'"),  # a statement that opens with a literal
        ('"a" ;', '"a"'),
        ("SELECT '' ;", "SELECT ''"),
        ("SELECT '''' ;", "SELECT ''''"),
        ("SELECT '','; x' ;", "SELECT '','; x'"),
        ("SELECT /**/ 1 ;", "SELECT /**/ 1"),
        ("SELECT /* a /* b */*/ 1 ;", "SELECT /* a /* b */*/ 1"),
        ("SELECT 1\n-- c\n+ 1 ;", "SELECT 1\n-- c\n+ 1"),
        ("SELECT 1 -- a\n+ 1 -- b\n;", "SELECT 1 -- a\n+ 1"),
        ("$$ -- $$::text", "$$ -- $$::text"),  # a dollar quote at the very start
        ("a$b$ FROM t; -- $b$", "a$b$ FROM t"),  # $ inside a name at the start
        ("$$a$$ -- $$\n;", "$$a$$"),  # the first closing tag ends the quote
        ("SELECT $$ unclosed ;", "SELECT $$ unclosed ;"),
        # a backslash escapes only in an E'' literal: E or e right before the quote,
        # itself not the end of a longer word
        ("SELECT 1 = '\\' ;", "SELECT 1 = '\\'"),
        ("'\\' -- note", "'\\'"),
        ("E'\\'' ;", "E'\\''"),
        ("e'\\'' -- c", "e'\\''"),
        ("SELECT e'\\'' ;", "SELECT e'\\''"),
        ("SELECT e'ab\\' ;", "SELECT e'ab\\' ;"),
        ("xe'\\' ;", "xe'\\'"),
        ("SELECT X'\\' ;", "SELECT X'\\'"),
        # in a quoted name, -- is no comment and a backslash no escape
        ('SELECT 1 AS "--" ;', 'SELECT 1 AS "--"'),
        ('SELECT 1 AS "a\\" ;', 'SELECT 1 AS "a\\"'),
    ],
)
def test_statement_reads_quotes_and_comments_as_postgresql_does(sql: str, kept: str) -> None:
    assert statement(sql) == kept


def test_integers_within_64_bits_stay_numbers_and_larger_ones_become_text() -> None:
    row = "[-9223372036854775809, -9223372036854775808, -200, 200, 9223372036854775807,"
    row += " 9223372036854775808, true, null]"
    assert row_values(row, [False] * 8, 1000) == [
        "-9223372036854775809",
        -9223372036854775808,
        -200,
        200,
        9223372036854775807,
        "9223372036854775808",
        True,
        None,
    ]


def test_a_message_of_exactly_the_limit_is_not_cut() -> None:
    assert cut_message("m" * MAX_MESSAGE_CHARS) == "m" * MAX_MESSAGE_CHARS
    assert cut_message("m" * (MAX_MESSAGE_CHARS + 1)) == "m" * MAX_MESSAGE_CHARS + (
        "… (message cut)"
    )


# --- the connection rules, as they read --------------------------------------------

ALLOWED = (
    "application_name, channel_binding, connect_timeout, dbname, host, password, port,"
    " sslmode, sslnegotiation, sslrootcert, user"
)
NOWHERE = PostgresDatabases(allow_private_network=True, resolver=fake_dns({}))


@pytest.mark.parametrize(
    ("connection", "detail"),
    [
        ("host=a.example dbname=orders", "the connection must be a postgresql:// URL"),
        ("mysql://a.example/orders", "the connection must be a postgresql:// URL"),
        (
            "postgres://a.example/orders?service=prod",
            f"the connection parameter 'service' is not allowed (allowed: {ALLOWED})",
        ),
        ("postgresql://a.example/orders?x=%zz", "the connection is not a valid postgresql:// URL"),
        (
            "postgresql://a.example/orders?sslrootcert=/etc/x.pem",
            "sslrootcert may only be 'system' (the system's trusted CAs)",
        ),
        (
            "postgresql://%40abstract/orders",  # libpq's abstract unix socket
            "refused by the outbound guard: unix sockets are not allowed (give a host name)",
        ),
        (
            "postgresql://a.example,b.example/orders?port=5432",
            "the connection must name one host and one port",
        ),
        (
            "postgresql://a.example/orders?port=5432,5433",
            "the connection must name one host and one port",
        ),
        (
            "postgresql://a.example/orders?sslmode=strict",
            "sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full",
        ),
        (
            "postgresql://a.example/orders?sslnegotiation=fast",
            "sslnegotiation must be one of postgres, direct",
        ),
        (
            "postgresql://a.example/orders?channel_binding=maybe",
            "channel_binding must be one of disable, prefer, require",
        ),
        (
            "postgresql://a.example/orders?connect_timeout=soon",
            "connect_timeout must be a whole number of seconds",
        ),
        ("postgresql://a.example/orders?port=abc", "the port must be a number"),
        ("postgresql://a.example:0/orders", "the port must be between 1 and 65535"),
        ("postgresql://a.example:65536/orders", "the port must be between 1 and 65535"),
        (
            "postgresql://%21/orders",
            "refused by the outbound guard: '!' is not a valid host name",
        ),
    ],
)
async def test_connections_outside_the_rule_are_refused_in_so_many_words(
    connection: str, detail: str
) -> None:
    with pytest.raises(DatabaseError) as err:
        await NOWHERE.test(connection)
    assert err.value.detail == detail


@pytest.mark.parametrize(
    ("connection", "label", "reason"),
    [
        ("postgresql://%40abstract/orders", "unix_socket", "unix sockets are not allowed"),
        ("postgresql:///orders", "unix_socket", "unix sockets are not allowed"),
        ("postgresql://%21/orders", "invalid_url", "'!' is not a valid host name"),
    ],
)
async def test_a_refused_host_is_counted_and_logged_with_its_reason(
    caplog: pytest.LogCaptureFixture, connection: str, label: str, reason: str
) -> None:
    caplog.set_level(logging.WARNING, "agentsvc.outbound")
    before = FAILURES[label]
    with pytest.raises(DatabaseError):
        await NOWHERE.test(connection)
    assert FAILURES[label] == before + 1
    assert [r.getMessage() for r in caplog.records if r.name == "agentsvc.outbound"] == [
        f"outbound call refused by the outbound guard: {reason} [{label}]"
    ]


class _Lookups:
    """A resolver that records each lookup and answers ``answer``."""

    def __init__(self, answer: list[str]) -> None:
        self.answer = answer
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return self.answer


@pytest.mark.parametrize(
    ("connection", "port"),
    [
        ("postgresql://u:pw@db.example/orders", 5432),  # the default port
        ("postgresql://u:pw@db.example:1/orders", 1),
        ("postgresql://u:pw@db.example:65535/orders", 65535),
    ],
)
async def test_a_name_is_looked_up_at_the_port_of_the_connection(
    connection: str, port: int
) -> None:
    lookups = _Lookups([])
    before = FAILURES["unreachable"]
    with pytest.raises(DatabaseError) as err:
        await PostgresDatabases(allow_private_network=True, resolver=lookups).test(connection)
    assert err.value.detail == f"could not reach db.example:{port}"
    assert lookups.asked == [("db.example", port)]
    assert FAILURES["unreachable"] == before + 1


async def test_an_address_in_the_connection_is_checked_without_a_lookup() -> None:
    lookups = _Lookups(["93.184.216.34"])
    guarded = PostgresDatabases(allow_private_network=False, resolver=lookups)
    with pytest.raises(DatabaseError) as err:
        await guarded.test("postgresql://u:pw@10.0.0.1/orders")
    assert (
        err.value.detail == "refused by the outbound guard: 10.0.0.1 resolves to a private address"
    )
    assert lookups.asked == []


async def test_a_lookup_that_hangs_is_bounded_by_the_connect_timeout() -> None:
    async def hanging(host: str, port: int) -> list[str]:
        await asyncio.sleep(30)
        return []

    databases = PostgresDatabases(
        allow_private_network=True, resolver=hanging, connect_timeout_s=0.1
    )
    started = time.monotonic()
    with pytest.raises(DatabaseError) as err:
        await databases.test("postgresql://u:pw@db.example/orders")
    assert time.monotonic() - started < 2
    assert err.value.detail == "could not reach db.example:5432"


async def test_a_port_nobody_listens_on_is_unreachable_and_counted_once() -> None:
    with closed_port() as port:
        before = FAILURES["unreachable"]
        with pytest.raises(DatabaseError) as err:
            await NOWHERE.test(f"postgresql://u:pw@127.0.0.1:{port}/orders")
    assert err.value.detail == f"could not reach 127.0.0.1:{port}"
    assert FAILURES["unreachable"] == before + 1


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A loopback port that accepts connections and never says a word."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await reader.read()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_server_that_never_answers_is_left_a_second_after_the_connect_timeout(
    silent_port: int,
) -> None:
    """libpq's own connect timeout is whole seconds, two at least; the call is
    bounded at the configured timeout plus one second."""
    databases = PostgresDatabases(allow_private_network=True, connect_timeout_s=0.05)
    started = time.monotonic()
    with pytest.raises(DatabaseError) as err:
        await databases.test(f"postgresql://u:pw@127.0.0.1:{silent_port}/orders")
    assert time.monotonic() - started < 1.8
    assert err.value.detail == f"could not reach 127.0.0.1:{silent_port}"
