"""The database each scenario runs on: a fresh one on an external server, else embedded.

The admin URL is ``AGENTSVC_BENCH_DATABASE_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``. When it answers, each scenario gets
``agentsvc_bench_<random>`` (created here, dropped with ``WITH (FORCE)`` afterwards).
When it does not, the service runs its embedded PostgreSQL in a temporary data folder
(mode 0711, so the unprivileged user the embedded server runs as when we are root can
reach its ``pgdata``), removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench.procs import children_of, postgres_backends

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def admin_url() -> str:
    return os.environ.get("AGENTSVC_BENCH_DATABASE_URL") or DEFAULT_ADMIN_URL


def server_answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@dataclass
class Database:
    """One scenario's database. ``env`` goes into the service's environment."""

    env: dict[str, str]
    name: str
    external: bool
    data_dir: Path | None = None

    def backend_pids(self) -> list[int]:
        """The server processes that do this database's work (for CPU accounting)."""
        if self.external:
            return postgres_backends(self.name)
        assert self.data_dir is not None
        pid_file = self.data_dir / "pgdata" / "cluster" / "postmaster.pid"
        try:
            postmaster = int(pid_file.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return []
        return [postmaster, *children_of(postmaster)]


class Databases:
    """Creates and drops the scenario databases (or manages the embedded data folder)."""

    def __init__(self) -> None:
        self.admin = admin_url()
        self.external = server_answers(self.admin)
        self.created: list[str] = []
        self._tmp: Path | None = None
        self.version = ""

    def describe(self) -> str:
        if self.external:
            safe = conninfo_to_dict(self.admin)
            safe.pop("password", None)
            return f"external server {make_conninfo('', **safe)} ({self.version})"
        return f"embedded PostgreSQL in a temporary data folder ({self.version})"

    def fresh(self) -> Database:
        if self.external:
            name = f"agentsvc_bench_{secrets.token_hex(4)}"
            with psycopg.connect(self.admin, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
                if not self.version:
                    row = conn.execute("SHOW server_version").fetchone()
                    self.version = f"PostgreSQL {row[0]}" if row else ""
            self.created.append(name)
            params = conninfo_to_dict(self.admin)
            params["dbname"] = name
            return Database({"AGENTSVC_DATABASE_URL": make_conninfo("", **params)}, name, True)
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="agentsvc-bench-"))
            self._tmp.chmod(0o711)
        return Database({"AGENTSVC_DATA_DIR": str(self._tmp)}, "agentsvc", False, self._tmp)

    def note_embedded_version(self) -> None:
        """Once the service has started the embedded server: its major version."""
        if self.external or self._tmp is None or self.version:
            return
        with contextlib.suppress(OSError):
            major = (self._tmp / "pgdata" / "cluster" / "PG_VERSION").read_text().strip()
            self.version = f"PostgreSQL {major} (embedded)"

    def drop(self, db: Database) -> None:
        if not db.external or db.name not in self.created:
            return
        with contextlib.suppress(psycopg.Error):
            with psycopg.connect(self.admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')
            self.created.remove(db.name)

    def close(self) -> None:
        for name in list(self.created):
            self.drop(Database({}, name, True))
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
