"""What the database integrations' adapter does to a statement before the database
sees it (``agentsvc_adapters.sqldb.capped``): the end it cuts, the wrapper, the rows
it decodes. The database's side is in tests/contract/test_sqldb_postgres.py."""

from __future__ import annotations

import pytest

from agentsvc_adapters.sqldb.capped import capped_select, row_values, statement


@pytest.mark.parametrize(
    ("sql", "kept"),
    [
        ("SELECT 1", "SELECT 1"),
        ("SELECT 1;", "SELECT 1"),
        ("  SELECT 1 ; ;\n", "  SELECT 1"),
        ("SELECT 1; -- done", "SELECT 1"),
        ("SELECT 1 -- done;", "SELECT 1"),
        ("SELECT 1 /* a /* nested */ comment; */ ;", "SELECT 1"),
        ("SELECT /* inside */ 1;", "SELECT /* inside */ 1"),
        ("SELECT ';'", "SELECT ';'"),
        ("SELECT 'it''s;' ;", "SELECT 'it''s;'"),
        ("SELECT E'\\';' ;", "SELECT E'\\';'"),
        ("SELECT e'a\\\\'; -- c", "SELECT e'a\\\\'"),
        ("SELECT '\\' ; ", "SELECT '\\'"),  # backslash is no escape in a plain literal
        ('SELECT 1 AS "a;""b" ;', 'SELECT 1 AS "a;""b"'),
        ("SELECT $$ ; -- $$;", "SELECT $$ ; -- $$"),
        ("SELECT $tag$ $$ ; $tag$ ;", "SELECT $tag$ $$ ; $tag$"),
        ("SELECT a$b$ FROM t; -- $b$", "SELECT a$b$ FROM t"),  # $ inside a name
        ("SELECT $1;", "SELECT $1"),
        ("SELECT 1; SELECT 2;", "SELECT 1; SELECT 2"),  # the database refuses the second
        ("", ""),
        (" ; -- nothing\n/* else */", ""),
        ("SELECT 'unclosed ;", "SELECT 'unclosed ;"),  # the database says what is wrong
        ("SELECT 1 /* unclosed ;", "SELECT 1"),
    ],
)
def test_statement_cuts_only_what_follows_the_statement(sql: str, kept: str) -> None:
    assert statement(sql) == kept


def test_the_wrapper_holds_the_statement_between_lines_of_its_own() -> None:
    wrapped = capped_select("SELECT 1 -- c", [23, 25], cap=256, max_bytes=1024, max_rows=10)
    assert '(\nSELECT 1 -- c\n) AS q0 ("1", "2")' in wrapped
    assert wrapped.startswith("SELECT left(")
    assert ", 1025), ARRAY[" in wrapped
    assert wrapped.endswith(" LIMIT 11")


def test_row_values_marks_the_cut_values() -> None:
    assert row_values('[1, "abc", null, "{\\"a\\""]', [False, True, False, True], 100) == [
        1,
        "abc…",
        None,
        '{"a"…',
    ]
    assert row_values("[123456789012345678901234567890, 1e400, 2.5]", [False] * 3, 100) == [
        "123456789012345678901234567890",
        "1e400",
        2.5,
    ]


def test_a_row_longer_than_the_answer_is_none() -> None:
    # the database cuts a row's JSON to max_bytes + 1 characters: enough to tell
    assert row_values('["' + "y" * 97 + '"]', [False], 100) is None
    assert row_values('["' + "y" * 96 + '"]', [False], 100) == ["y" * 96]
